//! The audit log's use case (docs/approvals.md): what goes into a tenant's chain, when,
//! and reading it back. Every resolution is recorded from the engine's committed
//! `resolved` event, by the node's intake, before the engine forgets the event (on
//! Redis it stays in the session's outbox until then, so a node's death loses no
//! record, and one taken twice is recorded once; SQLite writes it in the resolution's
//! own commit, and the intake's report is then kept once). Every admin change's record
//! is kept by the hook store with the change itself: in the log already (memory,
//! SQLite), or until a node appends it ([`Audit::drain`], Redis).

use std::{sync::Arc, time::Duration};

use askgate_proto::v1::subscribe_response::Event;
use serde_json::{Map, Value};
use tracing::warn;

use crate::{
    backend::{
        Asked, Committed,
        audit::{self, AuditEntry, AuditRecord, AuditStore},
        hooks::HookStore,
    },
    domain::{Error, Resolver},
};

/// How long records are kept by default (`--audit-retention`).
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(90 * 24 * 3600);
/// How often records past retention are dropped.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);
/// Admin changes' records one drain round takes from the hook store.
const DRAIN_BATCH: usize = 256;
/// How often records left by a node that died are looked for.
const DRAIN_EVERY: Duration = Duration::from_secs(10);
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

    /// The record of an admin change (`what`: `endpoint.created`,
    /// `slack.disconnected`, ...) that `by` makes, with what it changes: the hook store
    /// keeps it with the change itself, so that neither is durable without the other.
    pub fn admin_entry(tenant: &str, by: &Resolver, what: &str, details: Value) -> AuditEntry {
        let mut fields = Map::new();
        fields.insert("kind".into(), format!("admin.{what}").into());
        fields.insert("at".into(), audit::at(std::time::SystemTime::now()));
        fields.insert("subject".into(), by.subject.clone().into());
        fields.insert("channel".into(), by.channel.clone().into());
        fields.insert("details".into(), details);
        AuditEntry {
            tenant: tenant.to_owned(),
            id: format!("admin\u{1f}{}", uuid::Uuid::now_v7()),
            fields,
        }
    }

    /// Appends the admin changes' records that `hooks` keeps (a store that cannot
    /// write them to the log in the change's own write: Redis's, whose log is on
    /// other slots) and lets it forget them. A record appended twice (a node that died
    /// between the two steps) is kept once.
    pub async fn drain(&self, hooks: &dyn HookStore) -> Result<(), Error> {
        loop {
            let entries = hooks.unaudited(DRAIN_BATCH).await?;
            let ids: Vec<String> = entries.iter().map(|e| e.id.clone()).collect();
            if ids.is_empty() {
                return Ok(());
            }
            self.store.append(entries).await?;
            hooks.audited(&ids).await?;
            if ids.len() < DRAIN_BATCH {
                return Ok(());
            }
        }
    }

    /// [`Self::drain`] now and every [`DRAIN_EVERY`], until the task is aborted: the
    /// records of changes whose node died before it appended them.
    pub async fn drain_every(self, hooks: Arc<dyn HookStore>) {
        loop {
            if let Err(e) = self.drain(&*hooks).await {
                warn!("appending admin changes' audit records failed: {e}");
            }
            tokio::time::sleep(DRAIN_EVERY).await;
        }
    }

    /// Appends a recorded quorum vote's record ([`Self::vote_entry`]). On SQLite the
    /// engine wrote it with the vote already (this finds it there); on Redis the vote
    /// is durable in the engine already, so a failure here fails the Answer, and the
    /// vote stays unrecorded only if the log cannot be written, or the node dies first
    /// (its resolution's record still names every approver).
    pub async fn vote(&self, entry: AuditEntry) -> Result<(), Error> {
        self.store.append(vec![entry]).await
    }

    /// The record of a quorum vote `by` cast on `pending` with `answers`.
    pub fn vote_entry(
        key: &crate::domain::SessionKey,
        pending: &askgate_proto::v1::Requested,
        answers: &[askgate_proto::v1::QuestionAnswer],
        by: &Resolver,
    ) -> AuditEntry {
        let mut fields = Map::new();
        fields.insert("kind".into(), "ask.vote".into());
        fields.insert("at".into(), audit::at(std::time::SystemTime::now()));
        fields.insert("session_id".into(), key.session_id.to_string().into());
        fields.insert("rpc_id".into(), pending.rpc_id.clone().into());
        fields.insert("subject".into(), by.subject.clone().into());
        fields.insert("channel".into(), by.channel.clone().into());
        fields.insert("action_digest".into(), pending.action_digest.clone().into());
        audit::record_answers(&mut fields, answers);
        AuditEntry {
            tenant: key.tenant.to_string(),
            id: format!(
                "ask.vote\u{1f}{}\u{1f}{}\u{1f}{}",
                key.session_id, pending.rpc_id, by.subject
            ),
            fields,
        }
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

    /// The tenant's last record.
    pub async fn head(&self, tenant: &str) -> Result<audit::Head, Error> {
        self.store.head(tenant).await
    }

    /// Uses up the receipt `jti` (see [`AuditStore::consume`]); `entry` is its record.
    pub async fn consume(
        &self,
        entry: AuditEntry,
        jti: &str,
        keep_until: std::time::SystemTime,
    ) -> Result<audit::Consumed, Error> {
        self.store.consume(entry, jti, keep_until).await
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
