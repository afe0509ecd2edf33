//! Several `askgate serve` processes over one Redis: the semantics hold across nodes,
//! through a node's death, its drain, and Redis going away and coming back.

use std::{collections::HashMap, sync::Arc, time::Duration};

use askgate_client::{Ask, Client, Event, Reason, answer, question};
use askgate_proto::v1::Resolution;
use askgate_testing::RedisServer;
use tokio::sync::Barrier;
use tokio_stream::StreamExt;

use crate::support::{ServeProcess, eventually, next_event, next_requested, subscribed, within};

async fn nodes(redis: &RedisServer, count: usize) -> Vec<ServeProcess> {
    ServeProcess::redis_nodes(&redis.url, false, count, &[]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ask_on_a_subscribe_on_b_answer_on_c() {
    let redis = RedisServer::start().await;
    let nodes = nodes(&redis, 3).await;
    let mut b = nodes[1].client().await;
    let mut events = subscribed(&mut b, "s").await;
    let mut a = nodes[0].client().await;
    let call = tokio::spawn(async move {
        a.ask(Ask::new("s").question(question("q", "Ship it?").choice("yes").choice("no")))
            .await
    });
    let rpc_id = next_requested(&mut events).await;
    let mut c = nodes[2].client().await;
    assert_eq!(c.list_pending("s").await.expect("list")[0].rpc_id, rpc_id);
    c.answer("s", &rpc_id, vec![answer::select("q", ["no"])])
        .await
        .expect("answer on C");
    let response = within("the ask on A", call)
        .await
        .expect("join")
        .expect("answered");
    assert_eq!(response.answers[0].selected, ["no"]);
    match next_event(&mut events).await {
        Event::Resolved { resolved, .. } => {
            assert_eq!(resolved.rpc_id, rpc_id);
            assert_eq!(resolved.reason(), Resolution::Answered);
        }
        other => panic!("expected resolved, got {other:?}"),
    }
    let late = c.cancel("s", &rpc_id, "").await.expect_err("late");
    assert_eq!(late.reason(), Reason::NotPending);
    assert_eq!(late.metadata("resolution"), Some("ANSWERED"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_answers_spread_over_three_nodes_have_exactly_one_winner() {
    const RACERS: usize = 32;
    const ROUNDS: usize = 200;
    let redis = RedisServer::start().await;
    let nodes = nodes(&redis, 3).await;
    let mut clients: Vec<Client> = Vec::new();
    for node in &nodes {
        clients.push(node.client().await);
    }
    let mut ui = clients[1].clone();
    let mut events = subscribed(&mut ui, "race").await;
    for round in 0..ROUNDS {
        let mut asker = clients[round % 3].clone();
        let call = tokio::spawn(async move {
            asker
                .ask(Ask::new("race").question(question("q", "free text?")))
                .await
        });
        let rpc_id = next_requested(&mut events).await;
        let barrier = Arc::new(Barrier::new(RACERS));
        let racers: Vec<_> = (0..RACERS)
            .map(|i| {
                let mut client = clients[i % 3].clone();
                let (rpc_id, barrier) = (rpc_id.clone(), barrier.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    let text = format!("racer-{i}");
                    client
                        .answer("race", &rpc_id, vec![answer::custom("q", &text)])
                        .await
                        .map(|()| text)
                })
            })
            .collect();
        let mut winners = Vec::new();
        for racer in racers {
            match within("a racer", racer).await.expect("join") {
                Ok(text) => winners.push(text),
                Err(e) => assert_eq!(e.reason(), Reason::NotPending, "round {round}: {e}"),
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: {winners:?}");
        let response = within("the ask", call)
            .await
            .expect("join")
            .expect("answered");
        assert_eq!(
            response.answers[0].custom.as_deref(),
            Some(winners[0].as_str())
        );
        loop {
            if let Event::Resolved { resolved, .. } = next_event(&mut events).await {
                assert_eq!(resolved.rpc_id, rpc_id);
                break;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_down_means_not_serving_and_unavailable_then_the_node_recovers_by_itself() {
    use tonic_health::pb::{
        HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
    };
    let mut redis = RedisServer::start().await;
    let node = nodes(&redis, 1).await.remove(0);
    let mut client = node.client().await;
    let channel = tonic::transport::Endpoint::from_shared(node.url.clone())
        .expect("url")
        .connect()
        .await
        .expect("connect");
    let mut health = HealthClient::new(channel);
    let status = |health: &mut HealthClient<tonic::transport::Channel>| {
        let mut health = health.clone();
        async move {
            health
                .check(HealthCheckRequest {
                    service: String::new(),
                })
                .await
                .expect("check")
                .into_inner()
                .status()
        }
    };
    assert_eq!(status(&mut health).await, ServingStatus::Serving);

    // An answer acknowledged before the outage reached its ask.
    let mut events = subscribed(&mut client, "s").await;
    let mut asker = client.clone();
    let call = tokio::spawn(async move {
        asker
            .ask(Ask::new("s").question(question("q", "ok?").choice("yes")))
            .await
    });
    let rpc_id = next_requested(&mut events).await;
    client
        .answer("s", &rpc_id, vec![answer::select("q", ["yes"])])
        .await
        .expect("acknowledged");
    within("the ask", call)
        .await
        .expect("join")
        .expect("answered");
    // A plain subscriber ends UNAVAILABLE when Redis goes; one that follows resumes.
    let mut following = client.follow(askgate_proto::v1::SubscribeRequest {
        session_id: "t".into(),
        ..Default::default()
    });
    crate::support::until_synced_following(&mut following).await;

    redis.kill();
    let failed = within("the subscription to fail", async {
        loop {
            match events.next().await {
                Some(Ok(_)) => {} // what was delivered before
                Some(Err(failed)) => break failed,
                None => panic!("the stream ended instead of failing"),
            }
        }
    })
    .await;
    assert_eq!(failed.code(), tonic::Code::Unavailable, "{failed}");
    eventually("health to report NOT_SERVING", || {
        let mut health = health.clone();
        async move { (status(&mut health).await == ServingStatus::NotServing).then_some(()) }
    })
    .await;
    let refused = client
        .ask(
            Ask::new("s")
                .question(question("q", "ok?"))
                .hold_unattended()
                .no_retry(),
        )
        .await
        .expect_err("redis is down");
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused}");

    redis.start_again().await;
    eventually("health to report SERVING again", || {
        let mut health = health.clone();
        async move { (status(&mut health).await == ServingStatus::Serving).then_some(()) }
    })
    .await;
    // The follower is back too: it resubscribed and, Redis having lost everything,
    // got `reset` and a fresh snapshot.
    crate::support::until_synced_following(&mut following).await;
    // Service resumes without restarting the node: subscribe, ask, answer.
    let mut events = subscribed(&mut client, "t").await;
    let mut asker = client.clone();
    let call = tokio::spawn(async move {
        asker
            .ask(Ask::new("t").question(question("q", "back?").choice("yes")))
            .await
    });
    let rpc_id = next_requested(&mut events).await;
    client
        .answer("t", &rpc_id, vec![answer::select("q", ["yes"])])
        .await
        .expect("answer");
    within("the ask after recovery", call)
        .await
        .expect("join")
        .expect("answered");
    // The following subscriber reconnected by itself and saw the ask come and go.
    let resolved = within("the follower to see the ask", async {
        loop {
            match following.next().await {
                Some(Ok(Event::Resolved { resolved, .. })) => break resolved,
                Some(Ok(_)) => {}
                other => panic!("the follower stopped: {other:?}"),
            }
        }
    })
    .await;
    assert_eq!(resolved.rpc_id, rpc_id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_nodes_asks_reattach_elsewhere_or_abort_after_their_lease() {
    let redis = RedisServer::start().await;
    let mut nodes =
        ServeProcess::redis_nodes(&redis.url, false, 2, &["--redis-lease", "300ms"]).await;
    let (doomed, survivor) = (nodes.remove(0), nodes.remove(0));
    let mut ui = survivor.client().await;
    let mut events = subscribed(&mut ui, "s").await;

    let ask = |request_id: &str, grace_ms: u64| {
        Ask::new("s")
            .question(question("q", "Deploy?").choice("yes").choice("no"))
            .request_id(request_id)
            .reattach_grace(std::time::Duration::from_millis(grace_ms))
            .no_retry()
    };
    let on_doomed = doomed.client().await;
    let (kept, lost) = (ask("kept", 60_000), ask("lost", 0));
    let mut asker = on_doomed.clone();
    let _kept_call = tokio::spawn(async move { asker.ask(kept).await });
    let kept_rpc = next_requested(&mut events).await;
    let mut asker = on_doomed.clone();
    let _lost_call = tokio::spawn(async move { asker.ask(lost).await });
    let lost_rpc = next_requested(&mut events).await;

    doomed.signal("KILL");

    // The human answers meanwhile; the agent comes back through the survivor.
    ui.answer("s", &kept_rpc, vec![answer::select("q", ["no"])])
        .await
        .expect("answered while the asker's node is gone");
    let mut agent = survivor.client().await;
    let response = agent
        .ask(ask("kept", 60_000))
        .await
        .expect("the reattached call gets the answer");
    assert_eq!(response.rpc_id, kept_rpc);
    assert_eq!(response.answers[0].selected, ["no"]);

    // The ask nobody came back for resolves ABORTED once the dead node's lease ran out.
    loop {
        if let Event::Resolved { resolved, .. } = next_event(&mut events).await
            && resolved.rpc_id == lost_rpc
        {
            assert_eq!(resolved.reason(), Resolution::Aborted);
            break;
        }
    }
    assert!(
        ui.list_pending("s").await.expect("list").is_empty(),
        "nothing stays pending"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_draining_node_hands_its_waiting_asks_over_to_reattach_elsewhere() {
    let redis = RedisServer::start().await;
    let mut nodes = nodes(&redis, 2).await;
    let (mut draining, other) = (nodes.remove(0), nodes.remove(0));
    let mut ui = other.client().await;
    let mut events = subscribed(&mut ui, "s").await;
    let ask = || {
        Ask::new("s")
            .question(question("q", "Deploy?").choice("yes").choice("no"))
            .request_id("deploy-1")
            .reattach_grace(std::time::Duration::from_secs(60))
            .no_retry()
    };
    let mut agent = draining.client().await;
    let call = tokio::spawn(async move { agent.ask(ask()).await });
    let rpc_id = next_requested(&mut events).await;

    draining.signal("TERM");
    let told = within("the call on the draining node", call)
        .await
        .expect("join")
        .expect_err("the node drains");
    assert_eq!(
        (told.code(), told.reason()),
        (tonic::Code::Unavailable, Reason::ShuttingDown)
    );
    assert_eq!(draining.exit_code().await, Some(0), "a clean drain");
    let pending = ui.list_pending("s").await.expect("list");
    assert_eq!(pending.len(), 1, "handed over, not disposed");
    assert_eq!(pending[0].rpc_id, rpc_id);

    ui.answer("s", &rpc_id, vec![answer::select("q", ["yes"])])
        .await
        .expect("answered while the agent is away");
    let mut agent = other.client().await;
    let response = agent.ask(ask()).await.expect("the reattached call");
    assert_eq!(response.rpc_id, rpc_id);
    assert_eq!(response.answers[0].selected, ["yes"]);
}

/// Redis is killed and restarted (with `appendfsync always`) while asks flow over three
/// nodes: every answer that was acknowledged reaches its ask, subscribers following
/// through the outage resume without gap or duplicate, and the nodes recover alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_restarting_mid_run_loses_no_acknowledged_answer() {
    const ASKERS: usize = 3;
    const ASKS_EACH: usize = 20;
    const TOTAL: usize = ASKERS * ASKS_EACH;
    let mut redis = RedisServer::start_durable().await;
    let nodes = nodes(&redis, 3).await;
    let follow = |client: &Client| {
        client.follow(askgate_proto::v1::SubscribeRequest {
            session_id: "s".into(),
            ..Default::default()
        })
    };
    let mut followers = Vec::new();
    for node in &nodes {
        let mut following = follow(&node.client().await);
        crate::support::until_synced_following(&mut following).await;
        followers.push(following);
    }

    // The human: answers each ask with its own rpc_id, retrying through the outage.
    let acknowledged: Arc<std::sync::Mutex<HashMap<String, String>>> = Arc::default();
    let (acked_tx, mut acked_rx) = tokio::sync::mpsc::unbounded_channel();
    let bot = {
        let client = nodes[1].client().await;
        let mut requests = follow(&client);
        let acknowledged = acknowledged.clone();
        tokio::spawn(async move {
            while let Some(event) = requests.next().await {
                let Ok(Event::Requested { requested, .. }) = event else {
                    continue;
                };
                let (mut client, acknowledged, acked_tx) =
                    (client.clone(), acknowledged.clone(), acked_tx.clone());
                tokio::spawn(async move {
                    let text = format!("for {}", requested.rpc_id);
                    loop {
                        let answered = client
                            .answer("s", &requested.rpc_id, vec![answer::custom("q", &text)])
                            .await;
                        match answered {
                            Ok(()) => {
                                acknowledged
                                    .lock()
                                    .expect("lock")
                                    .insert(requested.rpc_id.clone(), text);
                                let _ = acked_tx.send(());
                                return;
                            }
                            Err(e) if e.reason() == Reason::NotPending => return,
                            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                        }
                    }
                });
            }
        })
    };

    let mut askers = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        let mut client = node.client().await;
        askers.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for n in 0..ASKS_EACH {
                let ask = Ask::new("s")
                    .question(question("q", "ok?"))
                    .request_id(&format!("asker-{i}-{n}"))
                    .reattach_grace(Duration::from_secs(60))
                    .timeout(Duration::from_secs(60));
                let response = client.ask(ask).await.expect("answered in the end");
                got.push((response.rpc_id, response.answers[0].custom.clone()));
            }
            got
        }));
    }

    // A third of the way in, Redis crashes and comes back.
    for _ in 0..TOTAL / 3 {
        within("an acknowledged answer", acked_rx.recv()).await;
    }
    redis.kill();
    tokio::time::sleep(Duration::from_millis(500)).await; // an outage, not a blip
    redis.start_again().await;

    let mut delivered = HashMap::new();
    for asker in askers {
        for (rpc_id, text) in within("an asker", asker).await.expect("asker") {
            delivered.insert(rpc_id, text.expect("a custom answer"));
        }
    }
    assert_eq!(delivered.len(), TOTAL);
    for (rpc_id, text) in acknowledged.lock().expect("lock").iter() {
        assert_eq!(
            delivered.get(rpc_id),
            Some(text),
            "acknowledged for {rpc_id}"
        );
    }

    for (i, following) in followers.iter_mut().enumerate() {
        let mut requested = std::collections::HashSet::new();
        let mut resolved = std::collections::HashSet::new();
        within("a follower to see every ask resolved", async {
            while resolved.len() < TOTAL {
                match following.next().await {
                    Some(Ok(Event::Requested { requested: r, .. })) => {
                        assert!(requested.insert(r.rpc_id), "follower {i}: requested twice");
                    }
                    Some(Ok(Event::Resolved { resolved: r, .. })) => {
                        assert!(
                            requested.contains(&r.rpc_id),
                            "follower {i}: resolved first"
                        );
                        assert!(resolved.insert(r.rpc_id), "follower {i}: resolved twice");
                    }
                    Some(Ok(Event::Reset)) => {
                        panic!("follower {i}: reset, though the history survived")
                    }
                    Some(Ok(_)) | Some(Err(_)) => {}
                    None => panic!("follower {i} ended"),
                }
            }
        })
        .await;
    }
    bot.abort();
    assert_redis_holds_nothing_unbounded(&redis).await;
}

/// After a run, every key askgate left in Redis expires by itself (history, outcomes,
/// leases, presence) and no session history is longer than its cap: nothing grows
/// without bound, but for the audit log, which its retention bounds. The two shared keys, the sweep list `ag:waits` and the node leases
/// `ag:nodes`, may keep members (a grace running out, a node that drained with nobody
/// left to take over its list), but each is due for a sweep within a lease and a
/// reattach grace. Waits (within the bounded wait) for the nodes' last
/// clean-ups.
pub async fn assert_redis_holds_nothing_unbounded(redis: &RedisServer) {
    const HISTORY_LEN: usize = 1000; // the --history-len default
    // The --redis-lease default and the longest reattach grace these tests use.
    const MAX_LEASE_AND_GRACE: Duration = Duration::from_secs(10 + 60);
    let client = redis::Client::open(redis.url.as_str()).expect("url");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect to redis");
    let deadline = tokio::time::Instant::now() + crate::support::WAIT;
    loop {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("ag:*")
            .query_async(&mut conn)
            .await
            .expect("keys");
        assert!(!keys.is_empty(), "the run left its history in redis");
        let mut unbounded = Vec::new();
        for key in keys {
            let ttl: i64 = redis::cmd("PTTL")
                .arg(&key)
                .query_async(&mut conn)
                .await
                .expect("pttl");
            // The audit log is kept for --audit-retention and pruned by a sweep, not by
            // expiry (docs/approvals.md); its ids go with that sweep too.
            if key.starts_with("ag:{audit/") || key == "ag:audit-tenants" {
                continue;
            }
            if key == "ag:waits" || key == "ag:nodes" {
                let horizon = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .expect("clock")
                    + MAX_LEASE_AND_GRACE;
                let beyond: Vec<String> = redis::cmd("ZRANGEBYSCORE")
                    .arg(&key)
                    .arg(horizon.as_millis() as u64)
                    .arg("+inf")
                    .query_async(&mut conn)
                    .await
                    .expect("zrangebyscore");
                assert!(beyond.is_empty(), "never swept: {beyond:?}");
            } else if ttl == -1 {
                unbounded.push(key.clone());
            }
            if key.ends_with(":events") {
                let len: usize = redis::cmd("LLEN")
                    .arg(&key)
                    .query_async(&mut conn)
                    .await
                    .expect("llen");
                assert!(len <= HISTORY_LEN, "{key} holds {len} events");
            }
        }
        if unbounded.is_empty() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "keys without an expiry after the run: {unbounded:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_reach_redis_over_tls_with_the_ca_they_are_given() {
    let pki = crate::tls::Pki::new();
    let redis = RedisServer::start_tls(askgate_testing::RedisTls {
        cert: pki.dir.0.join("server.pem"),
        key: pki.dir.0.join("server.key"),
        ca_pem: pki.ca_pem.clone(),
    })
    .await;
    assert!(redis.url.starts_with("rediss://"));
    let ca_file = pki.dir.0.join("ca.pem").display().to_string();
    let url = redis.url.as_str();
    let tls = [
        "--backend",
        "redis",
        "--redis-url",
        url,
        "--redis-ca-file",
        &ca_file,
    ];
    let node = ServeProcess::start_with(&tls).await;
    let mut client = node.client().await;
    let mut events = subscribed(&mut client, "s").await;
    let mut asker = client.clone();
    let call = tokio::spawn(async move {
        asker
            .ask(Ask::new("s").question(question("q", "Over TLS?").choice("yes")))
            .await
    });
    let rpc_id = next_requested(&mut events).await;
    client
        .answer("s", &rpc_id, vec![answer::select("q", ["yes"])])
        .await
        .expect("answer");
    within("the ask", call)
        .await
        .expect("join")
        .expect("answered through a TLS Redis");

    // Without the CA, the certificate is not trusted: the node refuses to start.
    let untrusted = crate::support::askgate(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--backend",
        "redis",
        "--redis-url",
        url,
    ]);
    let (code, _, stderr) = crate::support::finish(untrusted).await;
    assert_ne!(code, 0, "{stderr}");
    assert!(stderr.contains("failed to connect to redis"), "{stderr}");
}

/// The Redis commands whose calls `INFO commandstats` counts so far, by name.
async fn command_calls(conn: &mut redis::aio::MultiplexedConnection) -> HashMap<String, u64> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .expect("info commandstats");
    info.lines()
        .filter_map(|line| {
            let (name, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = stats
                .strip_prefix("calls=")?
                .split(',')
                .next()?
                .parse()
                .ok()?;
            Some((name.to_owned(), calls))
        })
        .collect()
}

/// A node renews one lease for all the asks it holds: what it sends Redis per renewal
/// does not grow with them (300 held asks, three renewals: no per-ask command).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_nodes_renewals_do_not_grow_with_the_asks_it_holds() {
    const HELD: usize = 300;
    let redis = RedisServer::start().await;
    let nodes = ServeProcess::redis_nodes(&redis.url, false, 1, &["--redis-lease", "300ms"]).await;
    let node = nodes[0].client().await;
    let mut calls = Vec::new();
    for _ in 0..HELD {
        let mut asker = node.clone();
        let ask = Ask::new("held")
            .question(question("q", "Wait?").choice("yes"))
            .hold_unattended()
            .no_retry();
        calls.push(tokio::spawn(async move { asker.ask(ask).await }));
    }
    let lister = node.clone();
    eventually("every ask pending", || {
        let mut lister = lister.clone();
        async move { (lister.list_pending("held").await.ok()?.len() == HELD).then_some(()) }
    })
    .await;

    let client = redis::Client::open(redis.url.as_str()).expect("url");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect to redis");
    let lease = |conn: redis::aio::MultiplexedConnection| async move {
        let mut conn = conn;
        let leases: Vec<(String, u64)> = redis::cmd("ZRANGE")
            .arg("ag:nodes")
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query_async(&mut conn)
            .await
            .expect("zrange ag:nodes");
        assert_eq!(leases.len(), 1, "one node, one lease: {leases:?}");
        leases[0].1
    };
    let before = command_calls(&mut conn).await;
    let mut renewed = lease(conn.clone()).await;
    for _ in 0..3 {
        renewed = eventually("the node renewing its lease", || {
            let conn = conn.clone();
            async move { Some(lease(conn).await).filter(|now| *now > renewed) }
        })
        .await;
    }
    let after = command_calls(&mut conn).await;
    let delta =
        |name: &str| after.get(name).copied().unwrap_or(0) - before.get(name).copied().unwrap_or(0);
    for per_ask in ["hset", "sadd", "zadd", "pexpire"] {
        assert!(
            delta(per_ask) < 50,
            "{} {per_ask} calls over three renewals with {HELD} asks held: renewals grow with the asks",
            delta(per_ask)
        );
    }
    for call in calls {
        call.abort();
    }
}
