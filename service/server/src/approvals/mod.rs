//! Approvals you can prove (docs/approvals.md): receipts that bind a resolution to
//! the action it approved.

pub mod receipts;

pub use receipts::{DEFAULT_RECEIPT_TTL, Receipts};
