//! Every Redis key name askgate uses, in one place.
//!
//! Every key of a session carries the hash tag `{<tenant>/<session>}`, so a session's
//! keys live in one Redis Cluster slot and its scripts run on one shard. The tenant is
//! written with `{`, `}`, `/` and `%` percent-encoded and the session with `{`, `}` and
//! `%`, so no two (tenant, session) pairs ever share a tag, whatever characters they
//! hold (see `escape`). docs/architecture.md lists the keys and what each holds.

use askgate_core::domain::SessionKey;

/// The keys of one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionKeys {
    pub(super) tag: String,
}

impl SessionKeys {
    pub fn new(key: &SessionKey) -> Self {
        Self {
            tag: format!(
                "ag:{{{}/{}}}",
                escape(&key.tenant, TENANT_RESERVED),
                escape(&key.session_id, SESSION_RESERVED)
            ),
        }
    }

    fn key(&self, name: &str) -> String {
        format!("{}:{name}", self.tag)
    }

    /// rpc_id → encoded `Requested` of each pending ask.
    pub fn asks(&self) -> String {
        self.key("asks")
    }

    /// rpc_id → sequence number of its `requested`: the pending asks, oldest first.
    pub fn order(&self) -> String {
        self.key("order")
    }

    /// rpc_id → request_id, for asks that have one.
    pub fn rids(&self) -> String {
        self.key("rids")
    }

    /// The last events, `Q`/`R` + the encoded `Requested`/`Resolved`.
    pub fn events(&self) -> String {
        self.key("events")
    }

    /// The bytes [`Self::events`] holds, for the history's byte bound.
    pub fn events_bytes(&self) -> String {
        self.key("events-bytes")
    }

    /// The sequence number of the last event.
    pub fn head(&self) -> String {
        self.key("head")
    }

    /// The history's epoch: a new one when the keys were lost.
    pub fn epoch(&self) -> String {
        self.key("epoch")
    }

    /// The votes cast on the pending quorum ask `rpc_id` (`quorum::Votes` as JSON),
    /// dropped by its claim.
    pub fn votes(&self, rpc_id: &str) -> String {
        self.key(&format!("votes:{rpc_id}"))
    }

    /// rpc_id → `RESOLUTION resolved_by`, for NOT_PENDING.
    pub fn settled(&self) -> String {
        self.key("settled")
    }

    /// The rpc_ids of [`Self::settled`], oldest first: the hash keeps the last
    /// `history_len`.
    pub fn settled_order(&self) -> String {
        self.key("settled-order")
    }

    /// How many bytes the session's pending asks hold, for its byte budget.
    pub fn pending_bytes(&self) -> String {
        self.key("pending-bytes")
    }

    /// Presence: someone follows the session (a node holds it while it does).
    pub fn attended(&self) -> String {
        self.key("attended")
    }

    /// The session's subscriber slots, over every node.
    pub fn subscribers(&self) -> String {
        self.key("subs")
    }

    /// The exclusive subscriber's hold.
    pub fn exclusive(&self) -> String {
        self.key("exclusive")
    }

    /// The pub/sub channel of the session's events (same hash slot as its keys).
    pub fn channel(&self) -> String {
        self.key("events:live")
    }

    pub fn request(&self, request_id: &str) -> String {
        self.key(&format!("req:{request_id}"))
    }

    /// Which nodes' calls wait on the ask, each with the ask's reattach grace (ms);
    /// deleted by the claim that resolves it.
    /// The session's committed events whose webhook and channel deliveries are not yet
    /// queued: `<epoch> <seq>` → when committed (ms).
    pub fn outbox(&self) -> String {
        self.key("outbox")
    }

    /// What the outbox's events are: `<epoch> <seq>` → the event's entry (`Q`/`R` +
    /// encoded), and for a `resolved` event `<epoch> <seq> a` → the ask it ended.
    pub fn outbox_data(&self) -> String {
        self.key("outbox-data")
    }

    /// The index of sessions whose outbox holds events, in this session's slot: one key
    /// for every session on one Redis (`ag:outboxes`), one per cluster slot on a
    /// cluster (a hash tag of the same slot as the session's).
    pub fn outbox_index(&self, cluster: bool) -> String {
        match cluster {
            false => OUTBOXES_KEY.to_owned(),
            true => {
                let slot = redis::cluster_routing::Slot::for_key(&self.tag);
                format!("ag:{{{}}}:outboxes", slot_tags()[&slot])
            }
        }
    }

