//! The store's one writer: a thread that takes the journal's entries in order, writes
//! every change that has queued up meanwhile in one transaction (group commit), makes
//! it durable (the commit syncs the write-ahead log), and only then runs what waited on
//! those changes. A failed write stops it: the node keeps serving reads, refuses new
//! writes (BACKEND_UNAVAILABLE) and reports itself unhealthy, and what is on disk is
//! what the last successful commit left.

use askgate_core::{clock::epoch_ms, domain::SessionKey};
use prost::Message as _;
use rusqlite::{Connection, Transaction, params};
use tracing::{debug, error};

use crate::memory::journal::{AddedAsk, AttachedAgent, Change, Entry, HookChange, JournalReader};

/// The most entries one transaction takes: a bound on how long a burst holds back the
/// acknowledgements queued at its start.
const MAX_GROUP: usize = 16 * 1024;

/// Runs the writer until every journal is dropped (the engine is gone) or a write fails.
pub fn run(mut conn: Connection, reader: JournalReader) {
    let mut changes = Vec::new();
    let mut waiting = Vec::new();
    // Entries taken and made durable so far.
    let mut durable: u64 = 0;
    while let Ok(first) = reader.entries.recv() {
        sort(first, &mut changes, &mut waiting);
        // Entries taken (one of them may hold several changes).
        let mut handled = 1;
        while changes.len() + waiting.len() < MAX_GROUP {
            match reader.entries.try_recv() {
                Ok(entry) => {
                    sort(entry, &mut changes, &mut waiting);
                    handled += 1;
                }
                Err(_) => break,
            }
        }
        if !changes.is_empty() {
            if let Err(e) = write(&mut conn, &changes) {
                let why = format!("writing to the store failed: {e}");
                error!("{why}; no further change is acknowledged");
                reader.fail(why);
                // What waited is dropped unrun: its waiters see the failure. What comes
                // later is dropped too, until the engine is gone (the data directory
                // stays held meanwhile: this node still serves it).
                drop(waiting);
                while reader.entries.recv().is_ok() {}
                return;
            }
            debug!(changes = changes.len(), "group committed");
            changes.clear();
        }
        durable += handled as u64;
        reader.durable(durable);
        for entry in waiting.drain(..) {
            match entry {
                Entry::Then(action) => action(),
                Entry::Synced(done) => {
                    let _ = done.send(());
                }
                Entry::Change(_) | Entry::Changes(_) => {}
            }
        }
        reader.handled(handled);
    }
}

fn sort(entry: Entry, changes: &mut Vec<Change>, waiting: &mut Vec<Entry>) {
    match entry {
        Entry::Change(change) => changes.push(change),
        // Taken whole into the group being built: never split between two commits.
        Entry::Changes(all) => changes.extend(all),
        other => waiting.push(other),
    }
}

/// Writes a group of changes in one transaction and commits it (a sync of the log).
fn write(conn: &mut Connection, changes: &[Change]) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    for change in changes {
        apply(&tx, change)?;
    }
    tx.commit()
}

