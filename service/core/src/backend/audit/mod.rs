//! The audit log (docs/approvals.md): every resolution and every admin change of a
//! tenant, appended to the tenant's hash chain. The chain's rules are here, once; the
//! engines keep the records ([`AuditStore`]).
//!
//! A record is `{seq, prev_hash, hash, body_json}`: `body_json` the RFC 8785 canonical
//! JSON of the record's fields with its `seq`, `hash` the lowercase hex SHA-256 of the
//! UTF-8 bytes of `prev_hash + body_json`. `seq` counts from 1 without gaps per
//! tenant; the first record's `prev_hash` is empty. Changing, dropping or reordering
//! a record breaks every hash from it on.

use std::time::{Duration, SystemTime};

use askgate_contract::{
    answers::answers_value,
    canonical::{canonical, plain, sorted, write_str, write_value},
    digest::sha256_hex,
};
pub use askgate_proto::v1::AuditRecord;
use askgate_proto::v1::{PolicyDecision, QuestionAnswer, Requested, Resolved};
use async_trait::async_trait;
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

use crate::domain::Error;

/// What is to be appended: its tenant, a name that is the same each time the same
/// thing is reported (an engine may report an event twice: the second is not
/// appended), and its fields (`kind`, `at`, `subject`, ...; `seq` and `tenant` are
/// added here).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AuditEntry {
    pub tenant: String,
    pub id: String,
    pub fields: Map<String, Value>,
}

/// The tenant's last record: where the next one links.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Head {
    /// 0 before the first record.
    pub seq: u64,
    /// Empty before the first record.
    pub hash: String,
}

impl Head {
    /// The record after this head: `entry` chained to it.
    pub fn chain(&self, entry: &AuditEntry) -> AuditRecord {
        let seq = self.seq + 1;
        let body_json = body(&entry.fields, seq, &entry.tenant);
        AuditRecord {
            seq,
            hash: link_hash(&self.hash, &body_json),
            prev_hash: self.hash.clone(),
            body_json,
        }
    }

    /// The head once `record` is appended.
    pub fn after(record: &AuditRecord) -> Self {
        Self {
            seq: record.seq,
            hash: record.hash.clone(),
        }
    }
}

/// The canonical JSON of a record's body: `fields` with `seq` and `tenant` (which
/// take the place of fields of those names).
///
/// Every body askgate writes is [`plain`], and is written here key by key in byte
/// order (RFC 8785's order for ASCII keys), `seq` and `tenant` put in their places:
/// no copy of the fields is made. Any other body takes [`canonical`].
fn body(fields: &Map<String, Value>, seq: u64, tenant: &str) -> String {
    if !fields.iter().all(|(k, v)| k.is_ascii() && plain(v)) || seq > 1 << 53 {
        let mut fields = fields.clone();
        fields.insert("seq".into(), seq.into());
        fields.insert("tenant".into(), tenant.into());
        return canonical(&Value::Object(fields));
    }
    let mut out = Vec::with_capacity(256);
    let mut first = true;
    let mut key = |out: &mut Vec<u8>, name: &str| {
        out.push(if first { b'{' } else { b',' });
        first = false;
        write_str(out, name);
        out.push(b':');
    };
    let (mut seq_due, mut tenant_due) = (true, true);
    for (name, value) in sorted(fields) {
        if seq_due && name.as_str() >= "seq" {
            key(&mut out, "seq");
            out.extend_from_slice(seq.to_string().as_bytes());
            seq_due = false;
        }
        if tenant_due && name.as_str() >= "tenant" {
            key(&mut out, "tenant");
            write_str(&mut out, tenant);
            tenant_due = false;
        }
        if name == "seq" || name == "tenant" {
            continue;
        }
        key(&mut out, name);
        write_value(&mut out, value);
    }
    if seq_due {
        key(&mut out, "seq");
        out.extend_from_slice(seq.to_string().as_bytes());
    }
    if tenant_due {
        key(&mut out, "tenant");
        write_str(&mut out, tenant);
    }
    out.push(b'}');
    // serde_json writes UTF-8 only.
    String::from_utf8(out).unwrap_or_default()
}