    /// A key written only so that a `WAIT` after it covers what came before it on the
    /// session's shard (an outcome about to be handed to an agent).
    pub fn barrier(&self) -> String {
        self.key("barrier")
    }

    pub fn wait_mark(&self, rpc_id: &str) -> String {
        self.key(&format!("w:{rpc_id}"))
    }

    /// The last notice of a kind (`reminder`, `escalated`) sent about the ask: `RANK SEQ
    /// EPOCH` (a reminder's count), so that a timer fired again by another node (the
    /// first died between the notice and recording it) sends no second one. Expires
    /// with the session's history.
    pub fn notice_mark(&self, rpc_id: &str, kind: &str) -> String {
        self.key(&format!("n:{kind}:{rpc_id}"))
    }
}

/// What a tenant name may not hold inside a key: the hash tag's braces, the `/` that
/// ends it within a session's tag, and the escape character itself.
const TENANT_RESERVED: &[char] = &['{', '}', '/', '%'];
/// What a session id may not hold inside a key: the braces that end its hash tag, and
/// the escape character itself.
const SESSION_RESERVED: &[char] = &['{', '}', '%'];
/// What an agent id may not hold inside its key: the `:` that separates the parts
/// after it, and the escape character itself.
const AGENT_RESERVED: &[char] = &[':', '%'];

/// Percent-encodes every character of `reserved` (which must hold `%`). Injective:
/// `%` itself is encoded, so distinct texts give distinct results, and none of them
/// holds a reserved character, so a reserved character after it delimits it.
///
/// This is what makes the (tenant, session) → key mapping injective whatever either
/// holds: the tenant ends at the first `/` of the tag, the session at the first `}`.
/// Names the validation accepts (`[A-Za-z0-9._-]` tenants, `[A-Za-z0-9._:@/-]`
/// sessions) pass through unchanged.
fn escape(text: &str, reserved: &[char]) -> String {
    debug_assert!(reserved.contains(&'%'));
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if reserved.contains(&c) {
            escaped.push_str(&format!("%{:02X}", u32::from(c)));
        } else {
            escaped.push(c);
        }
    }
    escaped
}

/// The keys of one tenant: its `all_sessions` channel and the index of its sessions
/// with pending asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantKeys {
    pub(super) tag: String,
}

impl TenantKeys {
    pub fn new(tenant: &str) -> Self {
        Self {
            tag: format!("ag:tenant:{{{}}}", escape(tenant, TENANT_RESERVED)),
        }
    }

    /// Every event of every session of the tenant.
    pub fn channel(&self) -> String {
        format!("{}:live", self.tag)
    }

    /// Sessions that (may) have pending asks, for an `all_sessions` snapshot.
    pub fn sessions(&self) -> String {
        format!("{}:sessions", self.tag)
    }

    /// How many asks of the tenant are pending, for its quota.
    pub fn pending(&self) -> String {
        format!("{}:pending", self.tag)
    }

    /// How many bytes the tenant's pending asks hold (their `requested` events), for
    /// its byte budget.
    pub fn pending_bytes(&self) -> String {
        format!("{}:pending_bytes", self.tag)
    }

    /// The tenant's recorded outcomes (kept for retries), `<bytes> <id>` scored by
    /// when each expires: they count against its byte budget until then.
    pub fn outcomes(&self) -> String {
        format!("{}:outcomes", self.tag)
    }

    /// The bytes [`Self::outcomes`] holds.
    pub fn outcome_bytes(&self) -> String {
        format!("{}:outcome_bytes", self.tag)
    }

    /// Set (with a short expiry) while some node has an `all_sessions` subscriber.
    pub fn attended(&self) -> String {
        format!("{}:attended", self.tag)
    }

    /// The tenant's sessions that hold state, scored by when that ends (their history
    /// expires, or their subscribers' lease), for the per-tenant session cap.
    pub fn held_sessions(&self) -> String {
        format!("{}:held", self.tag)
    }

