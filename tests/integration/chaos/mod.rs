//! Chaos on Redis: real redis-servers, Sentinels and toxiproxy between them, two
//! askgate nodes under load, and faults: the primary killed (kill -9) and a replica
//! promoted, with and without `--redis-wait-replicas 1` (here), latency, cut
//! connections, a partition and a paused Redis (`network.rs`). Each run counts what was
//! acknowledged and lost (`load.rs`), and prints its figures (docs/operations.md,
//! "Faults and what they cost"). `ASKGATE_CHAOS=full` runs the long form.

mod cluster;
mod load;
mod network;

use std::time::{Duration, Instant};

use askgate_testing::{RedisFailover, SENTINEL_MASTER, Toxiproxy};

use self::load::{Load, Report};
use crate::support::ServeProcess;

/// How long the replicas are cut off from the primary before it dies: what it
/// acknowledged meanwhile, it alone held.
const CUT_OFF: Duration = Duration::from_millis(500);

/// Replicas of the primary: one is promoted, the other follows it, so that writes
/// waiting for a replica go on after the failover.
const REPLICAS: usize = 2;

/// Answers acknowledged before the primary dies, and after.
const ANSWERS: usize = 20;

/// Whether to run the full chaos suite (`ASKGATE_CHAOS=full`): longer faults, more
/// rounds. CI runs the short form.
fn full() -> bool {
    std::env::var("ASKGATE_CHAOS").is_ok_and(|v| v == "full")
}

/// Nodes on the Sentinels of `redis`, with `extra` flags.
async fn nodes(redis: &RedisFailover, extra: &[&str]) -> Vec<ServeProcess> {
    let mut flags = vec![
        "--redis-sentinel-master",
        SENTINEL_MASTER,
        "--redis-lease",
        "3s",
        "--webhook-allow-private",
    ];
    flags.extend(extra);
    ServeProcess::redis_nodes(&redis.url, false, 2, &flags).await
}

/// Waits until every node serves a read, a write and an ask again (the ask needs
/// the node's pub/sub live); how long that took.
async fn serving_again(nodes: &[ServeProcess], since: Instant) -> Duration {
    for node in nodes {
        crate::support::eventually("the node to serve again", || async {
            let mut client = askgate_client::Client::connect_lazy(node.url.clone()).ok()?;
            client.list_pending("probe").await.ok()?;
            // An abort by a request_id never used records an outcome; an Ask by it
            // gets that outcome back.
            let fresh = format!("probe-{}", uuid::Uuid::new_v4());
            client.abort("probe", &fresh).await.ok()?;
            let ask = askgate_client::Ask::new("probe")
                .question(
                    askgate_client::question("q", "Up?")
                        .choice("yes")
                        .choice("no"),
                )
                .request_id(&fresh)
                .no_retry()
                .timeout(Duration::from_secs(2));
            let got = client.ask(ask).await.err()?;
            (got.reason() == askgate_client::Reason::AskAborted).then_some(())
        })
        .await;
    }
    since.elapsed()
}

/// After a failover that promoted a replica `promoted` after the kill: how long after
/// the kill every node served again, and once the load flowed again and stopped, what
/// it lost.
async fn after_the_failover(
    nodes: &[ServeProcess],
    load: Load,
    receiver: &crate::webhooks::Receiver,
    promoted: Duration,
) -> (Duration, Report) {
    let killed = Instant::now() - promoted;
    let serving = serving_again(nodes, killed).await;
    let before = load.answered();
    load.flowing("answers after the failover", before, ANSWERS)
        .await;
    let ledger = load.stop().await;
    let client = nodes[0].client().await;
    (serving, load::check(&client, &ledger, receiver).await)
}

