//! The store's Lua scripts (the `.lua` files of `redis/scripts/`). Each runs on one
//! slot: a session's keys, or on a cluster the tenant's.

use redis::Script;

/// Registration: the pending limits, the request_id join, store the ask, append its
/// `requested`, publish it.
pub(super) const REGISTER: &str = concat!(
    include_str!("../scripts/history.lua"),
    include_str!("../scripts/outcomes.lua"),
    include_str!("../scripts/register.lua")
);

/// A claim: the first wins; record the outcome, append its `resolved`, publish it.
pub(super) const CLAIM: &str = concat!(
    include_str!("../scripts/history.lua"),
    include_str!("../scripts/outcomes.lua"),
    include_str!("../scripts/claim.lua")
);

/// A Redis Cluster's tenant part of a registration, after REGISTER (the tenant's keys
/// and channel share the tenant's hash tag, so this is one slot). The sessions index is
/// a sorted set scored by the session shard's clock at the last registration, so that
/// TENANT_CLAIMED never drops a session that a later registration filled again.
pub(super) const TENANT_REGISTERED: &str = include_str!("../scripts/tenant_registered.lua");

/// Attaches an agent: one script, so that the holder check, the tenant's agent cap and
/// the replacement are one step (the agent's keys share the tenant's hash tag).
pub(super) const ATTACH_AGENT: &str = include_str!("../scripts/attach_agent.lua");

/// Admits a session to its tenant's sessions holding state (ARGV[2] is already among
/// them, or there is room), marking it held until ARGV[3]. On a cluster the
/// registration runs it first, with the pending count (ADMIT_ASK); a subscription
/// runs it for its session.
pub(super) const ADMIT_SESSION: &str = include_str!("../scripts/admit_session.lua");

/// On a cluster, before REGISTER: the tenant's pending count and session cap (its
/// keys live in the tenant's slot). Concurrent registrations may overshoot the
/// pending count by their number; the count itself is taken after (TENANT_REGISTERED).
pub(super) const ADMIT_ASK: &str = concat!(
    include_str!("../scripts/outcomes.lua"),
    include_str!("../scripts/admit_ask.lua")
);

/// A recorded outcome counted on (or taken off) its tenant's byte budget by the node:
/// on a cluster after CLAIM, and around ABORT_REQUEST.
pub(super) static TENANT_OUTCOME: std::sync::LazyLock<Script> = std::sync::LazyLock::new(|| {
    Script::new(concat!(
        include_str!("../scripts/outcomes.lua"),
        include_str!("../scripts/tenant_outcome.lua")
    ))
});

/// The tenant part of a claim on a Redis Cluster, after CLAIM.
pub(super) const TENANT_CLAIMED: &str = include_str!("../scripts/tenant_claimed.lua");

/// A session's pending asks with its epoch and head, read at one instant (a script:
/// unlike MULTI, a script that meets a resharding is redirected like any command).
pub(super) static READ_SNAPSHOT: std::sync::LazyLock<Script> =
    std::sync::LazyLock::new(|| Script::new(include_str!("../scripts/read_snapshot.lua")));

/// A session's history with its epoch and head, read at one instant.
pub(super) static READ_HISTORY: std::sync::LazyLock<Script> =
    std::sync::LazyLock::new(|| Script::new(include_str!("../scripts/read_history.lua")));

/// Takes one of a session's subscriber slots (or of a tenant's `all_sessions` streams),
/// or finds them all taken.
pub(super) static TAKE_SLOT: std::sync::LazyLock<Script> =
    std::sync::LazyLock::new(|| Script::new(include_str!("../scripts/take_slot.lua")));

/// An Abort by request_id: finds its pending ask, or records the abort as the outcome
/// of an ask not registered yet.
pub(super) static ABORT_REQUEST: std::sync::LazyLock<Script> =
    std::sync::LazyLock::new(|| Script::new(include_str!("../scripts/abort_request.lua")));

/// An outcome about to reach an agent, confirmed durable: how the ask ended and whether
/// it is pending, read behind a write the store's `WAIT` covers (`store/wait.rs`).
pub(super) static CONFIRM: std::sync::LazyLock<Script> =
    std::sync::LazyLock::new(|| Script::new(include_str!("../scripts/confirm.lua")));