    /// The tenant's `all_sessions` subscriber slots, over every node.
    pub fn all_sessions_subscribers(&self) -> String {
        format!("{}:subs", self.tag)
    }

    /// The units of one of the tenant's budgets held, over every node (see
    /// `Backend::hold`), scored by when their lease ends.
    pub fn budget(&self, budget: &str) -> String {
        format!("{}:budget:{budget}", self.tag)
    }

    /// The tenant's attached agents, scored by when their lease ends.
    pub fn agents(&self) -> String {
        format!("{}:agents", self.tag)
    }

    /// An agent's lease (its incarnation, parent and holder).
    pub fn agent(&self, agent_id: &str) -> String {
        format!("{}:agent:{}", self.tag, escape(agent_id, AGENT_RESERVED))
    }

    /// The pending asks of one incarnation of an agent.
    pub fn agent_asks(&self, agent_id: &str, incarnation: &str) -> String {
        format!("{}:asks:{incarnation}", self.agent(agent_id))
    }
}

/// The keys of a tenant's audit log, under a hash tag of their own
/// (`{audit/<tenant>}`), so that its scripts run on one slot.
pub struct AuditKeys {
    tag: String,
}

impl AuditKeys {
    pub fn new(tenant: &str) -> Self {
        Self {
            tag: format!("ag:{{audit/{}}}", escape(tenant, TENANT_RESERVED)),
        }
    }

    /// The chain's head: `seq` and `hash` of the newest record.
    pub fn head(&self) -> String {
        format!("{}:head", self.tag)
    }

    /// The records, scored by seq: `{seq, prev_hash, hash, body, at_ms}` JSON.
    pub fn log(&self) -> String {
        format!("{}:log", self.tag)
    }

    /// The ids of appended entries, scored by when: an event reported twice is
    /// appended once.
    pub fn ids(&self) -> String {
        format!("{}:ids", self.tag)
    }

    /// A receipt used (ConsumeReceipt): when, in ms since the epoch; it expires once
    /// every receipt of its ask has.
    pub fn consumed(&self, jti: &str) -> String {
        format!("{}:consumed:{}", self.tag, escape(jti, TENANT_RESERVED))
    }

    /// Every tenant with an audit log, for the retention sweep.
    pub fn tenants() -> &'static str {
        "ag:audit-tenants"
    }
}

/// The keys of webhooks and reminders. They share one hash tag, `{hooks}`, so that the
/// scripts that hand out due deliveries and timers run on one slot; the tenant parts
/// are escaped like a tenant's own keys.
pub struct HookKeys;

impl HookKeys {
    const TAG: &'static str = "ag:{hooks}";

    /// A tenant's endpoints: id → endpoint JSON.
    pub fn endpoints(tenant: &str) -> String {
        format!(
            "{}:endpoints:{}",
            Self::TAG,
            escape(tenant, TENANT_RESERVED)
        )
    }

    /// A tenant's people: id → person JSON.
    pub fn people(tenant: &str) -> String {
        format!("{}:people:{}", Self::TAG, escape(tenant, TENANT_RESERVED))
    }

    /// A tenant's policy set: `version` (counting its puts) and `record` (its JSON).
    pub fn policies(tenant: &str) -> String {
        format!("{}:policies:{}", Self::TAG, escape(tenant, TENANT_RESERVED))
    }

    /// A tenant's standing grants: id → grant JSON.
    pub fn grants(tenant: &str) -> String {
        format!("{}:grants:{}", Self::TAG, escape(tenant, TENANT_RESERVED))
    }

    /// The count of a tenant's grant changes.
    pub fn grants_version(tenant: &str) -> String {
        format!(
            "{}:grants-version:{}",
            Self::TAG,
            escape(tenant, TENANT_RESERVED)
        )
    }

    /// A tenant's identities: identity → the id of its person.
    pub fn identities(tenant: &str) -> String {
        format!(
            "{}:identities:{}",
            Self::TAG,
            escape(tenant, TENANT_RESERVED)
        )
    }

    /// A note (see `HookStore::put_note`), expiring with it.
    pub fn note(key: &str) -> String {
        format!("{}:note:{key}", Self::TAG)
    }

    /// Every delivery: id → delivery JSON.
    pub fn deliveries() -> String {
        format!("{}:deliveries", Self::TAG)
    }

