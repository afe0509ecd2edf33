//! `askgate.v1.Receipts`: receipts made single use (docs/approvals.md). An executor
//! consumes a receipt before it runs the action it approves; a replay of it is then
//! `RECEIPT_CONSUMED`. The receipt is checked as the server signed it (its own keys,
//! not expired, the caller's tenant and a session the caller may use) before anything
//! is stored: a receipt of another tenant is refused as a forged one is.

use std::{
    sync::Arc,
    time::{Duration, SystemTime},
};

use askgate_contract::receipt::ReceiptError;
use askgate_proto::v1::{
    ConsumeReceiptRequest, ConsumeReceiptResponse, receipts_server::Receipts as ReceiptsService,
};
use tonic::{Request, Response, Status};
use tracing::{Span, debug, instrument};

use super::{Gate, failed};
use crate::{
    approvals::{Audit, Receipts},
    auth::Action,
    backend::audit::{self, Consumed},
    domain::Error,
};

/// Longest receipt taken, in bytes (a receipt lists at most ten approvers).
const MAX_RECEIPT_BYTES: usize = 8 * 1024;
/// How far a verifier's clock may be behind the server's (the SDKs' default): a use is
/// remembered this much past the last receipt's expiry.
const VERIFIER_LEEWAY: Duration = Duration::from_secs(60);

/// The `askgate.v1.Receipts` service.
pub struct ReceiptsApi {
    audit: Audit,
    gate: Gate,
    receipts: Option<Arc<Receipts>>,
    /// How long after a resolution a retried call still gets a receipt of it
    /// (`--request-retention`).
    request_retention: Duration,
}

impl ReceiptsApi {
    pub fn new(
        audit: Audit,
        gate: Gate,
        receipts: Option<Arc<Receipts>>,
        request_retention: Duration,
    ) -> Self {
        Self {
            audit,
            gate,
            receipts,
            request_retention,
        }
    }
}

#[tonic::async_trait]
impl ReceiptsService for ReceiptsApi {
    #[instrument(name = "ConsumeReceipt", skip_all, fields(tenant, rpc_id))]
    async fn consume_receipt(
        &self,
        request: Request<ConsumeReceiptRequest>,
    ) -> Result<Response<ConsumeReceiptResponse>, Status> {
        let _timer = self.gate.timer("ConsumeReceipt");
        let Some(receipts) = &self.receipts else {
            return Err(failed(Error::bad_request(
                "receipt",
                "this server signs no receipts (--receipt-key-file)",
            )));
        };
        let token = request.get_ref().receipt.trim();
        if token.len() > MAX_RECEIPT_BYTES {
            return Err(failed(Error::bad_request(
                "receipt",
                format!("must be at most {MAX_RECEIPT_BYTES} bytes"),
            )));
        }
        let refused = |why: &str| failed(Error::bad_request("receipt", why.to_owned()));
        let claims = match receipts.verify(token) {
            Ok(claims) => claims,
            Err(ReceiptError::Expired) => return Err(refused("has expired")),
            Err(_) => return Err(refused("is not a receipt this server signed")),
        };
        let caller = self
            .gate
            .admit(&request, Action::ConsumeReceipt, &claims.session_id)?;
        if *caller.tenant != claims.tenant {
            // Indistinguishable from a receipt the server never signed.
            return Err(refused("is not a receipt this server signed"));
        }
        Span::current().record("rpc_id", claims.jti.as_str());
        // Past this, no receipt of the ask is valid any more: a retried call gets one
        // for as long as the outcome is kept, and each lasts its ttl.
        let keep_until =
            SystemTime::now() + self.request_retention + receipts.ttl() + VERIFIER_LEEWAY;
        let entry = audit::consumption(
            &claims.tenant,
            &claims.jti,
            &claims.session_id,
            &caller.sub,
            &claims.decision,
        );
        match self
            .audit
            .consume(entry, &claims.jti, keep_until)
            .await
            .map_err(failed)?
        {
            Consumed::Now(at) => {
                debug!(decision = %claims.decision, "receipt consumed");
                Ok(Response::new(ConsumeReceiptResponse {
                    decision: claims.decision,
                    consumed_at: Some(at.into()),
                }))
            }
            Consumed::Before(at) => Err(failed(Error::ReceiptConsumed {
                consumed_at: audit::at(at).as_str().unwrap_or_default().to_owned(),
            })),
        }
    }
}
