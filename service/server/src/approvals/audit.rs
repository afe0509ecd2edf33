//! The audit log's use case (docs/approvals.md): what goes into a tenant's chain, when,
//! and reading it back. Every resolution is recorded from the engine's committed
//! `resolved` event, by the node's intake, before the engine forgets the event (on
//! Redis it stays in the session's outbox until then, so a node's death loses no
//! record, and one taken twice is recorded once); every admin change by the call that
//! made it.

use std::{sync::Arc, time::Duration};

use askgate_proto::v1::subscribe_response::Event;
use serde_json::{Map, Value};
use tracing::{error, warn};

use crate::{
    backend::{
        Asked, Committed,
        audit::{self, AuditEntry, AuditRecord, AuditStore},
    },
    domain::{Error, Resolver},
};

/// How long records are kept by default (`--audit-retention`).
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(90 * 24 * 3600);
/// How often records past retention are dropped.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);
/// Records one export reads from the store at a time.
pub const EXPORT_PAGE: usize = 1000;

/// The node's handle on the audit log. Cheap to clone.
#[derive(Clone)]
pub struct Audit {
    store: Arc<dyn AuditStore>,
}

impl Audit {
    pub fn new(store: Arc<dyn AuditStore>) -> Self {
        Self { store }
    }

    /// The records of the `resolved` events among `committed`, in order.
    pub fn entries(committed: &[Committed]) -> Vec<AuditEntry> {
        committed.iter().filter_map(resolution).collect()
    }

    /// Appends `entries` durably.
    pub async fn record(&self, entries: Vec<AuditEntry>) -> Result<(), Error> {
        match entries.is_empty() {
            true => Ok(()),
            false => self.store.append(entries).await,
        }
    }

    /// Records an admin change (`what`: `endpoint.created`, `slack.disconnected`, ...)
    /// that `by` made, with what it changed. The change is made already: a record that
    /// cannot be written is logged as an error.
    pub async fn admin(&self, tenant: &str, by: &Resolver, what: &str, details: Value) {
        let now = std::time::SystemTime::now();
        let mut fields = Map::new();
        fields.insert("kind".into(), format!("admin.{what}").into());
        fields.insert("at".into(), audit::at(now));
        fields.insert("subject".into(), by.subject.clone().into());
        fields.insert("channel".into(), by.channel.clone().into());
        fields.insert("details".into(), details);
        let entry = AuditEntry {
            tenant: tenant.to_owned(),
            id: format!("admin\u{1f}{}", uuid::Uuid::now_v7()),
            fields,
        };
        if let Err(e) = self.store.append(vec![entry]).await {
            error!(%tenant, what, "an admin change is NOT in the audit log: {e}");
        }
    }

    /// Records a quorum vote `by` cast on `pending` (the vote is durable in the engine
    /// already: a failure here fails the Answer, and a retry is ALREADY_APPROVED, so
    /// the vote stays unrecorded only if the store cannot be written at all).
    pub async fn vote(
        &self,
        key: &crate::domain::SessionKey,
        pending: &askgate_proto::v1::Requested,
        answers: &[askgate_proto::v1::QuestionAnswer],
        by: &Resolver,
    ) -> Result<(), Error> {
        let mut fields = Map::new();
        fields.insert("kind".into(), "ask.vote".into());
        fields.insert("at".into(), audit::at(std::time::SystemTime::now()));
        fields.insert("session_id".into(), key.session_id.to_string().into());
        fields.insert("rpc_id".into(), pending.rpc_id.clone().into());
        fields.insert("subject".into(), by.subject.clone().into());
        fields.insert("channel".into(), by.channel.clone().into());
        fields.insert("action_digest".into(), pending.action_digest.clone().into());
        fields.insert("answers".into(), audit::answers_json(answers));
        let entry = AuditEntry {
            tenant: key.tenant.to_string(),
            id: format!(
                "ask.vote\u{1f}{}\u{1f}{}\u{1f}{}",
                key.session_id, pending.rpc_id, by.subject
            ),
            fields,
        };
        self.store.append(vec![entry]).await
    }

    /// The tenant's records after `after_seq`, oldest first, at most `limit`.
    pub async fn export(
        &self,
        tenant: &str,
        after_seq: u64,
        limit: usize,
    ) -> Result<Vec<AuditRecord>, Error> {
        self.store.export(tenant, after_seq, limit).await
    }

    /// Drops records past `retention`, every hour, until the task is aborted.
    pub async fn prune_every_hour(self, retention: Duration) {
        loop {
            if let Err(e) = self.store.prune(retention).await {
                warn!("dropping audit records past retention failed: {e}");
            }
            tokio::time::sleep(PRUNE_EVERY).await;
        }
    }
}

/// The record of a `resolved` event (see [`audit::resolution`]).
fn resolution(committed: &Committed) -> Option<AuditEntry> {
    let Some(Event::Resolved(resolved)) = &committed.message.event else {
        return None;
    };
    let asked = committed.asked.as_ref().and_then(Asked::requested);
    Some(audit::resolution(
        &committed.tenant,
        resolved,
        asked.as_deref(),
    ))
}
