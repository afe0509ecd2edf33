//! The store's tables, versioned by SQLite's `user_version`: each migration takes the
//! store one version forward, in one transaction, at start. A store written by a newer
//! askgate than this one is refused.
//!
//! A store is marked as askgate's with SQLite's `application_id`. A file marked by
//! another application is refused, as is an unmarked one that holds anything but the
//! tables some version of askgate made (an askgate store from before the mark is
//! marked when it is migrated): a file that is not askgate's is never migrated.

use rusqlite::{Connection, TransactionBehavior};

/// The migrations, in order: the one at index `i` takes the store from version `i` to
/// `i + 1`.
const MIGRATIONS: &[&str] = &[
    // 1: the state of asks (as the memory engine serves it) and of webhooks.
    "
    CREATE TABLE sessions (
        tenant TEXT NOT NULL,
        session_id TEXT NOT NULL,
        epoch INTEGER NOT NULL,
        head INTEGER NOT NULL,
        PRIMARY KEY (tenant, session_id)
    ) WITHOUT ROWID;
    -- Each session's last events (its history), encoded SubscribeResponse messages.
    CREATE TABLE events (
        tenant TEXT NOT NULL,
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        message BLOB NOT NULL,
        PRIMARY KEY (tenant, session_id, seq)
    ) WITHOUT ROWID;
    CREATE TABLE asks (
        tenant TEXT NOT NULL,
        session_id TEXT NOT NULL,
        rpc_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        ord INTEGER NOT NULL,
        bytes INTEGER NOT NULL,
        request_id TEXT NOT NULL,
        reattach_grace_ms INTEGER NOT NULL,
        requested BLOB NOT NULL,
        PRIMARY KEY (tenant, session_id, rpc_id)
    ) WITHOUT ROWID;
    -- A request id names a pending ask (rpc_id) or the outcome of a finished one
    -- (resolved, kept until expires_ms).
    CREATE TABLE requests (
        tenant TEXT NOT NULL,
        session_id TEXT NOT NULL,
        request_id TEXT NOT NULL,
        rpc_id TEXT,
        resolved BLOB,
        expires_ms INTEGER,
        PRIMARY KEY (tenant, session_id, request_id)
    ) WITHOUT ROWID;
    CREATE TABLE agents (
        tenant TEXT NOT NULL,
        agent_id TEXT NOT NULL,
        incarnation TEXT NOT NULL,
        parent_agent_id TEXT NOT NULL,
        holder TEXT NOT NULL,
        PRIMARY KEY (tenant, agent_id)
    ) WITHOUT ROWID;
    -- Webhooks and channels: the hook store's records, as JSON.
    CREATE TABLE endpoints (
        tenant TEXT NOT NULL,
        id TEXT NOT NULL,
        position INTEGER NOT NULL,
        record TEXT NOT NULL,
        PRIMARY KEY (tenant, id)
    ) WITHOUT ROWID;
    CREATE TABLE deliveries (
        id TEXT PRIMARY KEY NOT NULL,
        position INTEGER NOT NULL,
        due_ms INTEGER,
        record TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE timers (
        id TEXT PRIMARY KEY NOT NULL,
        due_ms INTEGER NOT NULL,
        record TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE notes (
        key TEXT PRIMARY KEY NOT NULL,
        value TEXT NOT NULL,
        expires_ms INTEGER NOT NULL
    ) WITHOUT ROWID;
    ",
    // 2: the audit log: each tenant's hash chain, and the votes cast on pending quorum
    // asks (docs/approvals.md).
    "
    CREATE TABLE audit (
        tenant TEXT NOT NULL,
        seq INTEGER NOT NULL,
        prev_hash TEXT NOT NULL,
        hash TEXT NOT NULL,
        body TEXT NOT NULL,
        at_ms INTEGER NOT NULL,
        PRIMARY KEY (tenant, seq)
    ) WITHOUT ROWID;
    CREATE INDEX audit_at ON audit (at_ms);
    CREATE TABLE votes (
        tenant TEXT NOT NULL,
        session_id TEXT NOT NULL,
        rpc_id TEXT NOT NULL,
        votes TEXT NOT NULL,
        PRIMARY KEY (tenant, session_id, rpc_id)
    ) WITHOUT ROWID;
    ",
    // 3: receipts used (ConsumeReceipt), remembered until every receipt of their ask
    // has expired; and what the store says of itself (the check of the key its
    // secrets are sealed with).
    "
    CREATE TABLE meta (
        key TEXT PRIMARY KEY NOT NULL,
        value TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE consumed (
        tenant TEXT NOT NULL,
        jti TEXT NOT NULL,
        consumed_ms INTEGER NOT NULL,
        until_ms INTEGER NOT NULL,
        PRIMARY KEY (tenant, jti)
    ) WITHOUT ROWID;
    CREATE INDEX consumed_until ON consumed (until_ms);
    ",
    // 4: the fingerprint of the ask a request id was sent with (16 bytes: its questions
    // and action), so that the id names that ask only (REQUEST_ID_REUSED).
    "
    ALTER TABLE requests ADD COLUMN fingerprint BLOB;
    ",
    // 5: pending asks keyed by their order (unique, and rising): a new ask goes to the
    // table's last page and a resolved one leaves a recent page, so that a commit of
    // asks from many sessions writes a few pages, not one per session.
    "
    CREATE TABLE asks_by_order (
        ord INTEGER PRIMARY KEY,
        tenant TEXT NOT NULL,
        session_id TEXT NOT NULL,
        rpc_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        bytes INTEGER NOT NULL,
        request_id TEXT NOT NULL,
        reattach_grace_ms INTEGER NOT NULL,
        requested BLOB NOT NULL
    );
    INSERT INTO asks_by_order (ord, tenant, session_id, rpc_id, seq, bytes, request_id,
        reattach_grace_ms, requested)
    SELECT ord, tenant, session_id, rpc_id, seq, bytes, request_id, reattach_grace_ms,
        requested FROM asks;
    DROP TABLE asks;
    ALTER TABLE asks_by_order RENAME TO asks;
    ",
    // 6: the people of each tenant (`service People`), as JSON records.
    "
    CREATE TABLE people (
        tenant TEXT NOT NULL,
        id TEXT NOT NULL,
        record TEXT NOT NULL,
        PRIMARY KEY (tenant, id)
    ) WITHOUT ROWID;
    ",
    // 7: each tenant's policy set (`service Policies`), as a JSON record.
    "
    CREATE TABLE policies (
        tenant TEXT PRIMARY KEY,
        record TEXT NOT NULL
    ) WITHOUT ROWID;
    ",
    // 8: each tenant's standing grants (`service Grants`), as JSON records.
    "
    CREATE TABLE grants (
        tenant TEXT NOT NULL,
        id TEXT NOT NULL,
        record TEXT NOT NULL,
        PRIMARY KEY (tenant, id)
    ) WITHOUT ROWID;
    ",
];

/// The version this askgate writes.
pub const VERSION: u32 = MIGRATIONS.len() as u32;

/// The store's `application_id`: "ASKG".
pub const APPLICATION_ID: i32 = 0x4153_4b47;

/// Every table some version of askgate made.
const TABLES: [&str; 15] = [
    "sessions",
    "events",
    "asks",
    "requests",
    "agents",
    "endpoints",
    "deliveries",
    "timers",
    "notes",
    "audit",
    "votes",
    "consumed",
    "people",
    "policies",
    "grants",
];

/// Why a store cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error(
        "the store was written by a newer askgate (schema version {found}; this one knows \
         up to {VERSION}): run that version, or restore a backup"
    )]
    Newer { found: u32 },
    #[error(
        "the store is another application's (its application_id is {0:#x}, not askgate's): \
         choose another --data-dir"
    )]
    Foreign(i32),
    #[error(
        "the store holds what askgate did not write ({0}): it is not an askgate store, and is \
         left as it is; choose another --data-dir"
    )]
    Unknown(String),
    #[error("the store cannot be read or migrated: {0}")]
    Sqlite(#[from] rusqlite::Error),
}

