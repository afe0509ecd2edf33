//! Reading the store at start: the state of asks, as the memory engine restores it.

use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, UNIX_EPOCH},
};

use askgate_core::{
    backend::events::Message,
    domain::{Fingerprint, SessionKey},
};
use askgate_proto::v1::SubscribeResponse;
use prost::Message as _;
use rusqlite::{Connection, Row};

use crate::memory::journal::{
    AddedAsk, AttachedAgent, Stored, StoredHooks, StoredRequest, StoredRequestState, StoredSession,
};

/// Why the store's content cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("reading the store failed: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("the store holds a corrupt {what}: {why}")]
    Corrupt { what: &'static str, why: String },
}

/// Drops what expired while the node was down (recorded outcomes, notes): the running
/// node forgets them as they expire, and a restart must not keep them for good.
pub fn prune(conn: &Connection) -> Result<(), LoadError> {
    let now = askgate_core::clock::now_ms() as i64;
    conn.execute(
        "DELETE FROM requests WHERE resolved IS NOT NULL AND expires_ms <= ?1",
        [now],
    )?;
    conn.execute("DELETE FROM notes WHERE expires_ms <= ?1", [now])?;
    Ok(())
}

/// Everything the store holds of asks: sessions with their histories and pending asks,
/// request records, agent leases.
pub fn asks(conn: &Connection) -> Result<Stored, LoadError> {
    let mut sessions: HashMap<(String, String), StoredSession> = HashMap::new();
    let mut rows = conn.prepare("SELECT tenant, session_id, epoch, head FROM sessions")?;
    for row in rows.query_map([], |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, String>(1)?,
            row.get::<_, i64>(2)?,
            row.get::<_, i64>(3)?,
        ))
    })? {
        let (tenant, session_id, epoch, head) = row?;
        let session = StoredSession {
            key: SessionKey::new(tenant.as_str(), session_id.as_str()),
            epoch: epoch as u64,
            head: head as u64,
            history: Vec::new(),
            asks: Vec::new(),
        };
        sessions.insert((tenant, session_id), session);
    }
    let mut rows = conn.prepare(
        "SELECT tenant, session_id, seq, message FROM events ORDER BY tenant, session_id, seq",
    )?;
    for row in rows.query_map([], |row| {
        Ok((keys(row)?, row.get::<_, i64>(2)?, row.get::<_, Vec<u8>>(3)?))
    })? {
        let (key, seq, message) = row?;
        if let Some(session) = sessions.get_mut(&key) {
            // A kept event moves the head without writing the session's row.
            session.head = session.head.max(seq as u64);
            session
                .history
                .push((seq as u64, decode(&message, "event")?));
        }
    }
    let mut rows = conn.prepare(
        "SELECT a.tenant, a.session_id, a.rpc_id, seq, ord, bytes, request_id, \
         reattach_grace_ms, requested, v.votes FROM asks AS a LEFT JOIN votes AS v \
         ON v.tenant = a.tenant AND v.session_id = a.session_id AND v.rpc_id = a.rpc_id \
         ORDER BY ord",
    )?;
    for row in rows.query_map([], |row| {
        Ok((
            keys(row)?,
            row.get::<_, String>(2)?,
            [
                row.get::<_, i64>(3)?,
                row.get::<_, i64>(4)?,
                row.get::<_, i64>(5)?,
            ],
            row.get::<_, String>(6)?,
            row.get::<_, i64>(7)?,
            row.get::<_, Vec<u8>>(8)?,
            row.get::<_, Option<String>>(9)?,
        ))
    })? {
        let (key, rpc_id, [seq, order, bytes], request_id, grace_ms, requested, votes) = row?;
        let votes = votes_of(votes)?;
        let Some(session) = sessions.get_mut(&key) else {
            continue;
        };
        session.asks.push(AddedAsk {
            key: session.key.clone(),
            rpc_id,
            seq: seq as u64,
            order: order as u64,
            bytes: bytes as u64,
            request_id: request_id.into(),
            requested: decode(&requested, "ask")?,
            reattach_grace: Duration::from_millis(grace_ms as u64),
            votes,
        });
    }
    Ok(Stored {
        sessions: sessions.into_values().collect(),
        requests: requests(conn)?,
        agents: agents(conn)?,
    })
}

