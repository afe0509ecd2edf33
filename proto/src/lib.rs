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

/// Encoded `FileDescriptorSet` of `askgate.v1` (with its imports), for server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("askgate_descriptor");