fn apply(tx: &Transaction<'_>, change: &Change) -> rusqlite::Result<()> {
    match change {
        Change::SessionOpened { key, epoch } => {
            tx.prepare_cached(
                "INSERT OR REPLACE INTO sessions (tenant, session_id, epoch, head) \
                 VALUES (?1, ?2, ?3, 0)",
            )?
            .execute(params![&*key.tenant, &*key.session_id, *epoch as i64])?;
            // A new incarnation starts a new history.
            tx.prepare_cached("DELETE FROM events WHERE tenant = ?1 AND session_id = ?2")?
                .execute(params![&*key.tenant, &*key.session_id])?;
        }
        Change::SessionRetired { key } => {
            tx.prepare_cached("DELETE FROM sessions WHERE tenant = ?1 AND session_id = ?2")?
                .execute(params![&*key.tenant, &*key.session_id])?;
            tx.prepare_cached("DELETE FROM events WHERE tenant = ?1 AND session_id = ?2")?
                .execute(params![&*key.tenant, &*key.session_id])?;
        }
        Change::Event {
            key,
            seq,
            message,
            oldest_kept,
            trimmed,
        } => event(
            tx,
            key,
            *seq,
            &message.encode_to_vec(),
            *oldest_kept,
            *trimmed,
        )?,
        Change::AskAdded(ask) => add_ask(tx, ask)?,
        Change::AskRemoved {
            key,
            rpc_id,
            order,
            voted,
        } => {
            tx.prepare_cached("DELETE FROM asks WHERE ord = ?1")?
                .execute(params![*order as i64])?;
            if *voted {
                tx.prepare_cached(
                    "DELETE FROM votes WHERE tenant = ?1 AND session_id = ?2 AND rpc_id = ?3",
                )?
                .execute(params![&*key.tenant, &*key.session_id, rpc_id])?;
            }
        }
        Change::RequestPending { .. }
        | Change::RequestDone { .. }
        | Change::RequestExpired { .. } => request(tx, change)?,
        Change::AgentAttached(agent) => attach(tx, agent)?,
        Change::AgentDetached { tenant, agent_id } => {
            tx.prepare_cached("DELETE FROM agents WHERE tenant = ?1 AND agent_id = ?2")?
                .execute(params![&**tenant, agent_id])?;
        }
        Change::Hook(change) => hook(tx, change)?,
        Change::Votes { .. }
        | Change::Audit { .. }
        | Change::AuditPruned { .. }
        | Change::AuditTrimmed { .. }
        | Change::ReceiptConsumed { .. } => approvals(tx, change)?,
        Change::Meta { key, value } => {
            tx.prepare_cached("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)")?
                .execute(params![key, value])?;
        }
    }
    Ok(())
}

/// A change to a request id's record.
fn request(tx: &Transaction<'_>, change: &Change) -> rusqlite::Result<()> {
    match change {
        Change::RequestPending {
            key,
            request_id,
            rpc_id,
            fingerprint,
        } => {
            tx.prepare_cached(
                "INSERT OR REPLACE INTO requests (tenant, session_id, request_id, rpc_id, \
             resolved, expires_ms, fingerprint) VALUES (?1, ?2, ?3, ?4, NULL, NULL, ?5)",
            )?
            .execute(params![
                &*key.tenant,
                &*key.session_id,
                &**request_id,
                rpc_id,
                fingerprint.map(|f| f.0),
            ])?;
        }
        Change::RequestDone {
            key,
            request_id,
            resolved,
            expires,
            fingerprint,
        } => {
            tx.prepare_cached(
                "INSERT OR REPLACE INTO requests (tenant, session_id, request_id, rpc_id, \
             resolved, expires_ms, fingerprint) VALUES (?1, ?2, ?3, NULL, ?4, ?5, ?6)",
            )?
            .execute(params![
                &*key.tenant,
                &*key.session_id,
                &**request_id,
                resolved.encode_to_vec(),
                epoch_ms(*expires) as i64,
                fingerprint.map(|f| f.0),
            ])?;
        }
        Change::RequestExpired { key, request_id } => {
            tx.prepare_cached(
                "DELETE FROM requests WHERE tenant = ?1 AND session_id = ?2 AND request_id = ?3",
            )?
            .execute(params![&*key.tenant, &*key.session_id, &**request_id])?;
        }
        _ => {}
    }
    Ok(())
}

