use std::sync::Arc;

use askgate_core::backend::StateConfig;
use askgate_testing::RedisServer;

use super::*;

/// The conformance suite's sizes, on a Redis backend with its own redis-server.
async fn make(config: StateConfig) -> (Arc<dyn Backend>, Box<dyn std::any::Any + Send>) {
    let redis = RedisServer::start().await;
    let backend = backend(RedisConfig::new(&redis.url), config).await;
    (backend, Box::new(redis))
}

/// A backend on `redis` with the conformance suite's sizes.
async fn backend(redis: RedisConfig, settings: StateConfig) -> Arc<dyn Backend> {
    Arc::new(
        RedisBackend::connect(redis, settings)
            .await
            .expect("redis backend"),
    )
}

askgate_core::backend_conformance_suite!(make);

/// The same suite on a Redis Cluster of three shards: sessions spread over the
/// shards, sharded pub/sub, the tenant's part after each script.
mod cluster {
    use super::*;
    use askgate_testing::RedisCluster;

    async fn make(config: StateConfig) -> (Arc<dyn Backend>, Box<dyn std::any::Any + Send>) {
        let cluster = RedisCluster::start(3).await;
        let redis = RedisConfig {
            cluster: true,
            ..RedisConfig::new(&cluster.url)
        };
        (backend(redis, config).await, Box::new(cluster))
    }

    askgate_core::backend_conformance_suite!(make);
}

/// The same suite through Sentinels, on a primary with a replica, every acknowledging
/// write waiting for the replica and every outcome confirmed durable before its agent
/// gets it (`--redis-wait-replicas 1`).
mod waiting {
    use super::*;
    use crate::redis_engine::WaitPolicy;
    use askgate_testing::{RedisFailover, SENTINEL_MASTER};

    async fn make(config: StateConfig) -> (Arc<dyn Backend>, Box<dyn std::any::Any + Send>) {
        let redis = RedisFailover::start(1).await;
        let settings = RedisConfig {
            sentinel_master: Some(SENTINEL_MASTER.into()),
            wait: WaitPolicy {
                replicas: 1,
                ..WaitPolicy::default()
            },
            ..RedisConfig::new(&redis.url)
        };
        (backend(settings, config).await, Box::new(redis))
    }

    askgate_core::backend_conformance_suite!(make);
}
