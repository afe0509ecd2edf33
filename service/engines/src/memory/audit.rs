//! The audit log in this process: each tenant's chain head, its last records (at most
//! `keep`; the memory engine's log is bounded), and the ids of what it appended
//! lately (so that an event reported twice is appended once). On the sqlite engine the
//! records go to the store through the journal, and are read back from it.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    time::{Duration, SystemTime},
};

use askgate_core::{
    backend::audit::{AuditEntry, AuditRecord, AuditStore, Consumed, Head, millis},
    domain::Error,
};
use async_trait::async_trait;
use parking_lot::Mutex;

use super::journal::{Change, Journal, Spent};

/// Records the memory engine keeps per tenant, newest last: a bound on what a node of
/// this engine (for tests and benchmarks) holds, about 6 MB a tenant.
pub const KEEP_PER_TENANT: usize = 10_000;
/// Ids of appended entries remembered per tenant: far more than a node's reports in
/// flight (an event is reported again only within a lease or two).
const IDS_PER_TENANT: usize = 16 * 1024;

#[derive(Default)]
struct Log {
    head: Head,
    /// What the tenant's records hold, in bytes ([`record_bytes`]); on a durable log
    /// an estimate from above, set back after each trim.
    bytes: u64,
    /// The last records, with when each was appended.
    records: VecDeque<(SystemTime, AuditRecord)>,
    ids: HashSet<String>,
    id_order: VecDeque<String>,
    /// Receipts consumed (by jti): when, and until when the use is remembered.
    consumed: HashMap<String, Spent>,
}

impl Log {
    fn remember(&mut self, id: String) {
        if self.ids.insert(id.clone()) {
            self.id_order.push_back(id);
        }
        while self.id_order.len() > IDS_PER_TENANT {
            if let Some(old) = self.id_order.pop_front() {
                self.ids.remove(&old);
            }
        }
    }
}

pub struct MemoryAuditStore {
    logs: Mutex<HashMap<String, Log>>,
    keep: usize,
    /// Bytes a tenant's records may hold: past them the oldest go (never the newest).
    max_bytes: u64,
    journal: Option<Journal>,
}

impl Default for MemoryAuditStore {
    fn default() -> Self {
        Self::new(
            KEEP_PER_TENANT,
            askgate_core::backend::StateConfig::default().max_audit_bytes_per_tenant,
        )
    }
}

/// What a record counts against its tenant's audit budget: its body and hashes.
pub fn record_bytes(record: &AuditRecord) -> u64 {
    (record.body_json.len() + record.hash.len() + record.prev_hash.len()) as u64
}

/// A trimmed log keeps this share of its budget, so that a log at its budget is not
/// trimmed at every append.
fn trimmed_to(max_bytes: u64) -> u64 {
    max_bytes / 10 * 9
}

impl MemoryAuditStore {
    /// A log that keeps the last `keep` records of each tenant, within `max_bytes`.
    pub fn new(keep: usize, max_bytes: u64) -> Self {
        Self {
            logs: Mutex::new(HashMap::new()),
            keep,
            max_bytes,
            journal: None,
        }
    }

    /// The heads of a durable log (the sqlite engine's), and the receipts used and
    /// still remembered (tenant, jti, use): records go to `journal`, and none is kept
    /// here.
    pub fn durable(
        journal: Journal,
        heads: Vec<(String, Head, u64)>,
        consumed: Vec<(String, String, Spent)>,
        max_bytes: u64,
    ) -> Self {
        let mut logs: HashMap<String, Log> = heads
            .into_iter()
            .map(|(tenant, head, bytes)| {
                let log = Log {
                    head,
                    bytes,
                    ..Log::default()
                };
                (tenant, log)
            })
            .collect();
        for (tenant, jti, spent) in consumed {
            logs.entry(tenant).or_default().consumed.insert(jti, spent);
        }
        Self {
            logs: Mutex::new(logs),
            keep: 0,
            max_bytes,
            journal: Some(journal),
        }
    }
}

impl MemoryAuditStore {
    /// Chains `entry` unless its tenant's log holds it already, at `now`, and keeps
    /// the log within its byte budget: the changes a durable log journals (the record,
    /// and a trim when the log went past its budget), pushed onto `changes`. Under the
    /// logs' lock.
    fn chain(
        &self,
        logs: &mut HashMap<String, Log>,
        entry: AuditEntry,
        now: SystemTime,
        changes: &mut Vec<Change>,
    ) {
        let log = logs.entry(entry.tenant.clone()).or_default();
        if log.ids.contains(&entry.id) {
            return;
        }
        let record = log.head.chain(&entry);
        log.head = Head::after(&record);
        log.remember(entry.id);
        log.bytes += record_bytes(&record);
        if self.journal.is_some() {
            changes.push(Change::Audit {
                tenant: entry.tenant.clone(),
                at: now,
                record,
            });
            if log.bytes > self.max_bytes {
                // The store drops its oldest records down to this (never the newest).
                let keep_bytes = trimmed_to(self.max_bytes);
                changes.push(Change::AuditTrimmed {
                    tenant: entry.tenant,
                    keep_bytes,
                });
                log.bytes = keep_bytes;
            }
            return;
        }
        if self.keep > 0 {
            log.records.push_back((now, record));
        }
        while log.records.len() > 1 && (log.records.len() > self.keep || log.bytes > self.max_bytes)
        {
            if let Some((_, dropped)) = log.records.pop_front() {
                log.bytes = log.bytes.saturating_sub(record_bytes(&dropped));
            }
        }
    }

