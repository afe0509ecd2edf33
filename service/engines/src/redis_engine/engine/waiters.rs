//! The calls waiting on this node, indexed by session.

use super::*;

/// The calls waiting on this node for one ask.
pub(super) struct WaitEntry {
    pub(super) senders: Vec<oneshot::Sender<Outcome>>,
    /// Empty when no retry can ever reattach to the ask.
    pub(super) request_id: String,
}

/// The calls waiting on this node, by session and then rpc_id: a session's pump asks
/// whether anything here still waits on it at every event, which must not cost a scan
/// of every ask the node holds.
#[derive(Default)]
pub(super) struct Waiters {
    pub(super) by_session: HashMap<SessionKey, HashMap<String, WaitEntry>>,
    pub(super) len: usize,
}

impl Waiters {
    /// The entry of (key, rpc_id), made by `new` when there is none.
    pub(super) fn entry(
        &mut self,
        key: &SessionKey,
        rpc_id: &str,
        new: impl FnOnce() -> WaitEntry,
    ) -> &mut WaitEntry {
        use std::collections::hash_map::Entry;
        match self
            .by_session
            .entry(key.clone())
            .or_default()
            .entry(rpc_id.to_owned())
        {
            Entry::Occupied(entry) => entry.into_mut(),
            Entry::Vacant(entry) => {
                self.len += 1;
                entry.insert(new())
            }
        }
    }

    pub(super) fn get_mut(&mut self, key: &SessionKey, rpc_id: &str) -> Option<&mut WaitEntry> {
        self.by_session.get_mut(key)?.get_mut(rpc_id)
    }

    pub(super) fn remove(&mut self, key: &SessionKey, rpc_id: &str) -> Option<WaitEntry> {
        let asks = self.by_session.get_mut(key)?;
        let removed = asks.remove(rpc_id)?;
        if asks.is_empty() {
            self.by_session.remove(key);
        }
        self.len -= 1;
        Some(removed)
    }

    pub(super) fn waiting_on(&self, key: &SessionKey) -> bool {
        self.by_session.contains_key(key)
    }

    pub(super) fn rpc_ids(&self, key: &SessionKey) -> Vec<String> {
        self.by_session
            .get(key)
            .map(|asks| asks.keys().cloned().collect())
            .unwrap_or_default()
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&SessionKey, &String, &WaitEntry)> {
        self.by_session
            .iter()
            .flat_map(|(key, asks)| asks.iter().map(move |(rpc_id, e)| (key, rpc_id, e)))
    }
}
