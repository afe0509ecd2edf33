//! Several askgate nodes over one Redis (each with its own backend, connections and
//! listener, as separate processes would have): the semantics hold across nodes.

use std::sync::Arc;

use askgate_client::{Ask, Client, Event, Reason, answer, question};
use askgate_proto::v1::Resolution;
use askgate_service::{ServerConfig, server::BackendChoice, testing::RedisServer};
use tokio::sync::Barrier;
use tokio_stream::StreamExt;

use crate::support::{TestServer, next_event, next_requested, subscribed, test_config, within};

async fn nodes(redis: &RedisServer, count: usize) -> Vec<TestServer> {
    let mut nodes = Vec::new();
    for _ in 0..count {
        nodes.push(
            TestServer::start_with(ServerConfig {
                backend: BackendChoice::Redis {
                    url: redis.url.clone(),
                },
                ..test_config()
            })
            .await,
        );
    }
    nodes
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
    let channel = tonic::transport::Endpoint::from_shared(node.url())
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
    crate::support::eventually("health to report NOT_SERVING", || {
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
    crate::support::eventually("health to report SERVING again", || {
        let mut health = health.clone();
        async move { (status(&mut health).await == ServingStatus::Serving).then_some(()) }
    })
    .await;
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
    let lease = ["--redis-lease", "300ms"];
    let doomed = crate::cli::ServeProcess::start_with(
        &[
            &["--backend", "redis", "--redis-url", &redis.url][..],
            &lease[..],
        ]
        .concat(),
    )
    .await;
    let survivor = TestServer::start_with(ServerConfig {
        backend: BackendChoice::Redis {
            url: redis.url.clone(),
        },
        redis_lease: std::time::Duration::from_millis(300),
        ..test_config()
    })
    .await;
    let mut ui = survivor.client().await;
    let mut events = subscribed(&mut ui, "s").await;

    let ask = |request_id: &str, grace_ms: u64| {
        Ask::new("s")
            .question(question("q", "Deploy?").choice("yes").choice("no"))
            .request_id(request_id)
            .reattach_grace(std::time::Duration::from_millis(grace_ms))
            .no_retry()
    };
    let on_doomed = Client::connect(doomed.url.clone()).await.expect("connect");
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