fn requests(conn: &Connection) -> Result<Vec<StoredRequest>, LoadError> {
    let mut requests = Vec::new();
    let mut rows = conn.prepare(
        "SELECT tenant, session_id, request_id, rpc_id, resolved, expires_ms, fingerprint \
         FROM requests",
    )?;
    for row in rows.query_map([], |row| {
        Ok((
            keys(row)?,
            row.get::<_, String>(2)?,
            row.get::<_, Option<String>>(3)?,
            row.get::<_, Option<Vec<u8>>>(4)?,
            row.get::<_, Option<i64>>(5)?,
            row.get::<_, Option<Vec<u8>>>(6)?,
        ))
    })? {
        let ((tenant, session_id), request_id, rpc_id, resolved, expires_ms, fingerprint) = row?;
        let state = match (rpc_id, resolved) {
            (Some(rpc_id), _) => StoredRequestState::Pending { rpc_id },
            (None, Some(resolved)) => StoredRequestState::Done {
                resolved: decode(&resolved, "request record")?,
                expires: UNIX_EPOCH + Duration::from_millis(expires_ms.unwrap_or(0) as u64),
            },
            (None, None) => continue,
        };
        requests.push(StoredRequest {
            key: SessionKey::new(tenant.as_str(), session_id.as_str()),
            request_id: Arc::from(request_id.as_str()),
            state,
            // Anything but 16 bytes was not written by askgate: as if there were none.
            fingerprint: fingerprint
                .and_then(|bytes| <[u8; 16]>::try_from(bytes).ok())
                .map(Fingerprint),
        });
    }
    Ok(requests)
}

fn agents(conn: &Connection) -> Result<Vec<AttachedAgent>, LoadError> {
    let mut rows =
        conn.prepare("SELECT tenant, agent_id, incarnation, parent_agent_id, holder FROM agents")?;
    let agents = rows
        .query_map([], |row| {
            Ok(AttachedAgent {
                tenant: Arc::from(row.get::<_, String>(0)?.as_str()),
                agent_id: row.get(1)?,
                incarnation: row.get(2)?,
                parent_agent_id: row.get(3)?,
                holder: row.get(4)?,
            })
        })?
        .collect::<Result<_, _>>()?;
    Ok(agents)
}

/// Everything the store holds of webhooks and channels: endpoints and deliveries in
/// their order, timers, notes, people, policy sets, grants.
pub fn hooks(conn: &Connection) -> Result<StoredHooks, LoadError> {
    let mut stored = StoredHooks::default();
    let mut rows = conn.prepare("SELECT position, record FROM endpoints ORDER BY position")?;
    for row in rows.query_map([], |row| {
        Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
    })? {
        let (position, record) = row?;
        stored
            .endpoints
            .push((position as u64, json(&record, "endpoint")?));
    }
    let mut rows =
        conn.prepare("SELECT position, due_ms, record FROM deliveries ORDER BY position")?;
    for row in rows.query_map([], |row| {
        Ok((
            row.get::<_, i64>(0)?,
            row.get::<_, Option<i64>>(1)?,
            row.get::<_, String>(2)?,
        ))
    })? {
        let (position, due_ms, record) = row?;
        let delivery = json(&record, "delivery")?;
        stored
            .deliveries
            .push((position as u64, due_ms.map(|d| d as u64), delivery));
    }
    let mut rows = conn.prepare("SELECT due_ms, record FROM timers")?;
    for row in rows.query_map([], |row| {
        Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
    })? {
        let (due_ms, record) = row?;
        stored.timers.push((due_ms as u64, json(&record, "timer")?));
    }
    let mut rows = conn.prepare("SELECT key, value, expires_ms FROM notes")?;
    for row in rows.query_map([], |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, String>(1)?,
            row.get::<_, i64>(2)?,
        ))
    })? {
        let (key, value, expires_ms) = row?;
        stored.notes.push((key, value, expires_ms as u64));
    }
    let mut rows = conn.prepare("SELECT record FROM people")?;
    for row in rows.query_map([], |row| row.get::<_, String>(0))? {
        stored.people.push(json(&row?, "person")?);
    }
    let mut rows = conn.prepare("SELECT record FROM policies")?;
    for row in rows.query_map([], |row| row.get::<_, String>(0))? {
        stored.policies.push(json(&row?, "policy set")?);
    }
    let mut rows = conn.prepare("SELECT record FROM grants")?;
    for row in rows.query_map([], |row| row.get::<_, String>(0))? {
        stored.grants.push(json(&row?, "grant")?);
    }
    Ok(stored)
}

fn json<T: serde::de::DeserializeOwned>(record: &str, what: &'static str) -> Result<T, LoadError> {
    serde_json::from_str(record).map_err(|e| LoadError::Corrupt {
        what,
        why: e.to_string(),
    })
}

/// A row's (tenant, session_id), its first two columns.
/// A quorum ask's stored votes.
fn votes_of(
    json: Option<String>,
) -> Result<Option<askgate_core::domain::quorum::Votes>, LoadError> {
    json.map(|json| serde_json::from_str(&json))
        .transpose()
        .map_err(|e| LoadError::Corrupt {
            what: "vote",
            why: e.to_string(),
        })
}

fn keys(row: &Row<'_>) -> rusqlite::Result<(String, String)> {
    Ok((row.get(0)?, row.get(1)?))
}

fn decode(bytes: &[u8], what: &'static str) -> Result<Message, LoadError> {
    SubscribeResponse::decode(bytes)
        .map(Arc::new)
        .map_err(|e| LoadError::Corrupt {
            what,
            why: e.to_string(),
        })
}
