//! What both engines are sized and limited by, set once.

use std::time::Duration;

/// The sizes, limits and windows of askgate's state, which both engines take (the
/// memory engine also its number of locks). The defaults are the flags' defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateConfig {
    /// The memory engine's independent locks; sessions hash onto them.
    pub shards: usize,
    /// Events each session keeps for cursor resume.
    pub history_len: usize,
    /// Bytes (encoded events) each session's history keeps at most: past them the
    /// oldest events drop (the newest always stays).
    pub history_bytes: u64,
    /// Events a session subscriber may fall behind before it gets `reset`.
    pub subscriber_buffer: usize,
    /// Events an `all_sessions` subscriber may fall behind before it gets `reset`.
    pub tenant_buffer: usize,
    /// Pending asks one session may hold.
    pub max_pending_per_session: usize,
    /// Pending asks one tenant may hold over all its sessions.
    pub max_pending_per_tenant: usize,
    /// Bytes the pending asks of one session may hold (their encoded `requested`).
    pub max_pending_bytes_per_session: u64,
    /// Bytes the pending asks of one tenant may hold, over every node.
    pub max_pending_bytes_per_tenant: u64,
    /// Open subscriptions one session may have.
    pub max_subscribers_per_session: usize,
    /// Open `all_sessions` subscriptions one tenant may have.
    pub max_all_sessions_per_tenant: usize,
    /// Agents one tenant may have attached at once.
    pub max_agents_per_tenant: usize,
    /// Sessions one tenant may hold state in at once (pending asks, subscribers, or a
    /// history kept for resume).
    pub max_sessions_per_tenant: usize,
    /// Subscribe streams one tenant may have open at once, over every node.
    pub max_streams_per_tenant: usize,
    /// MCP sessions one tenant may have open on `/mcp` at once, over every node.
    pub max_mcp_sessions_per_tenant: usize,
    /// How long a session counts as attended after its last subscriber left, and how
    /// long an unused session (and its history, for resume) is kept.
    pub reconnect_grace: Duration,
    /// How long the outcome of an ask with a request_id is kept for a retry.
    pub request_retention: Duration,
    /// Bytes a tenant's audit records may hold: past them its oldest records go (the
    /// chain goes on from the newest, which always stays).
    pub max_audit_bytes_per_tenant: u64,
}

impl Default for StateConfig {
    fn default() -> Self {
        Self {
            shards: 64,
            history_len: 1000,
            history_bytes: 8 * 1024 * 1024,
            subscriber_buffer: 1024,
            tenant_buffer: 16 * 1024,
            max_pending_per_session: 1024,
            max_pending_per_tenant: 10_000,
            max_pending_bytes_per_session: 64 * 1024 * 1024,
            max_pending_bytes_per_tenant: 256 * 1024 * 1024,
            max_subscribers_per_session: 64,
            max_all_sessions_per_tenant: 64,
            max_agents_per_tenant: 10_000,
            max_sessions_per_tenant: 10_000,
            max_streams_per_tenant: 10_000,
            max_mcp_sessions_per_tenant: 256,
            reconnect_grace: Duration::from_secs(5),
            request_retention: Duration::from_secs(600),
            max_audit_bytes_per_tenant: 1024 * 1024 * 1024,
        }
    }
}
