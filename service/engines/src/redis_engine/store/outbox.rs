//! The outbox: committed events whose webhook and channel deliveries are not yet
//! queued. REGISTER and CLAIM put each new event into its session's outbox (and the
//! session into its slot's outbox index) in the same step as they commit it; the node
//! that committed it queues its deliveries and takes it out (OUTBOX_DONE). An event
//! that stays longer than a lease (its node died, or failed to queue it) is taken by
//! any node's sweep (OUTBOX_SESSIONS, then OUTBOX_TAKE), which queues it in turn. So an
//! event is never committed without its deliveries queued, whatever node dies when.
//!
//! On one Redis the index is one key; on a cluster each slot has its own (a hash tag of
//! that slot, so the scripts keep to the session's slot), and a sweep goes over a share
//! of the slots' indexes each time.

use std::sync::{LazyLock, atomic::Ordering};

use askgate_core::domain::{Error, SessionKey};
use redis::Script;

use super::{RedisStore, SessionKeys, now_ms, unavailable};
use crate::redis_engine::keys::{OUTBOXES_KEY, outbox_indexes, outbox_member, parse_outbox_member};

static DONE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/outbox_done.lua")));
static SESSIONS: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/outbox_sessions.lua")));
static TAKE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/outbox_take.lua")));

/// An event taken from an outbox by a sweep, to be queued.
#[derive(Debug)]
pub struct Taken {
    pub key: SessionKey,
    /// `<epoch> <seq>`.
    pub id: String,
    /// Its history entry (`Q`/`R` + encoded).
    pub event: Vec<u8>,
    /// For a `resolved` event, the ask it ended (encoded `Requested`); else empty.
    pub asked: Vec<u8>,
}

/// Sessions a sweep takes from one index at most.
const SESSIONS_PER_INDEX: usize = 100;
/// Events a sweep takes from one session at most.
const EVENTS_PER_SESSION: usize = 100;

impl RedisStore {
    /// From now on, committed events go into their session's outbox (the node queues
    /// deliveries: it has a tap).
    pub fn use_outbox(&self) {
        self.outbox.store(true, Ordering::Release);
    }

    /// The outbox arguments of REGISTER and CLAIM: four empty ones without an outbox.
    pub(super) fn outbox_args(&self, keys: &SessionKeys, key: &SessionKey) -> [String; 4] {
        if !self.outbox.load(Ordering::Acquire) {
            return Default::default();
        }
        [
            keys.outbox(),
            keys.outbox_data(),
            keys.outbox_index(self.is_cluster()),
            outbox_member(key),
        ]
    }

    /// The deliveries of these events are queued: they leave their outboxes. One
    /// round trip on one Redis; on a cluster one per session, at once.
    pub async fn outbox_done(&self, done: Vec<(SessionKey, Vec<String>)>) -> Result<(), Error> {
        let cluster = self.is_cluster();
        let invoke = |sessions: &[(SessionKey, Vec<String>)]| {
            let mut invocation = DONE.prepare_invoke();
            for (key, ids) in sessions {
                let keys = SessionKeys::new(key);
                invocation
                    .key(keys.outbox())
                    .key(keys.outbox_data())
                    .key(keys.outbox_index(cluster))
                    .arg(outbox_member(key))
                    .arg(ids.len())
                    .arg(ids);
            }
            let mut conn = self.conn.clone();
            async move { invocation.invoke_async::<()>(&mut conn).await }
        };
        if !cluster {
            return invoke(&done).await.map_err(unavailable);
        }
        let mut calls = tokio::task::JoinSet::new();
        for session in done.chunks(1) {
            calls.spawn(invoke(session));
        }
        let mut outcome = Ok(());
        while let Some(call) = calls.join_next().await {
            if let Ok(Err(e)) = call {
                outcome = Err(unavailable(e));
            }
        }
        outcome
    }

    /// The outbox indexes a sweep looks at: the one key on one Redis; on a cluster the
    /// `round`th share of `shares` of the slots' indexes.
    pub fn outbox_indexes(&self, round: usize, shares: usize) -> Vec<String> {
        match self.is_cluster() {
            false => vec![OUTBOXES_KEY.to_owned()],
            true => outbox_indexes()
                .enumerate()
                .filter(|(i, _)| i % shares.max(1) == round % shares.max(1))
                .map(|(_, key)| key)
                .collect(),
        }
    }

    /// Takes the events of `index`'s sessions that no node queued for `stale_ms`.
    pub async fn take_stale(&self, index: &str, stale_ms: u64) -> Result<Vec<Taken>, Error> {
        let now = now_ms();
        let stale_before = now.saturating_sub(stale_ms);
        let sessions: Vec<String> = SESSIONS
            .key(index)
            .arg(stale_before)
            .arg(now)
            .arg(SESSIONS_PER_INDEX)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)?;
        let mut taken = Vec::new();
        for key in sessions.iter().filter_map(|m| parse_outbox_member(m)) {
            let keys = SessionKeys::new(&key);
            let reply: Vec<Vec<u8>> = TAKE
                .key(keys.outbox())
                .key(keys.outbox_data())
                .key(keys.outbox_index(self.is_cluster()))
                .arg(stale_before)
                .arg(now)
                .arg(EVENTS_PER_SESSION)
                .arg(outbox_member(&key))
                .invoke_async(&mut self.conn.clone())
                .await
                .map_err(unavailable)?;
            for entry in reply.chunks(3) {
                let [id, event, asked] = entry else {
                    continue;
                };
                taken.push(Taken {
                    key: key.clone(),
                    id: String::from_utf8_lossy(id).into_owned(),
                    event: event.clone(),
                    asked: asked.clone(),
                });
            }
        }
        Ok(taken)
    }
}
