//! Faults between the nodes and Redis: each node reaches one redis-server through a
//! toxiproxy proxy of its own, and while agents ask and humans answer the network
//! slows down, cuts connections in the middle of scripts, partitions a node away, or
//! Redis stops answering for a while. After each, every node serves again, and no
//! acknowledged answer is lost, doubled or changed.

use std::time::{Duration, Instant};

use askgate_testing::{RedisServer, Toxiproxy};

use super::{
    ANSWERS, full,
    load::{self, Load, Report},
    serving_again,
};
use crate::support::ServeProcess;

/// Two nodes on one Redis, node `i` through the proxy `node-i`.
struct Rig {
    proxy: Toxiproxy,
    redis: RedisServer,
    nodes: Vec<ServeProcess>,
    receiver: crate::webhooks::Receiver,
    load: Load,
}

impl Rig {
    async fn start() -> Self {
        let proxy = Toxiproxy::start().await;
        let redis = RedisServer::start_debuggable().await;
        let upstream = redis
            .url
            .trim_start_matches("redis://")
            .trim_end_matches('/');
        let mut nodes = Vec::new();
        for i in 0..2 {
            let port = proxy.proxy(&format!("node-{i}"), upstream).await;
            let url = format!("redis://127.0.0.1:{port}/");
            let flags = ["--redis-lease", "3s", "--webhook-allow-private"];
            nodes.extend(ServeProcess::redis_nodes(&url, false, 1, &flags).await);
        }
        let receiver = load::webhook(&nodes[0].url).await;
        let urls: Vec<String> = nodes.iter().map(|n| n.url.clone()).collect();
        let load = Load::start(&urls);
        load.flowing("answers before the fault", 0, ANSWERS).await;
        Self {
            proxy,
            redis,
            nodes,
            receiver,
            load,
        }
    }

    /// After the fault ended at `healed`: every node serves, answers flow again, and
    /// nothing acknowledged was lost.
    async fn after(self, fault: &str, healed: Instant) -> Report {
        let serving = serving_again(&self.nodes, healed).await;
        let before = self.load.answered();
        self.load
            .flowing("answers after the fault", before, ANSWERS)
            .await;
        let ledger = self.load.stop().await;
        let client = self.nodes[0].client().await;
        let report = load::check(&client, &ledger, &self.receiver).await;
        eprintln!("{fault}: every node serving {serving:?} after it ended; {report:?}");
        drop(self.redis);
        report
    }

    fn names() -> [&'static str; 2] {
        ["node-0", "node-1"]
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn latency_between_the_nodes_and_redis_loses_nothing() {
    let rig = Rig::start().await;
    for name in Rig::names() {
        rig.proxy
            .latency(name, Duration::from_millis(200), Duration::from_millis(50))
            .await;
    }
    let before = rig.load.answered();
    rig.load
        .flowing("answers through 200 ms of latency", before, ANSWERS / 4)
        .await;
    for name in Rig::names() {
        rig.proxy.clear(name).await;
    }
    let report = rig.after("latency 200 ms ± 50 ms", Instant::now()).await;
    assert!(report.is_clean(), "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn connections_cut_in_the_middle_of_scripts_lose_nothing() {
    let rig = Rig::start().await;
    let rounds = if full() { 10 } else { 3 };
    for _ in 0..rounds {
        // Every connection is reset as its next reply comes back: scripts that ran,
        // whose callers never heard.
        for name in Rig::names() {
            rig.proxy.reset_peer(name).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        for name in Rig::names() {
            rig.proxy.clear(name).await;
        }
        let before = rig.load.answered();
        rig.load
            .flowing("answers between cuts", before, ANSWERS / 4)
            .await;
    }
    let report = rig.after("connections cut", Instant::now()).await;
    assert!(report.is_clean(), "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_partitioned_from_redis_loses_nothing() {
    let rig = Rig::start().await;
    let partition = if full() {
        Duration::from_secs(10)
    } else {
        Duration::from_secs(4)
    };
    rig.proxy.set_enabled("node-0", false).await;
    // The other node serves on meanwhile.
    let before = rig.load.answered();
    rig.load
        .flowing("answers on the other node", before, ANSWERS / 4)
        .await;
    tokio::time::sleep(partition).await;
    rig.proxy.set_enabled("node-0", true).await;
    let report = rig
        .after(
            &format!("one node partitioned {partition:?}"),
            Instant::now(),
        )
        .await;
    assert!(report.is_clean(), "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_paused_loses_nothing() {
    let rig = Rig::start().await;
    let pause = if full() { 5 } else { 2 };
    let client = redis::Client::open(rig.redis.url.as_str()).expect("redis url");
    let config = redis::AsyncConnectionConfig::new()
        .set_response_timeout(Some(Duration::from_secs(pause + 10)));
    let mut conn = client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .expect("connect");
    let started = Instant::now();
    let _: () = redis::cmd("DEBUG")
        .arg("SLEEP")
        .arg(pause)
        .query_async(&mut conn)
        .await
        .expect("DEBUG SLEEP (enable-debug-command)");
    let slept = started.elapsed();
    let report = rig
        .after(&format!("redis paused {slept:?}"), Instant::now())
        .await;
    assert!(report.is_clean(), "{report:?}");
}
