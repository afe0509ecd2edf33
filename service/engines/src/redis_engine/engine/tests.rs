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

/// A Redis Cluster's own failover, followed: a shard's primary killed -9, one of its
/// replicas promoted by the cluster, and the node serves that shard again (healthy,
/// new asks taken, the answer its replica acknowledged before the kill still there).
mod cluster_failover {
    use std::time::{Duration, Instant};

    use askgate_core::domain::{NewAsk, Outcome, SessionKey};
    use askgate_proto::v1::{Question, QuestionAnswer, Unattended};
    use askgate_testing::RedisCluster;

    use super::*;
    use crate::redis_engine::{WaitPolicy, keys::SessionKeys};

    fn ask(key: &SessionKey, request_id: &str) -> NewAsk {
        let mut ask = NewAsk::new(
            key.clone(),
            vec![Question {
                id: "q".into(),
                question: "ok?".into(),
                ..Default::default()
            }],
        );
        ask.if_unattended = Unattended::Hold;
        ask.request_id = request_id.into();
        ask
    }

    fn answered() -> Outcome {
        let answer = QuestionAnswer {
            id: "q".into(),
            selected: vec!["yes".into()],
            ..Default::default()
        };
        Outcome::answered(vec![answer], "ana")
    }

    /// Registers a new ask and answers it, or says why not.
    async fn round_trip(backend: &Arc<dyn Backend>, key: &SessionKey) -> Result<(), String> {
        let registered = backend
            .register(ask(key, ""))
            .await
            .map_err(|e| format!("register: {e}"))?;
        backend
            .claim(key, &registered.rpc_id, answered())
            .await
            .map_err(|e| format!("claim: {e}"))?;
        registered
            .outcome
            .await
            .map(|_| ())
            .map_err(|_| "no outcome".to_owned())
    }

    /// With `wait`, each shard has one replica more than the writes wait for: one is
    /// promoted, and the new primary still has the replicas they need. The lease is
    /// short, so that the node renews while the shard fails over (before, that left the
    /// node's cluster connection timing out on every call).
    async fn follows_a_failover(wait: WaitPolicy) {
        let replicas = wait.replicas as usize + 1;
        let mut cluster = RedisCluster::start_replicated(3, replicas, Duration::from_secs(1)).await;
        let redis = RedisConfig {
            cluster: true,
            wait,
            lease: Duration::from_secs(3),
            ..RedisConfig::new(&cluster.url)
        };
        let backend = backend(redis, StateConfig::default()).await;
        let key = SessionKey::new("tenant", "s");
        let first = backend.register(ask(&key, "r")).await.expect("register");
        backend
            .claim(&key, &first.rpc_id, answered())
            .await
            .expect("claim");
        first.outcome.await.expect("outcome");

        // Load on every shard while the primary dies and its replica is promoted.
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let load = tokio::spawn({
            let (backend, stop) = (backend.clone(), stop.clone());
            async move {
                let mut i = 0usize;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let key = SessionKey::new("tenant", format!("load-{}", i % 16).as_str());
                    let _ =
                        tokio::time::timeout(Duration::from_secs(10), round_trip(&backend, &key))
                            .await;
                    i += 1;
                }
            }
        });
        let promoted_in = cluster
            .kill_primary_of(&SessionKeys::new(&key).asks())
            .await;
        let promoted = Instant::now();
        let deadline = promoted + Duration::from_secs(30);
        loop {
            let healthy = backend.healthy().await;
            let last = match round_trip(&backend, &key).await {
                Ok(()) if healthy => break,
                Ok(()) => "unhealthy".to_owned(),
                Err(why) => why,
            };
            assert!(
                Instant::now() < deadline,
                "not serving the shard 30 s after its replica's promotion: {last}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        eprintln!(
            "promoted {promoted_in:?} after the kill; serving {:?} after the promotion",
            promoted.elapsed()
        );
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        load.await.expect("the load");
        if wait.replicas > 0 {
            // Each of the node's connections follows the failover on its own: one may
            // still be taking over (BACKEND_UNAVAILABLE, retried as a client would).
            let deadline = Instant::now() + Duration::from_secs(10);
            let again = loop {
                match backend.register(ask(&key, "r")).await {
                    Err(Error::BackendUnavailable(why)) if Instant::now() < deadline => {
                        eprintln!("the retry is told to retry: {why}");
                        // As the server's health task does: a probe shows the node's
                        // pub/sub delivering again.
                        backend.healthy().await;
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    registered => break registered.expect("the retry's recorded outcome"),
                }
            };
            assert_eq!(again.rpc_id, first.rpc_id);
            assert_eq!(again.outcome.await.expect("outcome").as_ref(), &answered());
        }
    }

    #[tokio::test]
    async fn with_replica_waits() {
        follows_a_failover(WaitPolicy {
            replicas: 1,
            ..WaitPolicy::default()
        })
        .await;
    }

    #[tokio::test]
    async fn without_replica_waits() {
        follows_a_failover(WaitPolicy::default()).await;
    }
}