/// A notice (reminder, escalation) about a pending ask: append it, publish it.
pub(super) static NOTICE: std::sync::LazyLock<Script> = std::sync::LazyLock::new(|| {
    Script::new(concat!(
        include_str!("../scripts/history.lua"),
        include_str!("../scripts/notice.lua")
    ))
});

/// The audit log's scripts (`store/audit.rs`), each on a tenant's `{audit/…}` slot.
pub(super) mod audit_scripts {
    use std::sync::LazyLock;

    use redis::Script;

    /// Records chained to the head the node saw last, unless it moved or one of them
    /// is in the log already.
    pub static APPEND: LazyLock<Script> =
        LazyLock::new(|| Script::new(include_str!("../scripts/audit_append.lua")));
    /// The oldest records past retention, and the ids past a day.
    pub static PRUNE: LazyLock<Script> =
        LazyLock::new(|| Script::new(include_str!("../scripts/audit_prune.lua")));
}

/// The webhook store's scripts (`store/hooks.rs`), each on the `{hooks}` slot.
pub(super) mod hook_scripts {
    use std::sync::LazyLock;

    use redis::Script;

    /// An endpoint, under the tenant's endpoint cap, with its audit record.
    pub static CREATE_ENDPOINT: LazyLock<Script> =
        LazyLock::new(|| Script::new(include_str!("../scripts/hook_create_endpoint.lua")));
    /// Admin changes' audit records forgotten once in the log.
    pub static AUDITED: LazyLock<Script> =
        LazyLock::new(|| Script::new(include_str!("../scripts/hook_audited.lua")));
    /// An endpoint removed, with its audit record.
    pub static DELETE_ENDPOINT: LazyLock<Script> =
        LazyLock::new(|| Script::new(include_str!("../scripts/hook_delete_endpoint.lua")));
    /// A person added or replaced, unless an identity of theirs is another's.
    pub static PUT_PERSON: LazyLock<Script> =
        LazyLock::new(|| Script::new(include_str!("../scripts/hook_put_person.lua")));
    /// A tenant's policy set replaced, its version counted on.
    pub static PUT_POLICIES: LazyLock<Script> =
        LazyLock::new(|| Script::new(include_str!("../scripts/hook_put_policies.lua")));
    /// A standing grant added, expired ones dropped, its version counted on.
    pub static PUT_GRANT: LazyLock<Script> =
        LazyLock::new(|| Script::new(include_str!("../scripts/hook_put_grant.lua")));
    /// A standing grant ended.
    pub static REVOKE_GRANT: LazyLock<Script> =
        LazyLock::new(|| Script::new(include_str!("../scripts/hook_revoke_grant.lua")));
    /// A person removed with their identities.
    pub static DELETE_PERSON: LazyLock<Script> =
        LazyLock::new(|| Script::new(include_str!("../scripts/hook_delete_person.lua")));
    /// New deliveries, as many as the tenant's queue has room for.
    pub static ENQUEUE: LazyLock<Script> =
        LazyLock::new(|| Script::new(include_str!("../scripts/hook_enqueue.lua")));
    /// Due deliveries handed out with a lease, their attempts bumped.
    pub static CLAIM: LazyLock<Script> =
        LazyLock::new(|| Script::new(include_str!("../scripts/hook_claim.lua")));
    /// An attempt's outcome, unless its lease moved on; finished ones trimmed.
    pub static FINISH: LazyLock<Script> =
        LazyLock::new(|| Script::new(include_str!("../scripts/hook_finish.lua")));
    /// A delivery pending again, due now.
    pub static REDELIVER: LazyLock<Script> =
        LazyLock::new(|| Script::new(include_str!("../scripts/hook_redeliver.lua")));
    /// Due reminder timers handed out with a lease.
    pub static CLAIM_TIMERS: LazyLock<Script> =
        LazyLock::new(|| Script::new(include_str!("../scripts/hook_claim_timers.lua")));
    /// A timer scheduled, advanced or cancelled.
    pub static TIMER: LazyLock<Script> =
        LazyLock::new(|| Script::new(include_str!("../scripts/hook_timer.lua")));
}
