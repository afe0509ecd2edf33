//! Approvals you can prove (docs/approvals.md): receipts that bind a resolution to
//! the action it approved, and the tenant's hash-chained audit log.

pub mod audit;
pub mod receipts;

pub use audit::Audit;
pub use receipts::{DEFAULT_RECEIPT_TTL, Receipts};