    /// Attempts handed out per delivery: id → count (the lease check of an outcome).
    pub fn attempts() -> String {
        format!("{}:attempts", Self::TAG)
    }

    /// Pending deliveries, scored by when they are due (or their lease ends).
    pub fn due() -> String {
        format!("{}:due", Self::TAG)
    }

    /// Whose each delivery is: id → `tenant` TAB `endpoint id`, read by the claim to
    /// share the nodes' delivery slots fairly.
    pub fn owners() -> String {
        format!("{}:owners", Self::TAG)
    }

    /// Pending deliveries per tenant: tenant → count, for the queue cap.
    pub fn queued() -> String {
        format!("{}:queued", Self::TAG)
    }

    /// A tenant's deliveries scored by creation, for listing.
    pub fn log(tenant: &str) -> String {
        format!("{}:log:{}", Self::TAG, escape(tenant, TENANT_RESERVED))
    }

    /// A tenant's finished deliveries scored by when they finished, for trimming.
    pub fn finished(tenant: &str) -> String {
        format!("{}:finished:{}", Self::TAG, escape(tenant, TENANT_RESERVED))
    }

    /// Reminder timers: id → timer JSON.
    pub fn timers() -> String {
        format!("{}:timers", Self::TAG)
    }

    /// Timers scored by when they are due (or their lease ends).
    pub fn timers_due() -> String {
        format!("{}:timers-due", Self::TAG)
    }

    /// Admin changes' audit records not yet in the audit log: id → entry JSON.
    pub fn unaudited() -> String {
        format!("{}:unaudited", Self::TAG)
    }

    /// Those records' ids, scored in the order they were kept.
    pub fn unaudited_order() -> String {
        format!("{}:unaudited-order", Self::TAG)
    }

    /// The counter that orders them.
    pub fn unaudited_seq() -> String {
        format!("{}:unaudited-seq", Self::TAG)
    }
}

/// Asks whose waiting calls are gone (their node died or drained, or a caller left with
/// a reattach grace), scored by when their grace is over: then, unless a live node
/// waits on the ask again, a sweep resolves it ABORTED.
pub const WAITS_KEY: &str = "ag:waits";

/// Every node's lease: node id scored by when it ends unless the node renews it. A node
/// renews only this (and its own wait list's expiry), however many asks it holds;
/// the survivors of a node whose lease ended take over its wait list.
pub const NODES_KEY: &str = "ag:nodes";

/// On one Redis: the sessions whose outbox holds events, scored by when the oldest may
/// be due for a sweep ([`SessionKeys::outbox_index`]).
pub const OUTBOXES_KEY: &str = "ag:outboxes";

/// On a cluster, every slot's outbox index: [`SessionKeys::outbox_index`] of each slot.
pub fn outbox_indexes() -> impl Iterator<Item = String> {
    slot_tags()
        .values()
        .map(|tag| format!("ag:{{{tag}}}:outboxes"))
}

/// For every Redis Cluster slot, a short hash tag that maps to it: the key of a slot's
/// outbox index can then live in the slot of the sessions it indexes. Found once, by
/// trying tags until every slot has one.
fn slot_tags() -> &'static std::collections::HashMap<redis::cluster_routing::Slot, String> {
    use redis::cluster_routing::Slot;
    static TAGS: std::sync::OnceLock<std::collections::HashMap<Slot, String>> =
        std::sync::OnceLock::new();
    TAGS.get_or_init(|| {
        const SLOTS: usize = 16384;
        let mut tags = std::collections::HashMap::with_capacity(SLOTS);
        let mut n = 0u64;
        while tags.len() < SLOTS {
            let tag = format!("o{n:x}");
            tags.entry(Slot::for_key(&tag)).or_insert(tag);
            n += 1;
        }
        tags
    })
}

/// A session in an outbox index: `<tenant>\u{1f}<session>`.
pub fn outbox_member(key: &SessionKey) -> String {
    format!("{}\u{1f}{}", key.tenant, key.session_id)
}

pub fn parse_outbox_member(member: &str) -> Option<SessionKey> {
    let (tenant, session) = member.split_once('\u{1f}')?;
    Some(SessionKey::new(tenant, session))
}

/// The asks a node's calls wait on, for the survivors should it die.
pub fn node_waits_key(node_id: &str) -> String {
    format!("ag:node:{node_id}:waits")
}

