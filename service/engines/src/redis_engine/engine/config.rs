//! Where the Redis engine's Redis is and how long a node's leases last.

use std::time::Duration;

/// Where the Redis backend keeps its state, and how long a node's leases last. Its
/// `Debug` shows the URL without its password. The sizes and windows of the state
/// ([`StateConfig`](askgate_core::backend::StateConfig)) are the same on both engines
/// and given apart.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisConfig {
    /// `redis://` or `rediss://`; with `cluster`, some of the cluster's nodes,
    /// comma-separated.
    pub url: String,
    /// `url` lists Redis Cluster nodes.
    pub cluster: bool,
    /// For `rediss://`: a CA certificate (PEM) to trust besides the system's roots.
    pub ca_pem: Option<Vec<u8>>,
    /// How long this node's leases (presence, waiting asks, agents) last without a
    /// renewal: a dead node's asks are aborted this long (plus their reattach grace)
    /// after it died.
    pub lease: Duration,
}

impl std::fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConfig")
            .field("url", &crate::redis_engine::redacted_url(&self.url))
            .field("cluster", &self.cluster)
            .field("lease", &self.lease)
            .finish_non_exhaustive()
    }
}

impl RedisConfig {
    /// The lease of a node unless told otherwise (`--redis-lease`).
    pub const DEFAULT_LEASE: Duration = Duration::from_secs(10);

    /// One Redis server at `url`, with the default lease.
    pub fn new(url: &str) -> Self {
        Self {
            url: url.to_owned(),
            cluster: false,
            ca_pem: None,
            lease: Self::DEFAULT_LEASE,
        }
    }
}
