//! The durable engine of one node: the memory engine's structures serve, and an
//! embedded SQLite store (WAL mode, every commit synced) is their write-ahead store.
//!
//! Every change of the memory engine's state (and of the hook store's) goes to a
//! [`Journal`](crate::memory::journal::Journal) under the lock that orders it; one
//! writer thread ([`writer`]) writes all the changes queued meanwhile in one
//! transaction (group commit), syncs, and only then lets what waited on them happen:
//! an outcome reaching the waiting call, an event reaching the webhooks, an `Answer`
//! or `Cancel` replying. So whatever was acknowledged is on disk, even after kill -9.
//! At start the store is read back ([`load`]) into the memory structures.
//!
//! After a restart: pending asks are pending with the same rpc_id, and each waits out
//! its reattach grace from now (a retry with its request_id joins it), or ends at once
//! (EXPIRED past its deadline, ABORTED without a grace or when its agent's lease is
//! gone); recorded outcomes answer retries; sessions keep their histories, so
//! subscribers resume from their cursors; agent leases end a reconnect grace after
//! the restart unless their agent attached again meanwhile.

mod audit;
mod backup;
mod dir;
mod load;
mod schema;
mod writer;

use std::{
    path::Path,
    time::{Duration, SystemTime},
};

use askgate_core::{
    backend::{Backend, StateConfig, events::Message, hooks::StoreLimits},
    domain::{Outcome, SessionKey},
};
use askgate_proto::v1::subscribe_response::Event;
use rusqlite::{Connection, OpenFlags, OptionalExtension as _};
use tracing::{debug, info};

pub use audit::SqliteAuditStore;
pub use backup::{Copied, backup};
pub use dir::{DataDir, DirError, STORE_FILE, refuse_shared};

use crate::memory::{
    MemoryBackend, MemoryHookStore,
    journal::{self, Journal, Stored, StoredHooks},
};

/// The engine on a data directory: its backend and its hook store, both written
/// through the same store.
pub struct SqliteEngine {
    backend: MemoryBackend,
    hooks: MemoryHookStore,
    audit: std::sync::Arc<SqliteAuditStore>,
    /// What the store says of the key its secrets are sealed with ([`Self::bind_key`]).
    key_check: Option<String>,
    journal: Journal,
}

impl SqliteEngine {
    /// Opens the store in the data directory `path` (made if missing), restores what it
    /// holds and starts its writer. The directory is held (no other process can open
    /// it) until the engine is dropped.
    pub async fn open(
        path: &Path,
        config: StateConfig,
        limits: StoreLimits,
    ) -> anyhow::Result<Self> {
        let dir = DataDir::open(path)?;
        let started = std::time::Instant::now();
        let (conn, stored, hooks, heads, key_check) = {
            let file = dir.store();
            tokio::task::spawn_blocking(move || read(&file)).await??
        };
        let store_file = dir.store();
        let settle = Settle::of(&stored, config.reconnect_grace);
        let (journal, reader) = Journal::new();
        std::thread::Builder::new()
            .name("askgate-store".into())
            .spawn(move || {
                // The directory stays held for as long as the writer runs: as long as
                // any part of the engine lives.
                let _dir = dir;
                writer::run(conn, reader);
            })?;
        let audit = std::sync::Arc::new(SqliteAuditStore::new(
            journal.clone(),
            heads,
            store_file,
            config.max_audit_bytes_per_tenant,
        ));
        let hooks = MemoryHookStore::durable(limits, journal.clone(), hooks, audit.heads());
        let (backend, orphans) =
            MemoryBackend::durable(config, journal.clone(), stored, audit.heads());
        info!(
            pending = settle.asks.len(),
            agents = settle.agents.len(),
            elapsed = ?started.elapsed(),
            "restored the store"
        );
        settle.start(backend.clone(), orphans);
        Ok(Self {
            backend,
            hooks,
            audit,
            key_check,
            journal,
        })
    }

    /// Whether the store was used with a sealing key: a store that was must never be
    /// given a new one (what it sealed would not open).
    pub fn has_key(&self) -> bool {
        self.key_check.is_some()
    }

    /// Binds the store to the key its secrets are sealed with, named by `check` (a
    /// value derived from the key, that does not reveal it): a store used with another
    /// key is refused, never re-keyed; a new store records it.
    pub async fn bind_key(&self, check: &str) -> anyhow::Result<()> {
        match &self.key_check {
            Some(stored) if stored == check => Ok(()),
            Some(_) => anyhow::bail!(
                "the store's secrets were sealed with another key than this one: restore the \
                 data directory's secret.key, or pass the key it was made with in \
                 --secret-key-file"
            ),
            None => {
                self.journal.record(journal::Change::Meta {
                    key: KEY_CHECK.into(),
                    value: check.into(),
                });
                Ok(self.journal.synced().await?)
            }
        }
    }

    pub fn backend(&self) -> MemoryBackend {
        self.backend.clone()
    }

    pub fn hook_store(self) -> MemoryHookStore {
        self.hooks
    }

    /// The audit log, kept in the same store.
    pub fn audit_store(&self) -> std::sync::Arc<SqliteAuditStore> {
        self.audit.clone()
    }

    /// The backend and the hook store, for a server.
    pub fn into_parts(self) -> (MemoryBackend, MemoryHookStore) {
        (self.backend, self.hooks)
    }
}

/// Opens the store file (made if missing), migrates it and reads what it holds.
type Read = (
    Connection,
    Stored,
    StoredHooks,
    audit::StoredAudit,
    Option<String>,
);

/// The `meta` entry of the sealing key's check.
const KEY_CHECK: &str = "key_check";

