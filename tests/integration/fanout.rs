//! No lost or doubled events: 1,000 asks over 50 sessions, 3 subscribers per session and
//! one all_sessions subscriber, resolved by a mix of Answer, Cancel and abort (the
//! asking call dropped). Every subscriber sees each rpc's `requested` exactly once and
//! its `resolved` exactly once, in that order.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use askgate_client::{Ask, Client, Event, Events, Reason, answer, question};
use askgate_proto::v1::Resolution;
use tokio::sync::{Semaphore, oneshot};
use tokio_stream::StreamExt;

use askgate_testing::{RedisCluster, RedisServer};

use crate::support::{ServeProcess, TestServer, next_event, subscribed, until_synced, within};

const ASKS: usize = 1000;
const SESSIONS: usize = 50;
const SUBSCRIBERS_PER_SESSION: usize = 3;

fn session(n: usize) -> String {
    format!("fan-{}", n % SESSIONS)
}

/// How ask `n` is resolved.
fn resolution(n: usize) -> Resolution {
    match n % 3 {
        0 => Resolution::Answered,
        1 => Resolution::Cancelled,
        _ => Resolution::Aborted,
    }
}

/// Reads events until `expected` asks were resolved; returns them all.
async fn collect(who: String, mut events: Events, expected: usize) -> Vec<Event> {
    let mut seen = Vec::new();
    let mut resolved = 0;
    while resolved < expected {
        let what = format!(
            "{who}: event {} ({resolved} of {expected} resolved)",
            seen.len()
        );
        let event = within(&what, events.next())
            .await
            .expect("the stream ended early")
            .expect("the stream failed");
        if matches!(event, Event::Resolved { .. }) {
            resolved += 1;
        }
        seen.push(event);
    }
    seen
}

/// Checks one subscriber's view: every rpc requested once, then resolved once, with
/// the expected resolution. Returns the rpc ids it saw.
fn check_view(who: &str, events: &[Event], ask_of: &HashMap<String, usize>) -> Vec<String> {
    let mut state: HashMap<String, u8> = HashMap::new();
    for event in events {
        match event {
            Event::Requested { requested, .. } => {
                let seen = state.entry(requested.rpc_id.clone()).or_default();
                assert_eq!(*seen, 0, "{who}: requested {} twice", requested.rpc_id);
                *seen = 1;
            }
            Event::Resolved { resolved, .. } => {
                let seen = state.entry(resolved.rpc_id.clone()).or_default();
                assert_eq!(
                    *seen, 1,
                    "{who}: resolved {} without a single requested before it",
                    resolved.rpc_id
                );
                *seen = 2;
                let n = ask_of[&resolved.rpc_id];
                assert_eq!(resolved.reason(), resolution(n), "{who}: ask {n}");
            }
            other => panic!("{who}: unexpected {other:?}"),
        }
    }
    assert!(
        state.values().all(|s| *s == 2),
        "{who}: an ask was not resolved"
    );
    let mut ids: Vec<String> = state.into_keys().collect();
    ids.sort();
    ids
}

async fn every_subscriber_sees_each_rpc_requested_then_resolved_exactly_once() {
    let server = TestServer::start().await;
    let mut clients: Vec<Client> = Vec::new();
    for _ in 0..8 {
        clients.push(server.client().await);
    }
    scenario(clients).await;
}
on_every_backend!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    every_subscriber_sees_each_rpc_requested_then_resolved_exactly_once
);

/// The same over three `askgate serve` processes sharing one Redis: subscribers,
/// askers and resolvers are spread over the nodes, so most events cross nodes. After
/// the run, nothing is left in Redis that would grow without bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn across_three_redis_nodes_every_subscriber_sees_each_rpc_exactly_once() {
    let redis = RedisServer::start().await;
    let nodes = ServeProcess::redis_nodes(&redis.url, false, 3, &[]).await;
    let mut clients: Vec<Client> = Vec::new();
    for node in &nodes {
        clients.push(node.client().await);
        clients.push(node.client().await);
    }
    scenario(clients).await;
    crate::nodes::assert_redis_holds_nothing_unbounded(&redis).await;
}

/// The same over three `askgate serve` processes on a Redis Cluster of three shards:
/// sessions spread over the shards, events through sharded pub/sub.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn across_three_nodes_on_a_redis_cluster_every_subscriber_sees_each_rpc_exactly_once() {
    let cluster = RedisCluster::start(3).await;
    let nodes = ServeProcess::redis_nodes(&cluster.url, true, 3, &[]).await;
    let mut clients: Vec<Client> = Vec::new();
    for node in &nodes {
        clients.push(node.client().await);
        clients.push(node.client().await);
    }
    scenario(clients).await;
}

