//! Approvals you can prove (docs/approvals.md): receipts that bind a resolution to
//! the action it approved, the tenant's hash-chained audit log, and secret answers
//! that reach the waiting call only.

pub mod audit;
pub mod receipts;
pub mod secrets;

pub use audit::Audit;
pub use receipts::{DEFAULT_RECEIPT_TTL, Receipts};
