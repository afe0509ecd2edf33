//! Graceful shutdown with pending asks and open streams: every Ask is answered
//! UNAVAILABLE / SHUTTING_DOWN, health reports NOT_SERVING, every stream ends, and the
//! server stops on its own well before its drain timeout (no long-lived stream holds it
//! open). What becomes of the asks depends on whether someone can take them: on memory
//! they are DISPOSED; over Redis they are handed over, still pending, for their agents
//! to reattach through another node; on sqlite they stay pending for the next start.

use std::time::Duration;

use askgate_client::{Ask, Event, Reason, question};
use askgate_proto::v1::Resolution;
use askgate_server::ServerConfig;
use askgate_server::server::TransportConfig;
use tokio_stream::StreamExt;
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};

use crate::support::{Backend, TestServer, next_requested, subscribed, until_synced, within};

async fn shutdown_disposes_pending_asks_and_ends_every_stream() {
    let server = TestServer::start_with(ServerConfig {
        transport: TransportConfig {
            // Far longer than the test's bounded wait: the server must stop by itself.
            drain_timeout: Duration::from_secs(600),
            ..crate::support::test_config().transport
        },
        ..crate::support::test_config()
    })
    .await;
    let mut client = server.client().await;
    let mut sessions = Vec::new();
    for s in ["a", "b"] {
        sessions.push(subscribed(&mut client, s).await);
    }
    let mut all = client.subscribe_all().await.expect("subscribe all");
    until_synced(&mut all).await;

    let mut health = HealthClient::new(
        tonic::transport::Endpoint::from_shared(server.url())
            .expect("url")
            .connect()
            .await
            .expect("connect"),
    );
    let mut health_watch = health
        .watch(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .expect("watch")
        .into_inner();
    let first = within("health", health_watch.next())
        .await
        .expect("status")
        .expect("ok");
    assert_eq!(first.status(), ServingStatus::Serving);

    let mut asks = Vec::new();
    let mut pending = Vec::new();
    for i in 0..4 {
        let (session, events) = match i % 2 {
            0 => ("a", &mut sessions[0]),
            _ => ("b", &mut sessions[1]),
        };
        let mut asker = client.clone();
        // One attempt: the test observes the server's own answer, not a retry.
        let ask = Ask::new(session)
            .question(question("q", "still there?"))
            .no_retry();
        asks.push(tokio::spawn(async move { asker.ask(ask).await }));
        pending.push(next_requested(events).await);
    }

    let mut lease = client.attach("agent", "").await.expect("attach");
    let peer = server.start_peer().await;

    let stopping = tokio::spawn(server.stop());
    assert!(
        within("the agent lease to end", lease.ended())
            .await
            .is_none(),
        "the server ends agent leases itself"
    );

    for ask in asks {
        let err = within("an ask", ask)
            .await
            .expect("join")
            .expect_err("disposed");
        assert_eq!(
            (err.code(), err.reason()),
            (tonic::Code::Unavailable, Reason::ShuttingDown)
        );
    }
    let mut disposed = Vec::new();
    for events in sessions.iter_mut().chain([&mut all]) {
        loop {
            match within("the stream to end", events.next()).await {
                Some(Ok(Event::Resolved { resolved, .. })) => {
                    assert_eq!(resolved.reason(), Resolution::Disposed);
                    disposed.push(resolved.rpc_id);
                }
                // The all_sessions stream also carries the asks' requested events.
                Some(Ok(Event::Requested { requested, .. })) => {
                    assert!(pending.contains(&requested.rpc_id));
                }
                Some(Ok(other)) => panic!("unexpected {other:?}"),
                Some(Err(e)) => panic!("the stream failed instead of ending: {e}"),
                None => break,
            }
        }
    }
    disposed.sort();
    let mut expected: Vec<String> = match Backend::current() {
        Backend::Memory => pending.iter().chain(&pending).cloned().collect(),
        // Asks with a request_id (every SDK's) are handed over: to the other nodes on
        // Redis, to the next start on sqlite (docs/operations.md, "Shutdown").
        Backend::Redis | Backend::Cluster | Backend::Sqlite => Vec::new(),
    };
    expected.sort();
    assert_eq!(
        disposed, expected,
        "on memory, each session stream and the all_sessions stream saw every DISPOSED; \
         on redis and sqlite, none (handed over)"
    );

    let status = within("health", health_watch.next()).await;
    let status = status.expect("a last status").expect("ok");
    assert_eq!(status.status(), ServingStatus::NotServing);
    assert!(
        within("the health watch to end", health_watch.next())
            .await
            .is_none(),
        "the server ends health watches itself"
    );
    within("the server to stop", stopping)
        .await
        .expect("join")
        .expect("clean stop");

    if let Some(peer) = peer {
        let mut client = peer.client().await;
        let mut handed_over = Vec::new();
        for s in ["a", "b"] {
            let asks = client
                .list_pending(s)
                .await
                .expect("list on the other node");
            handed_over.extend(asks.into_iter().map(|r| r.rpc_id));
        }
        handed_over.sort();
        let mut expected = pending.clone();
        expected.sort();
        assert_eq!(
            handed_over, expected,
            "every ask is still pending for reattach"
        );
    }
}
on_every_backend!(
    #[tokio::test]
    shutdown_disposes_pending_asks_and_ends_every_stream
);