async fn scenario(mut clients: Vec<Client>) {
    let mut views = Vec::new();
    for s in 0..SESSIONS {
        for k in 0..SUBSCRIBERS_PER_SESSION {
            let n = clients.len();
            let events = subscribed(&mut clients[(s + k) % n], &session(s)).await;
            let who = format!("session {s} subscriber {k}");
            views.push((
                who.clone(),
                tokio::spawn(collect(who, events, ASKS / SESSIONS)),
            ));
        }
    }
    let all = subscribed_all(&mut clients[0]).await;
    views.push((
        "all_sessions".into(),
        tokio::spawn(collect("all_sessions".into(), all, ASKS)),
    ));

    // The resolver: follows every session and resolves each ask as its label says.
    let aborts: Arc<Mutex<HashMap<usize, oneshot::Sender<()>>>> = Arc::default();
    let ask_of: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let resolver = {
        let mut events = subscribed_all(&mut clients[1]).await;
        let client = clients[2].clone();
        let (aborts, ask_of) = (aborts.clone(), ask_of.clone());
        tokio::spawn(async move {
            for _ in 0..ASKS {
                let requested = loop {
                    if let Event::Requested { requested, .. } = next_event(&mut events).await {
                        break requested;
                    }
                };
                let n: usize = requested.labels["n"].parse().expect("label n");
                ask_of
                    .lock()
                    .expect("lock")
                    .insert(requested.rpc_id.clone(), n);
                let mut client = client.clone();
                let aborts = aborts.clone();
                tokio::spawn(async move {
                    let (s, id) = (&requested.session_id, &requested.rpc_id);
                    match resolution(n) {
                        Resolution::Answered => client
                            .answer(s, id, vec![answer::select("q", ["yes"])])
                            .await
                            .expect("answer"),
                        Resolution::Cancelled => client.cancel(s, id, "no").await.expect("cancel"),
                        _ => {
                            let abort = aborts.lock().expect("lock").remove(&n).expect("asker");
                            let _ = abort.send(());
                        }
                    }
                });
            }
        })
    };

    let permits = Arc::new(Semaphore::new(200));
    let mut askers = Vec::new();
    for n in 0..ASKS {
        let mut client = clients[n % clients.len()].clone();
        let permit = permits.clone().acquire_owned().await.expect("semaphore");
        let aborts = aborts.clone();
        askers.push(tokio::spawn(async move {
            let _permit = permit;
            let ask = Ask::new(&session(n))
                .question(question("q", "ok?").choice("yes"))
                .label("n", &n.to_string())
                .reattach_grace(Duration::ZERO);
            match resolution(n) {
                Resolution::Answered => {
                    client.ask(ask).await.expect("answered");
                }
                Resolution::Cancelled => {
                    let err = client.ask(ask).await.expect_err("cancelled");
                    assert_eq!(err.reason(), Reason::AskCancelled);
                }
                _ => {
                    let (abort, aborted) = oneshot::channel();
                    aborts.lock().expect("lock").insert(n, abort);
                    tokio::select! {
                        result = client.ask(ask) => panic!("ask {n} should have been aborted: {result:?}"),
                        _ = aborted => {} // dropping the call aborts the ask
                    }
                }
            }
        }));
    }
    for asker in askers {
        within("an asker", asker).await.expect("asker");
    }
    within("the resolver", resolver).await.expect("resolver");

    let ask_of = ask_of.lock().expect("lock").clone();
    assert_eq!(ask_of.len(), ASKS);
    let mut by_session: HashMap<String, Vec<String>> = HashMap::new();
    for (who, view) in views {
        let events = within(&who, view).await.expect("view");
        let ids = check_view(&who, &events, &ask_of);
        if who == "all_sessions" {
            assert_eq!(ids.len(), ASKS);
            continue;
        }
        let s = session(ask_of[&ids[0]]);
        assert_eq!(ids.len(), ASKS / SESSIONS, "{who}");
        match by_session.get(&s) {
            Some(same) => assert_eq!(
                same, &ids,
                "{who} disagrees with its session's other subscribers"
            ),
            None => {
                by_session.insert(s, ids);
            }
        }
    }
    assert_eq!(by_session.len(), SESSIONS);
}

async fn subscribed_all(client: &mut Client) -> Events {
    let mut events = within("subscribe all", client.subscribe_all())
        .await
        .expect("subscribe");
    until_synced(&mut events).await;
    events
}
