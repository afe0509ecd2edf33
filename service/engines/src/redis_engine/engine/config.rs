//! Where the Redis engine's Redis is, how long a node's leases last and how durable an
//! acknowledged write must be.

use std::time::Duration;

use crate::redis_engine::{RedisTarget, WaitPolicy};

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
    /// `url` lists Redis Sentinels, which watch the primary of this name.
    pub sentinel_master: Option<String>,
    /// For `rediss://`: a CA certificate (PEM) to trust besides the system's roots.
    pub ca_pem: Option<Vec<u8>>,
    /// How long this node's leases (presence, waiting asks, agents) last without a
    /// renewal: a dead node's asks are aborted this long (plus their reattach grace)
    /// after it died.
    pub lease: Duration,
    /// What an acknowledging write waits for (replicas, fsync) before its reply.
    pub wait: WaitPolicy,
}

impl std::fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConfig")
            .field("url", &crate::redis_engine::redacted_url(&self.url))
            .field("cluster", &self.cluster)
            .field("sentinel_master", &self.sentinel_master)
            .field("lease", &self.lease)
            .field("wait", &self.wait)
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
            sentinel_master: None,
            ca_pem: None,
            lease: Self::DEFAULT_LEASE,
            wait: WaitPolicy::default(),
        }
    }

    /// Where Redis is, with replies awaited long enough for the policy's `WAIT`s.
    pub fn target(&self) -> RedisTarget {
        RedisTarget {
            url: self.url.clone(),
            cluster: self.cluster,
            sentinel_master: self.sentinel_master.clone(),
            ca_pem: self.ca_pem.clone(),
            response_timeout: self.wait.response_timeout(),
        }
    }
}
