//! Generated code for the askgate wire contract (`proto/askgate/v1/*.proto`).
//!
//! Layout:
//! - [`v1`]: messages, the `UserQuestions` and `Agents` clients and servers;
//! - [`FILE_DESCRIPTOR_SET`]: the encoded descriptors, served through gRPC reflection.

/// `askgate.v1`: messages and services.
#[allow(missing_docs, clippy::all)]
pub mod v1 {
    tonic::include_proto!("askgate.v1");
}

impl std::fmt::Display for v1::ErrorReason {
    /// The wire name, as in `google.rpc.ErrorInfo.reason`: `NOT_PENDING`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str_name())
    }
}

impl std::str::FromStr for v1::ErrorReason {
    type Err = UnknownReason;

    /// Parses a wire name (`NOT_PENDING`); the zero value's name is not a reason.
    fn from_str(name: &str) -> Result<Self, UnknownReason> {
        Self::from_str_name(name)
            .filter(|r| *r != Self::Unspecified)
            .ok_or(UnknownReason)
    }
}

impl v1::ErrorReason {
    /// Every reason, in the order of the proto (without the zero value).
    pub fn all() -> impl Iterator<Item = Self> {
        (1..).map_while(|n| Self::try_from(n).ok())
    }
}

/// A reason name that is not one of [`v1::ErrorReason`]'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnknownReason;

impl std::fmt::Display for UnknownReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("not an askgate error reason")
    }
}

impl std::error::Error for UnknownReason {}

/// Encoded `FileDescriptorSet` of `askgate.v1` (with its imports), for server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("askgate_descriptor");
