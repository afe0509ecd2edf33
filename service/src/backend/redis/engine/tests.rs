use std::sync::Arc;

use super::*;
use crate::{backend::memory::MemoryConfig, testing::RedisServer};

/// The conformance suite's sizes, on a Redis backend with its own redis-server.
async fn make(config: MemoryConfig) -> (Arc<dyn Backend>, Box<dyn std::any::Any + Send>) {
    let redis = RedisServer::start().await;
    let backend = backend(RedisBackendConfig::new(&redis.url), config).await;
    (backend, Box::new(redis))
}

/// A backend with the conformance suite's sizes.
async fn backend(mut settings: RedisBackendConfig, config: MemoryConfig) -> Arc<dyn Backend> {
    settings.store.history_len = config.history_len;
    settings.store.max_pending_per_session = config.max_pending_per_session;
    settings.store.max_pending_per_tenant = config.max_pending_per_tenant;
    settings.max_subscribers_per_session = config.max_subscribers_per_session;
    settings.max_all_sessions_per_tenant = config.max_all_sessions_per_tenant;
    settings.store.max_agents_per_tenant = config.max_agents_per_tenant;
    settings.store.max_sessions_per_tenant = config.max_sessions_per_tenant;
    settings.reconnect_grace = config.reconnect_grace;
    settings.subscriber_buffer = config.subscriber_buffer;
    settings.tenant_buffer = config.tenant_buffer;
    Arc::new(
        RedisBackend::connect(settings)
            .await
            .expect("redis backend"),
    )
}

crate::backend::conformance::backend_conformance_suite!(make);

/// The same suite on a Redis Cluster of three shards: sessions spread over the
/// shards, sharded pub/sub, the tenant's part after each script.
mod cluster {
    use super::*;
    use crate::testing::RedisCluster;

    async fn make(config: MemoryConfig) -> (Arc<dyn Backend>, Box<dyn std::any::Any + Send>) {
        let cluster = RedisCluster::start(3).await;
        let mut settings = RedisBackendConfig::new(&cluster.url);
        settings.cluster = true;
        (backend(settings, config).await, Box::new(cluster))
    }

    crate::backend::conformance::backend_conformance_suite!(make);
}
