use std::sync::Arc;

use askgate_core::backend::hooks::conformance::{LIMITS, Made};
use askgate_testing::{RedisCluster, RedisServer};

use super::*;
use crate::redis_engine::connection::RedisTarget;

/// A store on one redis-server.
async fn on_a_server() -> Made {
    let server = RedisServer::start().await;
    let conn = RedisTarget::from(&server.url)
        .connect(None)
        .await
        .expect("connect to redis");
    let store = RedisHookStore::new(conn.clone(), LIMITS, Acked::plain(conn));
    (Arc::new(store), Box::new(server))
}

/// A store on a Redis Cluster of three shards.
async fn on_a_cluster() -> Made {
    let cluster = RedisCluster::start(3).await;
    let target = RedisTarget {
        cluster: true,
        ..RedisTarget::from(&cluster.url)
    };
    let conn = target.connect(None).await.expect("connect to the cluster");
    let store = RedisHookStore::new(conn.clone(), LIMITS, Acked::plain(conn));
    (Arc::new(store), Box::new(cluster))
}

/// A store through Sentinels, every acknowledging write waiting for the replica.
async fn through_sentinels() -> Made {
    let failover = askgate_testing::RedisFailover::start(1).await;
    let target = RedisTarget {
        sentinel_master: Some(askgate_testing::SENTINEL_MASTER.into()),
        ..RedisTarget::from(&failover.url)
    };
    let conn = target
        .connect(None)
        .await
        .expect("connect through Sentinels");
    let wait = crate::redis_engine::WaitPolicy {
        replicas: 1,
        ..Default::default()
    };
    let acked = Acked::connect(conn.clone(), &target, wait)
        .await
        .expect("a connection for acknowledged writes");
    (
        Arc::new(RedisHookStore::new(conn, LIMITS, acked)),
        Box::new(failover),
    )
}

mod server {
    askgate_core::hook_store_conformance_suite!(make);
    use super::on_a_server as make;
}

mod cluster {
    askgate_core::hook_store_conformance_suite!(make);
    use super::on_a_cluster as make;
}

mod sentinels {
    askgate_core::hook_store_conformance_suite!(make);
    use super::through_sentinels as make;
}