/// The session's event `seq`: kept with the history from `oldest_kept` on (as the
/// session keeps it; what it dropped goes when `trimmed`), the head moved on.
///
/// A kept event is the session's head: the store reads the head as the newest of
/// `sessions.head` and the history's last event, so that only an event the history
/// does not keep writes the session's row.
fn event(
    tx: &Transaction<'_>,
    key: &SessionKey,
    seq: u64,
    message: &[u8],
    oldest_kept: u64,
    trimmed: bool,
) -> rusqlite::Result<()> {
    let (tenant, session) = (&*key.tenant, &*key.session_id);
    if oldest_kept > seq {
        tx.prepare_cached("UPDATE sessions SET head = ?3 WHERE tenant = ?1 AND session_id = ?2")?
            .execute(params![tenant, session, seq as i64])?;
        return Ok(());
    }
    tx.prepare_cached(
        "INSERT OR REPLACE INTO events (tenant, session_id, seq, message) VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![tenant, session, seq as i64, message])?;
    if trimmed {
        tx.prepare_cached("DELETE FROM events WHERE tenant = ?1 AND session_id = ?2 AND seq < ?3")?
            .execute(params![tenant, session, oldest_kept as i64])?;
    }
    Ok(())
}

fn add_ask(tx: &Transaction<'_>, ask: &AddedAsk) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "INSERT OR REPLACE INTO asks (tenant, session_id, rpc_id, seq, ord, bytes, request_id, \
         reattach_grace_ms, requested) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?
    .execute(params![
        &*ask.key.tenant,
        &*ask.key.session_id,
        ask.rpc_id,
        ask.seq as i64,
        ask.order as i64,
        ask.bytes as i64,
        &*ask.request_id,
        ask.reattach_grace.as_millis() as i64,
        ask.requested.encode_to_vec(),
    ])?;
    Ok(())
}

fn attach(tx: &Transaction<'_>, agent: &AttachedAgent) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "INSERT OR REPLACE INTO agents (tenant, agent_id, incarnation, parent_agent_id, holder) \
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        &*agent.tenant,
        agent.agent_id,
        agent.incarnation,
        agent.parent_agent_id,
        agent.holder,
    ])?;
    Ok(())
}

/// The changes of approvals (docs/approvals.md): a quorum ask's votes, audit records.
fn approvals(tx: &Transaction<'_>, change: &Change) -> rusqlite::Result<()> {
    match change {
        Change::Votes { key, rpc_id, votes } => {
            let votes = serde_json::to_string(votes)
                .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
            tx.prepare_cached(
                "INSERT OR REPLACE INTO votes (tenant, session_id, rpc_id, votes) \
                 VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![&*key.tenant, &*key.session_id, rpc_id, votes])?;
        }
        Change::Audit { tenant, at, record } => {
            tx.prepare_cached(
                "INSERT OR IGNORE INTO audit (tenant, seq, prev_hash, hash, body, at_ms) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute(params![
                tenant,
                record.seq as i64,
                record.prev_hash,
                record.hash,
                record.body_json,
                epoch_ms(*at) as i64,
            ])?;
        }
        Change::AuditPruned {
            before,
            consumed_before_ms,
        } => {
            // Each tenant's newest record stays: the next one links to it.
            tx.prepare_cached(
                "DELETE FROM audit WHERE at_ms < ?1 AND seq < \
                 (SELECT max(seq) FROM audit AS newest WHERE newest.tenant = audit.tenant)",
            )?
            .execute(params![epoch_ms(*before) as i64])?;
            tx.prepare_cached("DELETE FROM consumed WHERE until_ms < ?1")?
                .execute(params![*consumed_before_ms as i64])?;
        }
        Change::AuditTrimmed { tenant, keep_bytes } => {
            // The oldest record from which on the newest hold at most keep_bytes (the
            // newest alone, when even it holds more); everything before it goes.
            tx.prepare_cached(
                "DELETE FROM audit WHERE tenant = ?1 AND seq < coalesce( \
                   (SELECT seq FROM (SELECT seq, sum(length(body) + length(hash) + \
                      length(prev_hash)) OVER (ORDER BY seq DESC) AS newer \
                    FROM audit WHERE tenant = ?1) WHERE newer <= ?2 ORDER BY seq LIMIT 1), \
                   (SELECT max(seq) FROM audit WHERE tenant = ?1))",
            )?
            .execute(params![tenant, *keep_bytes as i64])?;
        }
        Change::ReceiptConsumed { tenant, jti, spent } => {
            tx.prepare_cached(
                "INSERT OR IGNORE INTO consumed (tenant, jti, consumed_ms, until_ms) \
                 VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![
                tenant,
                jti,
                spent.at_ms as i64,
                spent.until_ms as i64
            ])?;
        }
        _ => {}
    }
    Ok(())
}

