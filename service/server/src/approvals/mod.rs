//! Approvals you can prove (docs/approvals.md): receipts that bind a resolution to
//! the action it approved, the tenant's hash-chained audit log, and secret answers
//! that reach the waiting call only.

pub mod receipts;
pub mod secrets;

/// The audit log's use case, in the core beside the chain's rules (the channels' intake
/// records through it too).
pub use askgate_core::backend::audit_log as audit;
pub use audit::Audit;
pub use receipts::{DEFAULT_RECEIPT_TTL, Receipts};