    /// Chains `entry` (unless appended before) and, on a durable log, records it with
    /// `changes` (the changes it is about) as one journal entry: the record and what it
    /// records are durable together. Under this log's lock, so that a tenant's records
    /// reach the journal in their seq order.
    pub fn append_with(&self, entry: AuditEntry, mut changes: Vec<Change>) {
        let mut logs = self.logs.lock();
        self.chain(&mut logs, entry, SystemTime::now(), &mut changes);
        if let Some(journal) = &self.journal {
            journal.record_all(changes);
        }
    }
}

#[async_trait]
impl AuditStore for MemoryAuditStore {
    async fn append(&self, entries: Vec<AuditEntry>) -> Result<(), Error> {
        if let Some(journal) = &self.journal {
            journal.room().await;
        }
        {
            let now = SystemTime::now();
            let mut logs = self.logs.lock();
            let mut changes = Vec::new();
            for entry in entries {
                self.chain(&mut logs, entry, now, &mut changes);
            }
            if let Some(journal) = &self.journal
                && !changes.is_empty()
            {
                journal.record_all(changes);
            }
        }
        if let Some(journal) = &self.journal {
            journal.synced().await?;
        }
        Ok(())
    }

    async fn export(
        &self,
        tenant: &str,
        after_seq: u64,
        limit: usize,
    ) -> Result<Vec<AuditRecord>, Error> {
        let logs = self.logs.lock();
        let Some(log) = logs.get(tenant) else {
            return Ok(Vec::new());
        };
        // Records are in seq order, without gaps: the first wanted is found by offset.
        let first = log.records.front().map_or(0, |(_, r)| r.seq);
        let skip = usize::try_from((after_seq + 1).saturating_sub(first)).unwrap_or(usize::MAX);
        Ok(log
            .records
            .iter()
            .skip(skip)
            .take(limit)
            .map(|(_, r)| r.clone())
            .collect())
    }

    async fn prune(&self, retention: Duration) -> Result<(), Error> {
        let Some(cutoff) = SystemTime::now().checked_sub(retention) else {
            return Ok(());
        };
        let now_ms = millis(SystemTime::now());
        for log in self.logs.lock().values_mut() {
            log.consumed.retain(|_, spent| spent.until_ms >= now_ms);
            // Each tenant's newest record stays, as on the durable engines.
            while log.records.len() > 1 && log.records.front().is_some_and(|(at, _)| *at < cutoff) {
                if let Some((_, dropped)) = log.records.pop_front() {
                    log.bytes = log.bytes.saturating_sub(record_bytes(&dropped));
                }
            }
        }
        if let Some(journal) = &self.journal {
            journal.record(Change::AuditPruned {
                before: cutoff,
                consumed_before_ms: now_ms,
            });
            return journal.synced().await;
        }
        Ok(())
    }

    async fn head(&self, tenant: &str) -> Result<Head, Error> {
        Ok(self
            .logs
            .lock()
            .get(tenant)
            .map(|log| log.head.clone())
            .unwrap_or_default())
    }

    async fn consume(
        &self,
        entry: AuditEntry,
        jti: &str,
        keep_until: SystemTime,
    ) -> Result<Consumed, Error> {
        if let Some(journal) = &self.journal {
            journal.room().await;
        }
        // Whole milliseconds, as the store keeps it.
        let now = std::time::UNIX_EPOCH + Duration::from_millis(millis(SystemTime::now()));
        {
            let mut logs = self.logs.lock();
            let tenant = entry.tenant.clone();
            let log = logs.entry(tenant.clone()).or_default();
            if let Some(spent) = log.consumed.get(jti) {
                let at = std::time::UNIX_EPOCH + Duration::from_millis(spent.at_ms);
                return Ok(Consumed::Before(at));
            }
            let spent = Spent {
                at_ms: millis(now),
                until_ms: millis(keep_until),
            };
            log.consumed.insert(jti.to_owned(), spent);
            let mut changes = vec![Change::ReceiptConsumed {
                tenant,
                jti: jti.to_owned(),
                spent,
            }];
            self.chain(&mut logs, entry, now, &mut changes);
            if let Some(journal) = &self.journal {
                journal.record_all(changes);
            }
        }
        if let Some(journal) = &self.journal {
            journal.synced().await?;
        }
        Ok(Consumed::Now(now))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    async fn make() -> askgate_core::backend::audit::conformance::Made {
        let store = Arc::new(MemoryAuditStore::default());
        (store.clone(), store, Box::new(()))
    }

    askgate_core::audit_store_conformance_suite!(make);

    #[tokio::test]
    async fn the_memory_log_is_bounded_but_its_chain_goes_on() {
        let store = MemoryAuditStore::new(2, u64::MAX);
        for i in 0..5 {
            let entry = askgate_core::backend::audit::conformance::entry("acme", &i.to_string());
            store.append(vec![entry]).await.expect("append");
        }
        let kept = store.export("acme", 0, 10).await.expect("export");
        assert_eq!(kept.iter().map(|r| r.seq).collect::<Vec<_>>(), [4, 5]);
        assert_eq!(askgate_core::backend::audit::verify(&kept), Ok(2));
        assert_eq!(store.export("acme", 4, 10).await.expect("export").len(), 1);
    }
}
