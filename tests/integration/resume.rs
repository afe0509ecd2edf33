//! docs/protocol.md, Semantics 2, cursor resume: a subscriber that drops mid-stream resumes
//! with exactly the events it missed, by hand or through the client's `follow`, which
//! reconnects on its own; a cursor from before a restart gets `reset`.

use std::collections::HashSet;

use askgate_client::{Ask, Client, Connection, Event, Events, answer, question};
use askgate_proto::v1::SubscribeRequest;
use tokio_stream::StreamExt;

use crate::support::{
    Balancer, TestServer, next_event, next_requested, subscribed, until_synced, within,
};

/// 250 asks answered: 500 events.
const ASKS: usize = 250;

/// Runs ASKS asks in session `s`, each answered as soon as it is requested.
fn flow(client: &Client, mut resolver: Events) -> tokio::task::JoinHandle<()> {
    let client = client.clone();
    tokio::spawn(async move {
        let mut asker = client.clone();
        let asking = tokio::spawn(async move {
            for i in 0..ASKS {
                let ask = Ask::new("s").question(question(&format!("q{i}"), "ok?").choice("yes"));
                asker.ask(ask).await.expect("answered");
            }
        });
        for i in 0..ASKS {
            let rpc_id = next_requested(&mut resolver).await;
            let mut client = client.clone();
            client
                .answer(
                    "s",
                    &rpc_id,
                    vec![answer::select(&format!("q{i}"), ["yes"])],
                )
                .await
                .expect("answer");
        }
        asking.await.expect("asker");
    })
}

/// The cursors of `n` live events.
async fn cursors(events: &mut Events, n: usize) -> Vec<String> {
    let mut seen = Vec::new();
    while seen.len() < n {
        match next_event(events).await {
            Event::Requested { cursor, .. } | Event::Resolved { cursor, .. } => seen.push(cursor),
            other => panic!("unexpected {other:?}"),
        }
    }
    seen
}

fn assert_no_gap_no_duplicate(seen: &[String], reference: &[String]) {
    let unique: HashSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len(), "an event was delivered twice");
    assert_eq!(
        seen, reference,
        "the resumed stream differs from an unbroken one"
    );
}

async fn rule_2_a_subscriber_dropped_mid_stream_resumes_without_gap_or_duplicate() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let mut reference = subscribed(&mut client, "s").await;
    let mut dropping = subscribed(&mut client, "s").await;
    let resolver = subscribed(&mut client, "s").await;
    let flowing = flow(&client, resolver);

    let mut seen = cursors(&mut dropping, 2 * ASKS / 3).await;
    drop(dropping);
    let mut resumed = client
        .subscribe(SubscribeRequest {
            session_id: "s".into(),
            after: seen.last().expect("a cursor").clone(),
            ..Default::default()
        })
        .await
        .expect("resume");
    // Events missed while away, then synced{resumed: true}, then live ones.
    loop {
        match next_event(&mut resumed).await {
            Event::Requested { cursor, .. } | Event::Resolved { cursor, .. } => seen.push(cursor),
            Event::Synced { resumed, .. } => {
                assert!(resumed, "the server still holds the cursor");
                break;
            }
            Event::Reset => panic!("reset instead of resume"),
            other => panic!("unexpected {other:?}"),
        }
    }
    let rest = 2 * ASKS - seen.len();
    seen.extend(cursors(&mut resumed, rest).await);
    within("the flow", flowing).await.expect("flow");
    assert_no_gap_no_duplicate(&seen, &cursors(&mut reference, 2 * ASKS).await);
}
on_every_backend!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    rule_2_a_subscriber_dropped_mid_stream_resumes_without_gap_or_duplicate
);

async fn rule_2_follow_reconnects_on_its_own_and_resumes_from_its_cursor() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let mut reference = subscribed(&mut client, "s").await;
    let resolver = subscribed(&mut client, "s").await;

    // The follower reaches the server through a proxy whose connections we cut.
    let proxy = Balancer::start(vec![server.addr]).await;
    let follower = Client::connect_lazy(proxy.url()).expect("client");
    let mut following = follower.follow(SubscribeRequest {
        session_id: "s".into(),
        ..Default::default()
    });
    match within("synced", following.next()).await {
        Some(Ok(Event::Synced { .. })) => {}
        other => panic!("expected synced, got {other:?}"),
    }
    let flowing = flow(&client, resolver);
    let mut seen = Vec::new();
    let mut resumes = 0;
    let mut cut_at = vec![ASKS, ASKS / 2];
    // Until every event is seen and each cut was resumed from (the last cut may come
    // after the last event reached the client: its resume then brings no event).
    while seen.len() < 2 * ASKS || resumes < 2 {
        if cut_at.last() == Some(&seen.len()) {
            cut_at.pop();
            proxy.cut();
        }
        match within("an event", following.next()).await {
            Some(Ok(Event::Requested { cursor, .. } | Event::Resolved { cursor, .. })) => {
                seen.push(cursor)
            }
            Some(Ok(Event::Synced { resumed, .. })) => {
                assert!(resumed, "follow resumes from its cursor");
                resumes += 1;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    within("the flow", flowing).await.expect("flow");
    assert!(resumes >= 2, "each cut made follow reconnect and resume");
    assert_eq!(
        *following.connection().borrow(),
        Connection::Connected,
        "connected again after the last resume"
    );
    assert_no_gap_no_duplicate(&seen, &cursors(&mut reference, 2 * ASKS).await);
}
on_every_backend!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    rule_2_follow_reconnects_on_its_own_and_resumes_from_its_cursor
);

/// `Following::connection` says when the subscription is lost (for a UI's status line)
/// and when it is back.
async fn follow_reports_its_connection() {
    let server = TestServer::start().await;
    let follower = server.client().await;
    let following = follower.follow(SubscribeRequest {
        session_id: "s".into(),
        ..Default::default()
    });
    let mut connection = following.connection();
    let mut following = following;
    match within("synced", following.next()).await {
        Some(Ok(Event::Synced { .. })) => {}
        other => panic!("expected synced, got {other:?}"),
    }
    assert_eq!(*connection.borrow(), Connection::Connected);
    server.stop().await.expect("stop");
    within(
        "the subscription reported lost",
        connection.wait_for(|c| matches!(c, Connection::Reconnecting(_))),
    )
    .await
    .expect("the follow task runs");
    drop(following);
}
on_every_backend!(
    #[tokio::test]
    follow_reports_its_connection
);

async fn rule_2_a_cursor_from_before_a_restart_gets_reset() {
    let first = TestServer::start().await;
    let mut client = first.client().await;
    let mut events = client.subscribe_session("s").await.expect("subscribe");
    let Event::Synced { cursor, .. } = next_event(&mut events).await else {
        panic!("expected synced");
    };
    drop(events);
    first.stop().await.expect("stop");

    let second = TestServer::start().await;
    let mut client = second.client().await;
    let mut events = client
        .subscribe(SubscribeRequest {
            session_id: "s".into(),
            after: cursor,
            ..Default::default()
        })
        .await
        .expect("subscribe");
    assert_eq!(next_event(&mut events).await, Event::Reset);
    assert!(until_synced(&mut events).await.is_empty());
}
on_every_backend!(
    #[tokio::test]
    rule_2_a_cursor_from_before_a_restart_gets_reset
);
