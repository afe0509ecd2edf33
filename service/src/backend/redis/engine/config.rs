//! The Redis engine's settings.

use super::*;

/// Settings of the Redis backend. Its `Debug` shows the URL without its password.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisBackendConfig {
    pub url: String,
    /// `url` lists Redis Cluster nodes (comma-separated).
    pub cluster: bool,
    /// For `rediss://`: a CA certificate (PEM) to trust besides the system's roots.
    pub ca_pem: Option<Vec<u8>>,
    pub store: RedisConfig,
    /// How long a session counts as attended after this node's last subscriber left.
    pub reconnect_grace: Duration,
    /// Events a subscriber may fall behind before it gets `reset`.
    pub subscriber_buffer: usize,
    /// The same for an `all_sessions` subscriber.
    pub tenant_buffer: usize,
    /// How long presence, waiter and agent leases last without a refresh.
    pub lease: Duration,
    /// Subscribers one session may have, over all nodes.
    pub max_subscribers_per_session: usize,
    /// `all_sessions` subscribers one tenant may have, over all nodes.
    pub max_all_sessions_per_tenant: usize,
}

impl std::fmt::Debug for RedisBackendConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBackendConfig")
            .field("url", &crate::backend::redis::redacted_url(&self.url))
            .field("cluster", &self.cluster)
            .field("lease", &self.lease)
            .finish_non_exhaustive()
    }
}

impl RedisBackendConfig {
    pub fn new(url: &str) -> Self {
        Self {
            url: url.to_owned(),
            cluster: false,
            ca_pem: None,
            store: RedisConfig::default(),
            reconnect_grace: Duration::from_secs(5),
            subscriber_buffer: 1024,
            tenant_buffer: 16 * 1024,
            lease: Duration::from_secs(10),
            max_subscribers_per_session: 64,
            max_all_sessions_per_tenant: 64,
        }
    }
}