/// The hash of a record: hex SHA-256 of `prev_hash + body_json`.
pub fn link_hash(prev_hash: &str, body_json: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(prev_hash.as_bytes());
    hasher.update(body_json.as_bytes());
    // Into a buffer: `hex::encode` builds its string a char at a time.
    let mut text = [0u8; 64];
    match hex::encode_to_slice(hasher.finalize(), &mut text) {
        // Hex digits are ASCII: the check passes, and is quicker than a lossy copy.
        Ok(()) => String::from_utf8(text.to_vec()).unwrap_or_default(),
        Err(_) => unreachable!("64 hex digits hold 32 bytes"),
    }
}

/// Where a chain breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("record {seq}: {what}")]
pub struct Broken {
    /// The first record that does not verify (its position when its seq is wrong).
    pub seq: u64,
    pub what: String,
}

/// Checks a run of records, oldest first: each hash recomputed, each linked to the
/// one before, seqs consecutive, each body canonical JSON naming its own seq. The first
/// record may start after 1 (older ones were pruned): its link is then taken as given.
pub fn verify<'a>(records: impl IntoIterator<Item = &'a AuditRecord>) -> Result<u64, Broken> {
    let mut before: Option<&AuditRecord> = None;
    let mut count = 0;
    for record in records {
        let broken = |what: String| Broken {
            seq: record.seq,
            what,
        };
        match before {
            Some(prev) if record.seq != prev.seq + 1 => {
                return Err(broken(format!("follows record {}", prev.seq)));
            }
            Some(prev) if record.prev_hash != prev.hash => {
                return Err(broken("prev_hash is not the previous record's hash".into()));
            }
            None if record.seq == 1 && !record.prev_hash.is_empty() => {
                return Err(broken("the first record's prev_hash is not empty".into()));
            }
            _ => {}
        }
        let body: Value = serde_json::from_str(&record.body_json)
            .map_err(|e| broken(format!("body is not JSON: {e}")))?;
        if canonical(&body) != record.body_json {
            return Err(broken("body is not in canonical form".into()));
        }
        if body.get("seq").and_then(Value::as_u64) != Some(record.seq) {
            return Err(broken("body names another seq".into()));
        }
        if link_hash(&record.prev_hash, &record.body_json) != record.hash {
            return Err(broken("hash does not match prev_hash + body".into()));
        }
        before = Some(record);
        count += 1;
    }
    Ok(count)
}

/// Why an export does not prove what it holds: [`verify_export`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unproven {
    /// A record breaks the chain.
    #[error("the chain breaks at seq {}: {}", .0.seq, .0.what)]
    Broken(Broken),
    /// The records do not start where the chain (or the anchor) does.
    #[error("{0}")]
    Start(String),
    /// The records do not end at the signed head: truncated, or rewritten.
    #[error("{0}")]
    End(String),
}

/// Checks an export as a whole: every link of `records` (oldest first), their end at
/// the signed `head` (its seq and hash), and their start at the chain's first record,
/// or, given an `anchor` (a hash kept from an earlier export's head), right after it.
/// Returns how many records verify. So a rewritten, re-chained, renumbered, truncated
/// or emptied export fails, naming why.
pub fn verify_export(
    records: &[AuditRecord],
    head: &Head,
    anchor: Option<&str>,
) -> Result<u64, Unproven> {
    let count = verify(records).map_err(Unproven::Broken)?;
    let (Some(first), Some(last)) = (records.first(), records.last()) else {
        return match (head.seq, anchor) {
            (0, None) => Ok(0),
            (_, Some(anchor)) if anchor == head.hash => Ok(0),
            _ => Err(Unproven::End(format!(
                "the export holds no record, but the signed head is at seq {}",
                head.seq
            ))),
        };
    };
    match anchor {
        Some(anchor) if first.prev_hash != anchor => {
            return Err(Unproven::Start(format!(
                "the export starts at seq {}, whose prev_hash is not the anchor",
                first.seq
            )));
        }
        None if first.seq != 1 => {
            return Err(Unproven::Start(format!(
                "the export starts at seq {} (the records before it were pruned or left out): \
                 give --anchor with the head's hash of an earlier export",
                first.seq
            )));
        }
        _ => {}
    }
    if last.seq != head.seq || last.hash != head.hash {
        return Err(Unproven::End(format!(
            "the export ends at seq {}, but the signed head is at seq {}{}",
            last.seq,
            head.seq,
            match last.seq == head.seq {
                true => " with another hash: the records were rewritten",
                false => ": records are missing or were added",
            }
        )));
    }
    Ok(count)
}

