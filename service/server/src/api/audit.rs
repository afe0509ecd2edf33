//! `askgate.v1.Audit`: a tenant's audit log, exported as a stream of records, oldest
//! first (docs/approvals.md). Needs the admin role, with a credential not limited to
//! some sessions; sees only the caller's tenant.

use std::{pin::Pin, sync::Arc, time::SystemTime};

use askgate_contract::receipt::HeadClaims;
use askgate_proto::v1::{
    AuditHead, AuditRecord, ExportAuditRequest, GetAuditHeadRequest,
    audit_server::Audit as AuditService,
};
use tokio_stream::Stream;
use tonic::{Request, Response, Status};
use tracing::instrument;

use super::{Gate, failed};
use crate::{
    approvals::{Audit, Receipts, audit::EXPORT_PAGE},
    auth::Action,
    backend::audit,
    domain::Error,
};

/// The `askgate.v1.Audit` service.
pub struct AuditApi {
    audit: Audit,
    gate: Gate,
    /// What signs the heads; without it a head goes unsigned.
    receipts: Option<Arc<Receipts>>,
}

impl AuditApi {
    pub fn new(audit: Audit, gate: Gate, receipts: Option<Arc<Receipts>>) -> Self {
        Self {
            audit,
            gate,
            receipts,
        }
    }
}

type Records = Pin<Box<dyn Stream<Item = Result<AuditRecord, Status>> + Send>>;

#[tonic::async_trait]
impl AuditService for AuditApi {
    type ExportAuditStream = Records;

    /// Reads the store a page at a time as the client takes the records, so an export
    /// of a long log holds one page in memory.
    #[instrument(name = "ExportAudit", skip_all, fields(tenant))]
    async fn export_audit(
        &self,
        request: Request<ExportAuditRequest>,
    ) -> Result<Response<Records>, Status> {
        let _timer = self.gate.timer("ExportAudit");
        let caller = self.gate.admit(&request, Action::ExportAudit, "")?;
        let ExportAuditRequest { after_seq, limit } = request.into_inner();
        let mut left = match limit {
            0 => usize::MAX,
            n => n as usize,
        };
        let (audit, tenant) = (self.audit.clone(), caller.tenant.clone());
        // The first page is read now, so that a store that cannot be read fails the call.
        let mut page = audit
            .export(&tenant, after_seq, EXPORT_PAGE.min(left))
            .await
            .map_err(failed)?;
        let records = async_stream(move |tx| async move {
            loop {
                let full = page.len() == EXPORT_PAGE.min(left);
                let next = page.last().map(|r| r.seq);
                for record in page.drain(..) {
                    if tx.send(Ok(record)).await.is_err() {
                        return;
                    }
                    left -= 1;
                }
                let (Some(after), true, true) = (next, full, left > 0) else {
                    return;
                };
                page = match audit.export(&tenant, after, EXPORT_PAGE.min(left)).await {
                    Ok(page) => page,
                    Err(e) => {
                        let _ = tx.send(Err(failed(e))).await;
                        return;
                    }
                };
            }
        });
        Ok(Response::new(records))
    }

    /// The head as of now, signed with the receipt key: taken after an export's last
    /// record, it proves the export ends there.
    #[instrument(name = "GetAuditHead", skip_all, fields(tenant))]
    async fn get_audit_head(
        &self,
        request: Request<GetAuditHeadRequest>,
    ) -> Result<Response<AuditHead>, Status> {
        let _timer = self.gate.timer("GetAuditHead");
        let caller = self.gate.admit(&request, Action::ExportAudit, "")?;
        let head = self.audit.head(&caller.tenant).await.map_err(failed)?;
        let claims = HeadClaims {
            tenant: caller.tenant.to_string(),
            seq: head.seq,
            hash: head.hash,
            at: audit::at(SystemTime::now())
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        };
        let jws = match &self.receipts {
            Some(receipts) => receipts
                .sign_head(&claims)
                .map_err(|e| failed(Error::Internal(format!("signing the audit head: {e:#}"))))?,
            None => String::new(),
        };
        Ok(Response::new(AuditHead {
            tenant: claims.tenant,
            seq: claims.seq,
            hash: claims.hash,
            at: claims.at,
            jws,
        }))
    }
}

/// A stream fed by `produce` through a small channel: it runs as the consumer reads,
/// and stops when the consumer goes away.
fn async_stream<F, Fut>(produce: F) -> Records
where
    F: FnOnce(tokio::sync::mpsc::Sender<Result<AuditRecord, Status>>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(produce(tx));
    Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))
}