/// Checks that the store is askgate's, before anything else touches it, and marks it
/// when it is new or an askgate store from before the mark.
pub fn claim(conn: &Connection) -> Result<(), SchemaError> {
    let found: u32 = conn.pragma_query_value(None, "user_version", |row| row.get(0))?;
    let application: i32 = conn.pragma_query_value(None, "application_id", |row| row.get(0))?;
    if found > VERSION && matches!(application, 0 | APPLICATION_ID) {
        return Err(SchemaError::Newer { found });
    }
    match application {
        APPLICATION_ID => Ok(()),
        0 => {
            recognise(conn, found)?;
            conn.pragma_update(None, "application_id", APPLICATION_ID)?;
            Ok(())
        }
        other => Err(SchemaError::Foreign(other)),
    }
}

/// Takes the store (askgate's: [`claim`]) to [`VERSION`], one migration per
/// transaction.
pub fn migrate(conn: &mut Connection) -> Result<(), SchemaError> {
    let found: u32 = conn.pragma_query_value(None, "user_version", |row| row.get(0))?;
    if found > VERSION {
        return Err(SchemaError::Newer { found });
    }
    for (version, migration) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute_batch(migration)?;
        tx.pragma_update(None, "user_version", version as u32 + 1)?;
        tx.commit()?;
    }
    Ok(())
}

/// An unmarked store is askgate's when it is empty (a new store), or when it holds
/// only askgate's tables, `sessions` among them, at a version askgate wrote.
fn recognise(conn: &Connection, version: u32) -> Result<(), SchemaError> {
    let mut rows = conn.prepare("SELECT type, name FROM sqlite_master")?;
    let objects: Vec<(String, String)> = rows
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
        .collect::<Result<_, _>>()?;
    if objects.is_empty() && version == 0 {
        return Ok(());
    }
    let tables: Vec<&str> = objects
        .iter()
        .filter(|(kind, _)| kind == "table")
        .map(|(_, name)| name.as_str())
        .collect();
    if let Some(stranger) = tables.iter().find(|name| !TABLES.contains(name)) {
        return Err(SchemaError::Unknown(format!("a table {stranger}")));
    }
    if version == 0 || !tables.contains(&"sessions") {
        return Err(SchemaError::Unknown(format!(
            "schema version {version} with tables {}",
            tables.join(", ")
        )));
    }
    Ok(())
}