fn hook(tx: &Transaction<'_>, change: &HookChange) -> rusqlite::Result<()> {
    match change {
        HookChange::EndpointPut { position, record } => {
            tx.prepare_cached(
                "INSERT OR REPLACE INTO endpoints (tenant, id, position, record) \
                 VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![
                record.tenant,
                record.id,
                *position as i64,
                json(record)?
            ])?;
        }
        HookChange::EndpointDeleted { tenant, id } => {
            tx.prepare_cached("DELETE FROM endpoints WHERE tenant = ?1 AND id = ?2")?
                .execute(params![tenant, id])?;
        }
        HookChange::DeliveryPut {
            position,
            due_ms,
            record,
        } => {
            tx.prepare_cached(
                "INSERT INTO deliveries (id, position, due_ms, record) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (id) DO UPDATE SET due_ms = excluded.due_ms, record = excluded.record",
            )?
            .execute(params![
                record.id,
                *position as i64,
                due_ms.map(|d| d as i64),
                json(record)?
            ])?;
        }
        HookChange::DeliveryDeleted { id } => {
            tx.prepare_cached("DELETE FROM deliveries WHERE id = ?1")?
                .execute(params![id])?;
        }
        HookChange::TimerPut { due_ms, record } => {
            tx.prepare_cached(
                "INSERT OR REPLACE INTO timers (id, due_ms, record) VALUES (?1, ?2, ?3)",
            )?
            .execute(params![record.id(), *due_ms as i64, json(record)?])?;
        }
        HookChange::TimerDeleted { id } => {
            tx.prepare_cached("DELETE FROM timers WHERE id = ?1")?
                .execute(params![id])?;
        }
        HookChange::NotePut {
            key,
            value,
            expires_ms,
        } => {
            tx.prepare_cached(
                "INSERT OR REPLACE INTO notes (key, value, expires_ms) VALUES (?1, ?2, ?3)",
            )?
            .execute(params![key, value, *expires_ms as i64])?;
        }
        HookChange::NotesExpired { by_ms } => {
            tx.prepare_cached("DELETE FROM notes WHERE expires_ms <= ?1")?
                .execute(params![*by_ms as i64])?;
        }
        HookChange::PersonPut { record } => {
            tx.prepare_cached(
                "INSERT OR REPLACE INTO people (tenant, id, record) VALUES (?1, ?2, ?3)",
            )?
            .execute(params![record.tenant, record.id, json(record)?])?;
        }
        HookChange::PersonDeleted { tenant, id } => {
            tx.prepare_cached("DELETE FROM people WHERE tenant = ?1 AND id = ?2")?
                .execute(params![tenant, id])?;
        }
        HookChange::GrantPut { record } => {
            tx.prepare_cached(
                "INSERT OR REPLACE INTO grants (tenant, id, record) VALUES (?1, ?2, ?3)",
            )?
            .execute(params![record.tenant, record.id, json(record)?])?;
        }
        HookChange::GrantDeleted { tenant, id } => {
            tx.prepare_cached("DELETE FROM grants WHERE tenant = ?1 AND id = ?2")?
                .execute(params![tenant, id])?;
        }
        HookChange::PoliciesPut { record } => {
            tx.prepare_cached("INSERT OR REPLACE INTO policies (tenant, record) VALUES (?1, ?2)")?
                .execute(params![record.tenant, json(record)?])?;
        }
    }
    Ok(())
}

/// A hook store record as the store keeps it.
fn json(record: &impl serde::Serialize) -> rusqlite::Result<String> {
    serde_json::to_string(record).map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
}