/// The primary's death under load: agents ask and humans answer on two nodes, the
/// replicas lose their link to the primary for [`CUT_OFF`] (asynchronous replication
/// falls behind so), the primary is killed and the Sentinels promote a replica.
/// Returns what was lost.
async fn primary_killed_under_load(extra: &[&str]) -> Report {
    let proxy = Toxiproxy::start().await;
    let mut redis = RedisFailover::start_with(REPLICAS, Some(&proxy)).await;
    let nodes = nodes(&redis, extra).await;
    let receiver = load::webhook(&nodes[0].url).await;
    let urls: Vec<String> = nodes.iter().map(|n| n.url.clone()).collect();
    let load = Load::start(&urls);
    load.flowing("answers before the failover", 0, ANSWERS)
        .await;

    for replica in 0..REPLICAS {
        proxy
            .set_enabled(&format!("replication-{replica}"), false)
            .await;
    }
    // The load goes on while the primary is alone.
    tokio::time::sleep(CUT_OFF).await;
    let promoted = redis.kill_primary().await;
    let (serving, report) = after_the_failover(&nodes, load, &receiver, promoted).await;
    eprintln!(
        "primary killed ({extra:?}): promoted after {promoted:?}, every node serving after \
         {serving:?}; {report:?}"
    );
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_wait_replicas_the_primarys_death_loses_no_acknowledged_answer() {
    let rounds = if full() { 5 } else { 1 };
    for _ in 0..rounds {
        let report = primary_killed_under_load(&["--redis-wait-replicas", "1"]).await;
        assert!(report.is_clean(), "{report:?}");
    }
}

/// With `--redis-wait-replicas 1`, once a failover promoted the only replica (none is
/// left to confirm anything), even an answer already on record is held back: its
/// retry fails BACKEND_UNAVAILABLE saying so in words (before: an internal "- Io:" and
/// nothing about reads).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_wait_replicas_and_no_replica_left_reads_are_held_back_saying_why() {
    let mut redis = RedisFailover::start(1).await;
    let nodes = nodes(
        &redis,
        &[
            "--redis-wait-replicas",
            "1",
            "--redis-wait-timeout",
            "300ms",
        ],
    )
    .await;
    let mut human = nodes[0].client().await;
    let mut events = human.subscribe_session("held").await.expect("subscribe");
    let ask = || {
        askgate_client::Ask::new("held")
            .question(askgate_client::question("go", "Go?").choice("yes"))
            .request_id("held-1")
            .hold_unattended()
            .no_retry()
            .timeout(Duration::from_secs(5))
    };
    let mut agent = nodes[1].client().await;
    let call = tokio::spawn(async move { agent.ask(ask()).await });
    let rpc_id = crate::support::next_requested(&mut events).await;
    human
        .answer(
            "held",
            &rpc_id,
            vec![askgate_client::answer::select("go", ["yes"])],
        )
        .await
        .expect("answer");
    crate::support::within("the ask", call)
        .await
        .expect("join")
        .expect("answered");
    redis.kill_primary().await;
    let refused = crate::support::eventually("the retry to be held back", || async {
        let mut client = askgate_client::Client::connect_lazy(nodes[0].url.clone()).ok()?;
        let error = client.ask(ask()).await.err()?;
        (error.reason() == askgate_client::Reason::BackendUnavailable
            && error.message().contains("replica"))
        .then_some(error)
    })
    .await;
    let message = refused.message();
    assert!(!message.contains("- Io"), "{message}");
    assert!(message.contains("reads back"), "{message}");
    assert!(message.contains("retrying the call is safe"), "{message}");
}

/// The same run without `--redis-wait-replicas`: what the flag prevents. The answers
/// acknowledged while the replicas were cut off die with the primary.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_wait_replicas_the_primarys_death_loses_acknowledged_answers() {
    let report = primary_killed_under_load(&[]).await;
    assert!(
        report.lost + report.twice > 0,
        "an asynchronous failover lost nothing this time: {report:?}"
    );
}

/// `--redis-wait-fsync` needs WAITAOF: a Redis without it (older than 7.2, or without an
/// append-only file) stops the node at its start, saying why.
#[tokio::test]
async fn wait_fsync_on_a_redis_without_waitaof_is_refused_at_start() {
    let redis = askgate_testing::RedisServer::start().await;
    let serve = crate::support::askgate(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--backend",
        "redis",
        "--redis-url",
        &redis.url,
        "--redis-wait-fsync",
    ]);
    let (code, _, stderr) = crate::support::finish(serve).await;
    assert_ne!(code, 0, "{stderr}");
    assert!(
        stderr.contains("--redis-wait-fsync needs WAITAOF"),
        "{stderr}"
    );
}
