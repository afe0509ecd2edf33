//! Receipts: what an executor checks before it runs an action a human approved
//! (docs/approvals.md).
//!
//! A resolution of an ask that carries an [`Action`] comes with a receipt: a compact
//! JWS signed by the server (EdDSA over Ed25519) whose claims bind the decision to
//! the tenant and the action's digest. [`verify_receipt`] checks the signature against
//! the server's published keys (`GET /.well-known/jwks.json`), the expiry, that the
//! receipt is of the executor's tenant, that the digest is the digest of the action
//! about to run, and that the decision is [`Decision::Approved`]: an executor handed
//! another tenant's approval, other arguments than the ones the human saw, or a
//! "Reject" refuses to run. [`Client::consume_receipt`](crate::Client::consume_receipt)
//! then makes it single use.
//!
//! The digests are SHA-256 over RFC 8785 canonical JSON, so the key order and the
//! spacing of the arguments do not matter, and any client in any language computes
//! the same digest. Arguments must be I-JSON (RFC 7493, [`ijson`]): a number a double
//! would change has no digest.

pub use askgate_contract::{
    answers::answers_value,
    canonical::canonical,
    digest::{DigestError, action_digest, answers_digest},
    ijson,
    receipt::*,
};

use crate::proto::Action;

/// Why [`verify_and_consume`] refused: the receipt, or the call that consumes it
/// (`RECEIPT_CONSUMED` when it was used before).
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The receipt does not approve this action for this tenant.
    #[error(transparent)]
    Receipt(#[from] ReceiptError),
    /// Consuming it failed: [`crate::Reason::ReceiptConsumed`] when it was used before.
    #[error(transparent)]
    Call(#[from] crate::Error),
}

/// The executor's whole check: [`verify_receipt`], then
/// [`Client::consume_receipt`](crate::Client::consume_receipt), so that the action
/// runs once however often the receipt is replayed. Returns the claims.
pub async fn verify_and_consume(
    client: &mut crate::Client,
    token: &str,
    keys: &JwkSet,
    tenant: &str,
    action: &Action,
) -> Result<Claims, CheckError> {
    let claims = verify_receipt(token, keys, tenant, action)?;
    client.consume_receipt(token).await?;
    Ok(claims)
}
