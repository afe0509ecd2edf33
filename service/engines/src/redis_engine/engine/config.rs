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
    /// The sizes, limits and windows both engines take; on Redis every limit counts
    /// over all nodes.
    pub settings: Settings,
    /// How long presence, waiter and agent leases last without a refresh.
    pub lease: Duration,
}

impl std::fmt::Debug for RedisBackendConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBackendConfig")
            .field("url", &crate::redis_engine::redacted_url(&self.url))
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
            settings: Settings::default(),
            lease: Duration::from_secs(10),
        }
    }
}