/// Longest answers a record holds as they are (their canonical JSON, in bytes): longer
/// ones are recorded as their digest only, `answers_sha256`, so that one ask cannot
/// make a record hold whatever its free-text answers hold.
pub const MAX_RECORDED_ANSWERS_BYTES: usize = 4 * 1024;

/// Puts `answers` in a record's `fields`: as `answers`, or, past
/// [`MAX_RECORDED_ANSWERS_BYTES`], as `answers_sha256` (lowercase hex SHA-256 of their
/// canonical JSON, which whoever holds the answers can check).
pub fn record_answers(fields: &mut Map<String, Value>, answers: &[QuestionAnswer]) {
    let value = answers_value(answers, |_| false);
    // Most answers are far below the bound whatever their escaping (a byte is at most
    // six in JSON): those are not written out to be measured.
    let bound: usize = answers
        .iter()
        .map(|a| {
            let text = a.id.len()
                + a.selected.iter().map(String::len).sum::<usize>()
                + a.custom.as_ref().map_or(0, String::len);
            6 * text + 8 * a.selected.len() + 48
        })
        .sum();
    if bound <= MAX_RECORDED_ANSWERS_BYTES {
        fields.insert("answers".into(), value);
        return;
    }
    let text = canonical(&value);
    match text.len() > MAX_RECORDED_ANSWERS_BYTES {
        true => {
            fields.insert("answers_sha256".into(), sha256_hex(text.as_bytes()).into());
        }
        false => {
            fields.insert("answers".into(), value);
        }
    }
}

/// The record of a `resolved` event: who resolved which ask, how, from where, with
/// which answers (those to secret questions as their MAC only, `answers_hmac`),
/// approving which action. `asked` is the ask as it was pending.
pub fn resolution(tenant: &str, resolved: &Resolved, asked: Option<&Requested>) -> AuditEntry {
    let at = resolved
        .resolved_at
        .and_then(|t| SystemTime::try_from(t).ok())
        .unwrap_or_else(SystemTime::now);
    let action_digest = asked.map(|a| a.action_digest.clone()).unwrap_or_default();
    let mut fields = Map::new();
    fields.insert("kind".into(), "ask.resolved".into());
    fields.insert("at".into(), self::at(at));
    fields.insert("session_id".into(), resolved.session_id.clone().into());
    fields.insert("rpc_id".into(), resolved.rpc_id.clone().into());
    fields.insert("subject".into(), resolved.resolved_by.clone().into());
    fields.insert("channel".into(), resolved.channel.clone().into());
    fields.insert("resolution".into(), resolved.reason().as_str_name().into());
    fields.insert("action_digest".into(), action_digest.into());
    record_answers(&mut fields, &resolved.answers);
    if !resolved.answers_hmac.is_empty() {
        fields.insert("answers_hmac".into(), resolved.answers_hmac.clone().into());
    }
    if !resolved.approvers.is_empty() {
        fields.insert("approvers".into(), json!(resolved.approvers));
    }
    if !resolved.cancel_reason.is_empty() {
        fields.insert("reason".into(), resolved.cancel_reason.clone().into());
    }
    if !resolved.on_behalf_of.is_empty() {
        fields.insert("on_behalf_of".into(), resolved.on_behalf_of.clone().into());
    }
    // What the tenant's policy decided before it was asked.
    if let Some(policy) = asked.and_then(|a| a.policy.as_deref()) {
        fields.insert("policy".into(), decision_value(policy));
    }
    // Who the ask allowed to answer, as its receipt's `approver_rule` says it.
    if let Some(rule) = asked.and_then(|a| a.approvers.as_deref()) {
        fields.insert(
            "approver_rule".into(),
            json!({ "subjects": rule.subjects, "groups": rule.groups }),
        );
    }
    AuditEntry {
        tenant: tenant.to_owned(),
        id: format!(
            "ask.resolved\u{1f}{}\u{1f}{}",
            resolved.session_id, resolved.rpc_id
        ),
        fields,
    }
}

/// A policy decision as a record holds it: `{decision, policy_id, reason, shadow}`,
/// empty parts left out.
fn decision_value(policy: &PolicyDecision) -> Value {
    let mut value = Map::new();
    value.insert("decision".into(), policy.decision.clone().into());
    if !policy.policy_id.is_empty() {
        value.insert("policy_id".into(), policy.policy_id.clone().into());
    }
    if !policy.reason.is_empty() {
        value.insert("reason".into(), policy.reason.clone().into());
    }
    if policy.shadow {
        value.insert("shadow".into(), true.into());
    }
    Value::Object(value)
}

