//! A Redis Cluster's own failover under load: three shards, each a primary with two
//! replicas, two askgate nodes with `--redis-cluster`; a shard's replicas are cut off
//! from their primary for [`CUT_OFF`], the primary is killed (kill -9) and the cluster
//! promotes one of its replicas. The nodes must follow it (serve again) and, with
//! `--redis-wait-replicas 1`, lose no acknowledged answer; without, what the promoted
//! replica never received is lost, and printed.

use std::time::{Duration, Instant};

use askgate_testing::RedisCluster;

use super::{ANSWERS, CUT_OFF, load, serving_again};
use crate::support::ServeProcess;

/// The cluster's `cluster-node-timeout`: how long a primary is unreachable before its
/// replicas promote one of theirs.
const NODE_TIMEOUT: Duration = Duration::from_secs(1);

/// Replicas per shard: one is promoted, the other follows it, so that writes waiting
/// for a replica go on after the failover.
const REPLICAS: usize = 2;

/// The load's first session: the shard whose primary dies holds it (and, of the
/// others, whichever share its slots' shard).
const SESSION_KEY: &str = "{default/chaos-0}";

/// Kills the primary of one shard under load, its replicas cut off for [`CUT_OFF`]
/// before; returns what was lost.
async fn shard_primary_killed_under_load(extra: &[&str]) -> load::Report {
    let mut cluster = RedisCluster::start_replicated(3, REPLICAS, NODE_TIMEOUT).await;
    let mut flags = vec!["--redis-lease", "3s", "--webhook-allow-private"];
    flags.extend(extra);
    let nodes = ServeProcess::redis_nodes(&cluster.url, true, 2, &flags).await;
    let receiver = load::webhook(&nodes[0].url).await;
    let urls: Vec<String> = nodes.iter().map(|n| n.url.clone()).collect();
    let load = load::Load::start(&urls);
    load.flowing("answers before the failover", 0, ANSWERS)
        .await;

    let promoted = cluster
        .cut_off_and_kill_primary_of(SESSION_KEY, CUT_OFF)
        .await;
    let killed = Instant::now() - promoted;
    let serving = serving_again(&nodes, killed).await;
    let before = load.answered();
    load.flowing("answers after the failover", before, ANSWERS)
        .await;
    let ledger = load.stop().await;
    let client = nodes[0].client().await;
    let report = load::check(&client, &ledger, &receiver).await;
    eprintln!(
        "cluster shard primary killed ({extra:?}): promoted after {promoted:?}, every node \
         serving after {serving:?} (both from the kill); {report:?}"
    );
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_a_cluster_with_wait_replicas_a_shards_failover_loses_no_acknowledged_answer() {
    let rounds = if super::full() { 5 } else { 1 };
    for _ in 0..rounds {
        let report = shard_primary_killed_under_load(&["--redis-wait-replicas", "1"]).await;
        assert!(report.is_clean(), "{report:?}");
    }
}

/// The same run without `--redis-wait-replicas`: the nodes follow the failover too,
/// but the answers acknowledged while the replicas were cut off die with the primary.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_a_cluster_without_wait_replicas_a_shards_failover_loses_acknowledged_answers() {
    let report = shard_primary_killed_under_load(&[]).await;
    assert!(
        report.lost + report.twice > 0,
        "an asynchronous failover lost nothing this time: {report:?}"
    );
}
