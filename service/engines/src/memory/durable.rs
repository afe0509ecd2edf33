//! Where the engine's changes and committed events go: on a durable engine, the
//! journal first, and whatever acknowledges a change only once it is on disk; on the
//! memory engine, nowhere, and at once.

use std::sync::{Arc, OnceLock};

use askgate_core::{
    backend::{Committed, Tap, audit::AuditEntry},
    domain::Error,
};

use super::{
    MemoryAuditStore,
    journal::{Change, Journal},
};

pub(super) struct Durable {
    /// Where every change goes before it is acknowledged, on a durable engine.
    journal: Option<Journal>,
    /// Where a durable engine appends each resolution's audit record, in the
    /// resolution's own commit.
    audit: Option<Arc<MemoryAuditStore>>,
    /// Where committed events are reported, once set.
    tap: OnceLock<Tap>,
}

impl Durable {
    pub(super) fn new(durable: Option<(Journal, Arc<MemoryAuditStore>)>) -> Self {
        let (journal, audit) = durable.unzip();
        Self {
            journal,
            audit,
            tap: OnceLock::new(),
        }
    }

    pub(super) fn is_durable(&self) -> bool {
        self.journal.is_some()
    }

    pub(super) fn set_tap(&self, tap: Tap) {
        let _ = self.tap.set(tap);
    }

    /// Records a change, on a durable engine. Called under the lock that orders it.
    pub(super) fn record(&self, change: impl FnOnce() -> Change) {
        if let Some(journal) = &self.journal {
            journal.record(change());
        }
    }

    /// Records `changes` with the audit record of `entry` (a resolution's), in one
    /// commit: a durable engine never keeps the one without the other. Called under
    /// the lock that orders the changes.
    pub(super) fn record_audited(
        &self,
        changes: impl FnOnce() -> Vec<Change>,
        entry: impl FnOnce() -> Option<AuditEntry>,
    ) {
        let Some(journal) = &self.journal else {
            return;
        };
        match self.audit.as_ref().zip(entry()) {
            Some((audit, entry)) => audit.append_with(entry, changes()),
            None => journal.record_all(changes()),
        }
    }

    /// Reports a committed event, once it is durable.
    pub(super) fn report(&self, committed: impl FnOnce() -> Committed + Send + 'static) {
        let Some(tap) = self.tap.get() else {
            return;
        };
        match &self.journal {
            None => tap.report(committed()),
            Some(journal) => {
                let tap = tap.clone();
                journal.then(move || tap.report(committed()));
            }
        }
    }

    /// Runs `action` once every change so far is durable (at once on memory).
    pub(super) fn once_durable(&self, action: impl FnOnce() + Send + 'static) {
        match &self.journal {
            None => action(),
            Some(journal) => journal.then(action),
        }
    }

    /// Once every change so far is durable: what acknowledges a change waits for this.
    pub(super) async fn synced(&self) -> Result<(), Error> {
        match &self.journal {
            None => Ok(()),
            Some(journal) => journal.synced().await,
        }
    }

    /// The journal, on a durable engine: what a subscriber waits on before it hands an
    /// event on.
    pub(super) fn journal(&self) -> Option<Journal> {
        self.journal.clone()
    }

    /// Waits while a durable engine's writer is behind (see `Journal::room`).
    pub(super) async fn room(&self) {
        if let Some(journal) = &self.journal {
            journal.room().await;
        }
    }

    /// BACKEND_UNAVAILABLE once the store failed.
    pub(super) fn check(&self) -> Result<(), Error> {
        match &self.journal {
            Some(journal) => journal.check(),
            None => Ok(()),
        }
    }
}
