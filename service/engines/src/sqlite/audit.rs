//! The sqlite engine's audit log: appended through the journal (durable before the
//! append returns, in the writer's group commits), exported by reading the store.

use std::{path::PathBuf, sync::Arc, time::Duration};

use askgate_core::{
    backend::audit::{AuditEntry, AuditRecord, AuditStore, Consumed, Head},
    domain::Error,
};
use async_trait::async_trait;
use rusqlite::{Connection, OpenFlags, params};

use crate::memory::{
    MemoryAuditStore,
    journal::{Journal, Spent},
};

pub struct SqliteAuditStore {
    /// The tenants' heads; records go to the journal (the engine appends a
    /// resolution's record with the resolution itself, through this too).
    heads: Arc<MemoryAuditStore>,
    /// The store, read by exports.
    file: PathBuf,
}

impl SqliteAuditStore {
    pub(super) fn new(
        journal: Journal,
        stored: StoredAudit,
        file: PathBuf,
        max_bytes_per_tenant: u64,
    ) -> Self {
        Self {
            heads: Arc::new(MemoryAuditStore::durable(
                journal,
                stored.heads,
                stored.consumed,
                max_bytes_per_tenant,
            )),
            file,
        }
    }

    /// The chains' heads, where the engine appends what it records itself.
    pub(super) fn heads(&self) -> Arc<MemoryAuditStore> {
        self.heads.clone()
    }
}

/// What the log's store holds beside the records.
pub(super) struct StoredAudit {
    /// Each tenant's head, and the bytes its records hold.
    heads: Vec<(String, Head, u64)>,
    consumed: Vec<(String, String, Spent)>,
}

/// The tenants' heads and the receipts used, as the store holds them.
pub(super) fn stored(conn: &Connection) -> rusqlite::Result<StoredAudit> {
    let mut rows = conn.prepare("SELECT tenant, jti, consumed_ms, until_ms FROM consumed")?;
    let consumed = rows
        .query_map([], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                Spent {
                    at_ms: row.get::<_, i64>(2)?.unsigned_abs(),
                    until_ms: row.get::<_, i64>(3)?.unsigned_abs(),
                },
            ))
        })?
        .collect::<rusqlite::Result<_>>()?;
    Ok(StoredAudit {
        heads: heads(conn)?,
        consumed,
    })
}

/// Each tenant's newest record, where its chain goes on, and what its records hold.
fn heads(conn: &Connection) -> rusqlite::Result<Vec<(String, Head, u64)>> {
    let mut rows = conn.prepare(
        "SELECT tenant, max(seq), (SELECT hash FROM audit AS b WHERE b.tenant = a.tenant \
           ORDER BY seq DESC LIMIT 1), sum(length(body) + length(hash) + length(prev_hash)) \
         FROM audit AS a GROUP BY tenant",
    )?;
    rows.query_map([], |row| {
        Ok((
            row.get::<_, String>(0)?,
            Head {
                seq: row.get::<_, i64>(1)?.unsigned_abs(),
                hash: row.get(2)?,
            },
            row.get::<_, i64>(3)?.unsigned_abs(),
        ))
    })?
    .collect()
}

#[async_trait]
impl AuditStore for SqliteAuditStore {
    async fn append(&self, entries: Vec<AuditEntry>) -> Result<(), Error> {
        self.heads.append(entries).await
    }

    async fn export(
        &self,
        tenant: &str,
        after_seq: u64,
        limit: usize,
    ) -> Result<Vec<AuditRecord>, Error> {
        let (file, tenant) = (self.file.clone(), tenant.to_owned());
        let read = move || -> rusqlite::Result<Vec<AuditRecord>> {
            let conn = Connection::open_with_flags(
                &file,
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )?;
            let mut rows = conn.prepare(
                "SELECT seq, prev_hash, hash, body FROM audit \
                 WHERE tenant = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
            )?;
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let after = i64::try_from(after_seq).unwrap_or(i64::MAX);
            rows.query_map(params![tenant, after, limit], |row| {
                Ok(AuditRecord {
                    seq: row.get::<_, i64>(0)?.unsigned_abs(),
                    prev_hash: row.get(1)?,
                    hash: row.get(2)?,
                    body_json: row.get(3)?,
                })
            })?
            .collect()
        };
        tokio::task::spawn_blocking(read)
            .await
            .map_err(|e| Error::Internal(format!("reading the audit log: {e}")))?
            .map_err(|e| Error::BackendUnavailable(format!("reading the audit log: {e}")))
    }

    async fn prune(&self, retention: Duration) -> Result<(), Error> {
        self.heads.prune(retention).await
    }

    async fn head(&self, tenant: &str) -> Result<Head, Error> {
        self.heads.head(tenant).await
    }

    async fn consume(
        &self,
        entry: AuditEntry,
        jti: &str,
        keep_until: std::time::SystemTime,
    ) -> Result<Consumed, Error> {
        self.heads.consume(entry, jti, keep_until).await
    }
}