/// What an ask that nobody was asked came to, for its record: the tenant's policy
/// allowed (`rpc_id` the one its receipt names) or denied its action.
pub struct Decided<'a> {
    pub tenant: &'a str,
    pub session_id: &'a str,
    pub rpc_id: &'a str,
    /// The subject that asked.
    pub subject: &'a str,
    pub action: &'a str,
    pub action_digest: &'a str,
    pub policy: &'a PolicyDecision,
}

/// The record of an ask the tenant's policy decided without asking anyone (kind
/// `ask.policy`); a retry decided again the same way is the same record.
pub fn policy_decision(decided: &Decided<'_>) -> AuditEntry {
    let mut fields = Map::new();
    fields.insert("kind".into(), "ask.policy".into());
    fields.insert("at".into(), at(SystemTime::now()));
    fields.insert("session_id".into(), decided.session_id.into());
    fields.insert("rpc_id".into(), decided.rpc_id.into());
    fields.insert("subject".into(), decided.subject.into());
    fields.insert("action".into(), decided.action.into());
    fields.insert("action_digest".into(), decided.action_digest.into());
    fields.insert("policy".into(), decision_value(decided.policy));
    AuditEntry {
        tenant: decided.tenant.to_owned(),
        id: format!(
            "ask.policy\u{1f}{}\u{1f}{}",
            decided.session_id, decided.rpc_id
        ),
        fields,
    }
}

/// The time of a record, as its `at` field gives it (RFC 3339).
pub fn at(time: SystemTime) -> Value {
    humantime::format_rfc3339_millis(time).to_string().into()
}

/// What consuming a receipt came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consumed {
    /// Consumed now, at this time: the first use.
    Now(SystemTime),
    /// Consumed before, at this time: the action must not run again.
    Before(SystemTime),
}

/// Milliseconds since the Unix epoch.
pub fn millis(time: SystemTime) -> u64 {
    time.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The record of a receipt consumed (`jti`, the ask's rpc_id) by `subject`: its id is
/// the same for every use of the receipt, so that only the first is recorded.
pub fn consumption(
    tenant: &str,
    jti: &str,
    session_id: &str,
    subject: &str,
    decision: &str,
) -> AuditEntry {
    let mut fields = Map::new();
    fields.insert("kind".into(), "receipt.consumed".into());
    fields.insert("at".into(), at(SystemTime::now()));
    fields.insert("session_id".into(), session_id.into());
    fields.insert("rpc_id".into(), jti.into());
    fields.insert("subject".into(), subject.into());
    fields.insert("decision".into(), decision.into());
    AuditEntry {
        tenant: tenant.to_owned(),
        id: format!("receipt.consumed\u{1f}{jti}"),
        fields,
    }
}

#[async_trait]
pub trait AuditStore: Send + Sync + 'static {
    /// Appends `entries` to their tenants' chains, in order, durably; an entry whose
    /// id the tenant's chain already holds (from a report seen before) is skipped.
    async fn append(&self, entries: Vec<AuditEntry>) -> Result<(), Error>;

    /// The tenant's records after `after_seq`, oldest first, at most `limit`.
    async fn export(
        &self,
        tenant: &str,
        after_seq: u64,
        limit: usize,
    ) -> Result<Vec<AuditRecord>, Error>;

    /// Forgets records older than `retention` (their `at`), oldest first, and receipts'
    /// consumptions past their `keep_until`.
    async fn prune(&self, retention: Duration) -> Result<(), Error>;

    /// The tenant's last record (seq 0 before the first).
    async fn head(&self, tenant: &str) -> Result<Head, Error>;

    /// Uses up the receipt `jti` of `entry`'s tenant, once: `entry` (its
    /// [`consumption`] record) is appended, and the use remembered until `keep_until`
    /// (past the last moment any receipt of that ask can be valid). Durable before it
    /// returns [`Consumed::Now`]; every later call returns [`Consumed::Before`].
    async fn consume(
        &self,
        entry: AuditEntry,
        jti: &str,
        keep_until: SystemTime,
    ) -> Result<Consumed, Error>;
}

/// The rules every [`AuditStore`] keeps: its conformance suite.
#[cfg(feature = "conformance")]
pub mod conformance;

#[cfg(test)]
mod tests;
