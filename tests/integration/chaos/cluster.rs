//! A Redis Cluster under load: three shards, each a primary with two replicas, two
//! askgate nodes with `--redis-cluster`. A shard's own failover: its replicas cut off
//! from their primary, the primary killed (kill -9), one replica promoted; the nodes
//! must follow it and, with `--redis-wait-replicas 1`, lose no acknowledged answer
//! (without, what the promoted replica never received is lost, and printed). And the
//! nodes cut from one shard by toxiproxy for a while: they serve again once it heals,
//! losing nothing.

use std::time::{Duration, Instant};

use askgate_testing::{RedisCluster, Toxiproxy};

use super::{ANSWERS, CUT_OFF, load, serving_again};
use crate::support::ServeProcess;

/// The cluster's `cluster-node-timeout`: how long a primary is unreachable before its
/// replicas promote one of theirs.
const NODE_TIMEOUT: Duration = Duration::from_secs(1);

/// Replicas per shard: one is promoted, the other follows it, so that writes waiting
/// for a replica go on after the failover.
const REPLICAS: usize = 2;

/// The session of the load's first agent; the fault hits the shard holding it.
const SESSION: &str = "chaos-0";
const SESSION_KEY: &str = "{default/chaos-0}";

/// How long the nodes are cut from a shard (less than the lease: a longer cut would
/// let the nodes' leases lapse, and their asks be aborted as a dead node's).
const SHARD_CUT: Duration = Duration::from_secs(3);

async fn cluster_and_nodes(extra: &[&str]) -> (RedisCluster, Vec<ServeProcess>) {
    let cluster = RedisCluster::start_replicated(3, REPLICAS, NODE_TIMEOUT).await;
    let nodes = nodes(&cluster, extra).await;
    (cluster, nodes)
}

async fn nodes(cluster: &RedisCluster, extra: &[&str]) -> Vec<ServeProcess> {
    // A delivery whose attempt failed while a shard was cut is tried again within a
    // second, not after the default backoff (5 s, then 10 s, ...): the check waits for
    // every delivery a bounded time, and one that is only late must not read as lost.
    let mut flags = vec![
        "--webhook-allow-private",
        "--webhook-retry-initial",
        "200ms",
        "--webhook-retry-max",
        "1s",
    ];
    flags.extend(extra);
    ServeProcess::redis_nodes(&cluster.url, true, 2, &flags).await
}

/// Kills the primary of [`SESSION`]'s shard under load, its replicas cut off for
/// [`CUT_OFF`] before (and, when `acknowledged_meanwhile`, until the primary alone
/// acknowledged answers in that session); returns what was lost.
async fn shard_primary_killed_under_load(
    extra: &[&str],
    acknowledged_meanwhile: bool,
) -> load::Report {
    let mut flags = vec!["--redis-lease", "3s"];
    flags.extend(extra);
    let (mut cluster, nodes) = cluster_and_nodes(&flags).await;
    let receiver = load::webhook(&nodes[0].url).await;
    let urls: Vec<String> = nodes.iter().map(|n| n.url.clone()).collect();
    let load = load::Load::start(&urls);
    load.flowing("answers before the failover", 0, ANSWERS)
        .await;

    let cut = cluster.cut_off_replicas_of(SESSION_KEY, true).await;
    let before = load.answered_in(SESSION);
    tokio::time::sleep(CUT_OFF).await;
    if acknowledged_meanwhile {
        load.flowing_in(
            "answers the cut-off primary alone holds",
            SESSION,
            before,
            2,
        )
        .await;
    }
    let promoted = cluster.kill_cut_off(cut).await;
    let (serving, report) = super::after_the_failover(&nodes, load, &receiver, promoted).await;
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
        let waits = ["--redis-wait-replicas", "1"];
        let report = shard_primary_killed_under_load(&waits, false).await;
        assert!(report.is_clean(), "{report:?}");
    }
}

/// The same run without `--redis-wait-replicas`: the nodes follow the failover too,
/// but the answers acknowledged while the replicas were cut off die with the primary.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_a_cluster_without_wait_replicas_a_shards_failover_loses_acknowledged_answers() {
    let report = shard_primary_killed_under_load(&[], true).await;
    assert!(
        report.lost + report.twice > 0,
        "an asynchronous failover lost nothing this time: {report:?}"
    );
}

/// The nodes cut from one shard (its primary behind toxiproxy, which the cluster
/// announces to clients) for [`SHARD_CUT`] under load: calls that need the shard fail
/// BACKEND_UNAVAILABLE meanwhile (and are retried), the nodes serve again once it
/// heals, and nothing acknowledged is lost or resolved twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_a_cluster_nodes_cut_from_one_shard_serve_again_losing_nothing() {
    let proxy = Toxiproxy::start().await;
    let cluster = RedisCluster::start_replicated(3, REPLICAS, NODE_TIMEOUT).await;
    cluster.announce_through(SESSION_KEY, &proxy, "shard").await;
    let nodes = nodes(&cluster, &[]).await;
    let receiver = load::webhook(&nodes[0].url).await;
    let urls: Vec<String> = nodes.iter().map(|n| n.url.clone()).collect();
    let load = load::Load::start(&urls);
    load.flowing("answers before the cut", 0, ANSWERS).await;

    proxy.set_enabled("shard", false).await;
    tokio::time::sleep(SHARD_CUT).await;
    proxy.set_enabled("shard", true).await;
    let healed = Instant::now();
    let serving = serving_again(&nodes, healed).await;
    let before = load.answered_in(SESSION);
    load.flowing_in("answers on the shard after the cut", SESSION, before, 3)
        .await;
    let ledger = load.stop().await;
    let client = nodes[0].client().await;
    let report = load::check(&client, &ledger, &receiver).await;
    eprintln!(
        "nodes cut from one cluster shard for {SHARD_CUT:?}: every node serving {serving:?} \
         after it healed; {report:?}"
    );
    assert!(report.is_clean(), "{report:?}");
}