pub fn wait_member(key: &SessionKey, rpc_id: &str) -> String {
    format!("{}\u{1f}{}\u{1f}{rpc_id}", key.tenant, key.session_id)
}

pub fn parse_wait_member(member: &str) -> Option<(SessionKey, String)> {
    let mut parts = member.split('\u{1f}');
    let (tenant, session, rpc_id) = (parts.next()?, parts.next()?, parts.next()?);
    Some((SessionKey::new(tenant, session), rpc_id.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> SessionKey {
        SessionKey::new("acme{x}", "team/s-1")
    }

    #[test]
    fn a_slots_outbox_index_lives_in_the_slot_of_its_sessions() {
        use redis::cluster_routing::Slot;
        for (tenant, session) in [("acme", "s"), ("acme{x}", "team/s-1"), ("t", "")] {
            let keys = SessionKeys::new(&SessionKey::new(tenant, session));
            assert_eq!(
                Slot::for_key(keys.outbox_index(true)),
                Slot::for_key(keys.asks()),
                "{tenant}/{session}"
            );
            assert_eq!(keys.outbox_index(false), OUTBOXES_KEY);
        }
        assert_eq!(outbox_indexes().count(), 16384);
        let member = outbox_member(&key());
        assert_eq!(parse_outbox_member(&member), Some(key()));
    }

    #[test]
    fn a_sessions_keys_share_one_hash_tag_and_braces_in_tenants_cannot_break_it() {
        let keys = SessionKeys::new(&key());
        assert_eq!(keys.key("asks"), "ag:{acme%7Bx%7D/team/s-1}:asks");
        assert!(keys.channel().starts_with("ag:{acme%7Bx%7D/team/s-1}:"));
        assert!(keys.request("r").starts_with("ag:{acme%7Bx%7D/team/s-1}:"));
    }

    #[test]
    fn valid_names_keep_their_keys_and_a_slash_in_a_tenant_cannot_join_two_sessions() {
        let keys = |t: &str, s: &str| SessionKeys::new(&SessionKey::new(t, s)).key("asks");
        assert_eq!(keys("acme", "team/s-1"), "ag:{acme/team/s-1}:asks");
        assert_ne!(keys("acme", "x/s"), keys("acme/x", "s"));
        assert_eq!(
            TenantKeys::new("acme").agent("a:asks:x"),
            "ag:tenant:{acme}:agent:a%3Aasks%3Ax"
        );
        assert_ne!(
            TenantKeys::new("acme").agent("a:asks:x"),
            TenantKeys::new("acme").agent_asks("a", "x")
        );
    }

    /// Text made mostly of the characters the encoding reserves, so collisions would
    /// be found if they could happen.
    fn adversarial() -> impl proptest::strategy::Strategy<Value = String> {
        proptest::string::string_regex("[a/{}%:7BD2F]{0,8}").expect("regex")
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// docs/protocol.md "Vocabulary": no two distinct (tenant, session) pairs share a key,
        /// and every key of a session keeps to one hash tag (one cluster slot).
        #[test]
        fn the_session_key_encoding_is_injective(
            a in (adversarial(), adversarial()),
            b in (adversarial(), adversarial()),
        ) {
            let tag = |(t, s): &(String, String)| SessionKeys::new(&SessionKey::new(t.as_str(), s.as_str())).tag;
            proptest::prop_assert_eq!(tag(&a) == tag(&b), a == b);
            let tag_a = tag(&a);
            let open = tag_a.find('{').expect("open");
            let close = tag_a[open..].find('}').expect("close") + open;
            proptest::prop_assert_eq!(close, tag_a.len() - 1, "the hash tag is the whole session part");
        }

        #[test]
        fn tenant_and_agent_keys_are_injective(
            a in (adversarial(), adversarial()),
            b in (adversarial(), adversarial()),
        ) {
            let agent = |(t, id): &(String, String)| TenantKeys::new(t).agent(id);
            proptest::prop_assert_eq!(agent(&a) == agent(&b), a == b);
            proptest::prop_assert_eq!(TenantKeys::new(&a.0).tag == TenantKeys::new(&b.0).tag, a.0 == b.0);
        }
    }
}
