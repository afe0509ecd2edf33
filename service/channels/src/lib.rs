//! askgate's human channels: every way an ask reaches a person and an answer comes
//! back besides the gRPC API and MCP (docs/architecture.md, "Adding a channel").
//! - [`egress`]: the guarded HTTP sender every outbound channel uses, and IANA's
//!   special-purpose address registries behind its guard;
//! - [`sealed`] and [`secret`]: the tenants' secrets a channel keeps (bot tokens,
//!   signing secrets), sealed with the server's key, and secret values that never show.

pub mod egress;
pub mod sealed;
pub mod secret;
