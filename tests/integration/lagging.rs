//! A subscriber that stops reading while 10,000 events flow gets `reset` and a correct
//! snapshot instead of a silent gap, and the server does not queue the flood for it.

use std::{collections::HashSet, sync::Arc};

use askgate_client::{Ask, Event, Reason, answer, question};
use askgate_server::{ServerConfig, backend::StateConfig};
use tokio::sync::Semaphore;

use crate::support::{TestServer, next_event, next_requested, subscribed, within};

/// 5,000 asks answered: 10,000 events.
const FLOOD_ASKS: usize = 5_000;
const EVENTS: usize = 2 * FLOOD_ASKS;
/// Asks left pending for the snapshot.
const LEFT_PENDING: usize = 3;
const SUBSCRIBER_BUFFER: usize = 64;
const STALLED_WINDOW: u32 = 65_535;

async fn a_stalled_subscriber_gets_reset_and_the_current_snapshot() {
    let server = TestServer::start_with(ServerConfig {
        settings: StateConfig {
            subscriber_buffer: SUBSCRIBER_BUFFER,
            ..StateConfig::default()
        },
        ..crate::support::test_config()
    })
    .await;
    // The stalled subscriber has a connection of its own (an unread stream holds the
    // connection's flow-control window), with the HTTP/2 default windows of 64 KiB
    // rather than hyper's 2 MiB, so that the transport buffers little.
    let channel = within(
        "connect",
        tonic::transport::Endpoint::from_shared(server.url())
            .expect("url")
            .initial_stream_window_size(STALLED_WINDOW)
            .initial_connection_window_size(STALLED_WINDOW)
            .connect(),
    )
    .await
    .expect("connect");
    let mut stalled_client = askgate_client::Client::new(channel);
    let mut stalled = subscribed(&mut stalled_client, "flood").await;

    let mut client = server.client().await;
    let mut resolver_events = subscribed(&mut client, "flood").await;
    // The resolver reads as fast as it can, yet with so small a buffer it may fall
    // behind too: then it gets reset and a snapshot, and may see an ask twice.
    let resolver = {
        let client = client.clone();
        tokio::spawn(async move {
            let mut seen = HashSet::new();
            while seen.len() < FLOOD_ASKS {
                let rpc_id = next_requested(&mut resolver_events).await;
                if !seen.insert(rpc_id.clone()) {
                    continue;
                }
                let mut client = client.clone();
                tokio::spawn(async move {
                    match client
                        .answer("flood", &rpc_id, vec![answer::select("q", ["yes"])])
                        .await
                    {
                        Ok(()) => {}
                        Err(e) => assert_eq!(e.reason(), Reason::NotPending, "{e}"),
                    }
                });
            }
        })
    };
    // Questions of about 1 KiB make the flood about 6 MiB on the wire.
    let text = "Is this fine? ".repeat(70);
    let permits = Arc::new(Semaphore::new(64));
    let mut askers = Vec::new();
    for _ in 0..FLOOD_ASKS {
        let permit = permits.clone().acquire_owned().await.expect("semaphore");
        let mut client = client.clone();
        let ask = Ask::new("flood").question(question("q", &text).choice("yes"));
        askers.push(tokio::spawn(async move {
            let _permit = permit;
            client.ask(ask).await.expect("answered");
        }));
    }
    for asker in askers {
        within("an asker", asker).await.expect("asker");
    }
    within("resolver", resolver).await.expect("resolver");

    // Leave a few asks pending: the snapshot must hold exactly these.
    let mut holders = Vec::new();
    for i in 0..LEFT_PENDING {
        let mut asker = client.clone();
        let ask = Ask::new("flood").question(question(&format!("p{i}"), "still there?"));
        holders.push(tokio::spawn(async move { asker.ask(ask).await }));
    }
    let pending: HashSet<String> = within("the holders to be pending", async {
        loop {
            let pending = client.list_pending("flood").await.expect("list");
            if pending.len() == LEFT_PENDING {
                break pending.into_iter().map(|r| r.rpc_id).collect();
            }
            tokio::task::yield_now().await;
        }
    })
    .await;

    // Now read the stalled stream: what the transport still held, then the reset.
    let mut before_reset = 0usize;
    loop {
        match next_event(&mut stalled).await {
            Event::Reset => break,
            Event::Requested { .. } | Event::Resolved { .. } => before_reset += 1,
            Event::Synced { .. } => panic!("synced before reset"),
            other => panic!("unexpected {other:?}"),
        }
        assert!(
            before_reset < EVENTS,
            "all {EVENTS} events were queued: no reset"
        );
    }
    // The server queued at most SUBSCRIBER_BUFFER events for the subscriber; the rest
    // of what arrived sat in HTTP/2 buffers: hyper's 400 KiB send buffer and the
    // client's 64 KiB window, under 800 events at ~650 bytes an event on average. Most
    // of the flood was never queued for the stalled subscriber.
    assert!(
        before_reset < EVENTS / 4,
        "{before_reset} of {EVENTS} events were queued for a stalled subscriber"
    );
    // From the reset on, the subscriber rebuilds its view: the snapshot, then live
    // events (and, if it fell behind again, another reset and snapshot). Resolving one
    // held ask marks the end: once its `resolved` arrives, everything before it has;
    // so has it once a snapshot taken after it is synced: one without the marker but
    // with the other held asks (a slow engine may have fallen behind mid-flood too, and
    // a snapshot from then holds neither).
    let marker = pending.iter().next().expect("pending").clone();
    client.cancel("flood", &marker, "").await.expect("cancel");
    let mut expected = pending.clone();
    expected.remove(&marker);
    let mut view: HashSet<String> = HashSet::new();
    loop {
        match next_event(&mut stalled).await {
            Event::Reset => view.clear(),
            Event::Requested { requested, .. } => {
                view.insert(requested.rpc_id);
            }
            Event::Resolved { resolved, .. } => {
                view.remove(&resolved.rpc_id);
                if resolved.rpc_id == marker {
                    break;
                }
            }
            Event::Synced { .. } if !view.contains(&marker) && view.is_superset(&expected) => {
                break;
            }
            _ => {}
        }
    }
    assert_eq!(
        view, expected,
        "the rebuilt view is exactly what is pending"
    );
    for holder in holders {
        holder.abort();
    }
}
on_every_backend!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    a_stalled_subscriber_gets_reset_and_the_current_snapshot
);
