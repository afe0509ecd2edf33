//! Replay (docs/protocol.md, Semantics 2 and 3): pending asks are replayed with the same rpc_id
//! on every (re)connect, `synced` follows the replay, cursors resume without gaps, and
//! an unknown cursor gets `reset` and a snapshot.

use askgate_client::{Ask, Client, Event, answer, question};
use askgate_proto::v1::{AskResponse, SubscribeRequest};
use tokio::task::JoinHandle;

use crate::support::{
    TestServer, next_event, next_requested, requested_ids, subscribed, until_synced, within,
};

type Waiting = JoinHandle<Result<AskResponse, askgate_client::Error>>;

fn spawn_ask(client: &Client, session: &str, id: &str) -> Waiting {
    let mut client = client.clone();
    let ask = Ask::new(session).question(question(id, "?").choice("yes"));
    tokio::spawn(async move { client.ask(ask).await })
}

async fn subscribe_from(client: &mut Client, session: &str, after: &str) -> askgate_client::Events {
    client
        .subscribe(SubscribeRequest {
            session_id: session.into(),
            after: after.into(),
            ..Default::default()
        })
        .await
        .expect("subscribe")
}

async fn subscribers_before_during_and_after_an_ask_agree_on_its_rpc_id() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let mut before = subscribed(&mut client, "s").await;
    let waiting = spawn_ask(&client, "s", "q");
    let rpc_id = next_requested(&mut before).await;

    let mut during = client.subscribe_session("s").await.expect("subscribe");
    let replay = until_synced(&mut during).await;
    assert_eq!(requested_ids(&replay), std::slice::from_ref(&rpc_id));
    // A reopened stream gets the same rpc_id again.
    let mut reopened = client.subscribe_session("s").await.expect("subscribe");
    assert_eq!(
        requested_ids(&until_synced(&mut reopened).await),
        std::slice::from_ref(&rpc_id)
    );

    client
        .answer("s", &rpc_id, vec![answer::select("q", ["yes"])])
        .await
        .expect("answer");
    within("ask", waiting)
        .await
        .expect("join")
        .expect("answered");
    for events in [&mut before, &mut during, &mut reopened] {
        match next_event(events).await {
            Event::Resolved { resolved, .. } => assert_eq!(resolved.rpc_id, rpc_id),
            other => panic!("expected resolved, got {other:?}"),
        }
    }
    let mut after = client.subscribe_session("s").await.expect("subscribe");
    assert!(
        until_synced(&mut after).await.is_empty(),
        "nothing is pending any more"
    );
}
on_every_backend!(
    #[tokio::test]
    subscribers_before_during_and_after_an_ask_agree_on_its_rpc_id
);

async fn replay_is_oldest_first_then_synced() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let mut ui = subscribed(&mut client, "s").await;
    let mut ids = Vec::new();
    let mut waiting = Vec::new();
    for i in 0..5 {
        waiting.push(spawn_ask(&client, "s", &format!("q{i}")));
        ids.push(next_requested(&mut ui).await);
    }
    let mut events = client.subscribe_session("s").await.expect("subscribe");
    let replay = until_synced(&mut events).await;
    assert_eq!(requested_ids(&replay), ids);
    assert_eq!(
        replay.len(),
        ids.len(),
        "only requested events are replayed"
    );
    let cursors: Vec<String> = replay
        .iter()
        .map(|e| match e {
            Event::Requested { cursor, .. } => cursor.clone(),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    let mut sorted = cursors.clone();
    sorted.sort_by_key(|c| c.rsplit('-').next().and_then(|n| n.parse::<u64>().ok()));
    assert_eq!(cursors, sorted, "cursors increase");

    let mut all = client.subscribe_all().await.expect("subscribe all");
    assert_eq!(requested_ids(&until_synced(&mut all).await), ids);
}
on_every_backend!(
    #[tokio::test]
    replay_is_oldest_first_then_synced
);

async fn a_known_cursor_resumes_with_only_the_missed_events() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let mut events = subscribed(&mut client, "s").await;
    // The keeper stays pending, so the session (and its history) outlives subscribers.
    let _keeper = spawn_ask(&client, "s", "keeper");
    next_requested(&mut events).await;
    let first = spawn_ask(&client, "s", "first");
    let cursor = match next_event(&mut events).await {
        Event::Requested { cursor, .. } => cursor,
        other => panic!("expected requested, got {other:?}"),
    };
    drop(events);

    // Missed while disconnected: a new ask and the first one's resolution.
    let second = spawn_ask(&client, "s", "second");
    let pending = within("second to be pending", async {
        loop {
            let pending = client.list_pending("s").await.expect("list");
            if pending.len() == 3 {
                break pending;
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
    let first_id = pending[1].rpc_id.clone();
    let second_id = pending[2].rpc_id.clone();
    client.cancel("s", &first_id, "").await.expect("cancel");
    within("first", first)
        .await
        .expect("join")
        .expect_err("cancelled");

    let mut resumed = subscribe_from(&mut client, "s", &cursor).await;
    match next_event(&mut resumed).await {
        Event::Requested { requested, .. } => assert_eq!(requested.rpc_id, second_id),
        other => panic!("expected the missed requested, got {other:?}"),
    }
    match next_event(&mut resumed).await {
        Event::Resolved { resolved, .. } => assert_eq!(resolved.rpc_id, first_id),
        other => panic!("expected the missed resolved, got {other:?}"),
    }
    match next_event(&mut resumed).await {
        Event::Synced { resumed, .. } => assert!(resumed),
        other => panic!("expected synced, got {other:?}"),
    }
    second.abort();
}
on_every_backend!(
    #[tokio::test]
    a_known_cursor_resumes_with_only_the_missed_events
);

async fn an_unknown_cursor_gets_reset_and_a_snapshot() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let mut ui = subscribed(&mut client, "s").await;
    let _waiting = spawn_ask(&client, "s", "q");
    let rpc_id = next_requested(&mut ui).await;
    for stale in ["0-1", "garbage", "ffffffffffff-999"] {
        let mut events = subscribe_from(&mut client, "s", stale).await;
        assert_eq!(next_event(&mut events).await, Event::Reset, "{stale}");
        let snapshot = until_synced(&mut events).await;
        assert_eq!(requested_ids(&snapshot), std::slice::from_ref(&rpc_id));
    }
}
on_every_backend!(
    #[tokio::test]
    an_unknown_cursor_gets_reset_and_a_snapshot
);