fn read(file: &Path) -> anyhow::Result<Read> {
    let mut conn = open(file)?;
    schema::migrate(&mut conn)?;
    load::prune(&conn)?;
    let stored = load::asks(&conn)?;
    let hooks = load::hooks(&conn)?;
    let heads = audit::stored(&conn)?;
    let key_check = conn
        .query_row(
            "SELECT value FROM meta WHERE key = ?1",
            [KEY_CHECK],
            |row| row.get(0),
        )
        .optional()?;
    Ok((conn, stored, hooks, heads, key_check))
}

/// A connection to the store: WAL mode, every commit synced. A new store's file is
/// made readable by its owner only (its log and shared memory take its mode).
fn open(file: &Path) -> anyhow::Result<Connection> {
    if !file.exists() {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        options.open(file)?;
    }
    let conn = Connection::open_with_flags(
        file,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    // Before anything changes it: a file that is not askgate's is left as it is.
    schema::claim(&conn).map_err(|e| match e {
        schema::SchemaError::Sqlite(e) => {
            anyhow::anyhow!("{} is not a usable store: {e}", file.display())
        }
        other => anyhow::anyhow!("{}: {other}", file.display()),
    })?;
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
        .map_err(|e| anyhow::anyhow!("{} is not a usable store: {e}", file.display()))?;
    anyhow::ensure!(
        mode.eq_ignore_ascii_case("wal"),
        "{} cannot be put in WAL mode (it is in {mode} mode)",
        file.display()
    );
    conn.pragma_update(None, "synchronous", "FULL")?;
    // The log is reused after each checkpoint; past a burst it is cut back to this.
    conn.pragma_update(None, "journal_size_limit", 64 * 1024 * 1024)?;
    // A backup reading meanwhile holds the write lock for a moment at most.
    conn.busy_timeout(Duration::from_secs(5))?;
    Ok(conn)
}

/// A restored pending ask whose call is gone.
struct Restored {
    key: SessionKey,
    rpc_id: String,
    deadline: Option<SystemTime>,
    reattach_grace: Duration,
    /// What it resolves with at its deadline (empty: EXPIRED).
    default_answers: Vec<askgate_proto::v1::QuestionAnswer>,
}

/// What the restored state still has to settle: pending asks whose calls are gone,
/// and leases whose agents are.
struct Settle {
    asks: Vec<Restored>,
    /// (tenant, agent_id, incarnation)
    agents: Vec<(String, String, String)>,
    /// How long a restored lease waits for its agent to attach again.
    grace: Duration,
}

impl Settle {
    fn of(stored: &Stored, grace: Duration) -> Self {
        let asks = stored
            .sessions
            .iter()
            .flat_map(|s| s.asks.iter())
            .map(|ask| Restored {
                key: ask.key.clone(),
                rpc_id: ask.rpc_id.clone(),
                deadline: deadline(&ask.requested),
                reattach_grace: ask.reattach_grace,
                default_answers: match &ask.requested.event {
                    Some(Event::Requested(r)) => r.default_answers.clone(),
                    _ => Vec::new(),
                },
            })
            .collect();
        let agents = stored
            .agents
            .iter()
            .map(|a| {
                (
                    a.tenant.to_string(),
                    a.agent_id.clone(),
                    a.incarnation.clone(),
                )
            })
            .collect();
        Self {
            asks,
            agents,
            grace,
        }
    }

    /// Settles each restored ask as the server settles an ask whose call went away
    /// (EXPIRED at its deadline when that comes first; ABORTED at once without a
    /// reattach grace, else once the grace from now has passed with no call
    /// reattached), aborts the `orphans`
    /// (asks whose agent's lease is gone) and ends each restored lease after the
    /// grace unless its agent attached again.
    fn start(self, backend: MemoryBackend, orphans: Vec<(SessionKey, String)>) {
        let now = SystemTime::now();
        for ask in self.asks {
            let Restored {
                key,
                rpc_id,
                deadline,
                reattach_grace: grace,
                default_answers,
            } = ask;
            let backend = backend.clone();
            // How long until its deadline (zero: past it), if it has one.
            let left = deadline.map(|d| d.duration_since(now).unwrap_or(Duration::ZERO));
            tokio::spawn(async move {
                let settled = match left {
                    Some(left) if left < grace || left.is_zero() => {
                        // Its deadline comes first: it ends EXPIRED (or DEFAULTED) then.
                        tokio::time::sleep(left).await;
                        let outcome = Outcome::on_expiry(&default_answers);
                        backend.claim(&key, &rpc_id, outcome).await
                    }
                    _ if grace.is_zero() => backend.claim(&key, &rpc_id, Outcome::aborted()).await,
                    _ => {
                        tokio::time::sleep(grace).await;
                        backend.abandon(&key, &rpc_id).await
                    }
                };
                if settled.is_ok() {
                    debug!(%rpc_id, "a restored ask whose call was gone is settled");
                }
            });
        }
        for (key, rpc_id) in orphans {
            let backend = backend.clone();
            tokio::spawn(async move {
                let _ = backend.claim(&key, &rpc_id, Outcome::aborted()).await;
            });
        }
        for (tenant, agent_id, incarnation) in self.agents {
            let backend = backend.clone();
            let grace = self.grace;
            tokio::spawn(async move {
                tokio::time::sleep(grace).await;
                backend.detach(&tenant, &agent_id, &incarnation).await;
            });
        }
    }
}

/// An ask's deadline, as its `requested` event states it.
fn deadline(requested: &Message) -> Option<SystemTime> {
    match &requested.event {
        Some(Event::Requested(r)) => r.expires_at.and_then(|t| SystemTime::try_from(t).ok()),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
