//! ABORTED when the asking side gives up (its call cancelled, or its process killed so
//! the connection drops), EXPIRED at the caller's deadline; a late Answer then gets
//! NOT_PENDING naming the resolution.

use std::time::Duration;

use askgate_client::{Ask, Client, Event, Events, Reason, answer, question};
use askgate_proto::v1::{Resolution, Resolved};

use crate::support::{TestServer, askgate, next_event, next_requested, subscribed, within};

/// No reattach grace: a dropped call aborts its ask at once.
fn yes_no(session: &str) -> Ask {
    Ask::new(session)
        .question(question("ok", "Proceed?").choice("yes").choice("no"))
        .reattach_grace(Duration::ZERO)
}

async fn next_resolved(events: &mut Events) -> Resolved {
    loop {
        if let Event::Resolved { resolved, .. } = next_event(events).await {
            return resolved;
        }
    }
}

async fn assert_late_answer_not_pending(client: &mut Client, rpc_id: &str, resolution: &str) {
    let err = client
        .answer("s", rpc_id, vec![answer::select("ok", ["yes"])])
        .await
        .expect_err("late answer");
    assert_eq!(err.reason(), Reason::NotPending);
    assert_eq!(err.metadata("resolution"), Some(resolution));
}

async fn a_cancelled_call_aborts_its_ask() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let mut events = subscribed(&mut client, "s").await;
    let mut asker = client.clone();
    let call = tokio::spawn(async move { asker.ask(yes_no("s")).await });
    let rpc_id = next_requested(&mut events).await;
    call.abort();

    let resolved = next_resolved(&mut events).await;
    assert_eq!(resolved.rpc_id, rpc_id);
    assert_eq!(resolved.reason(), Resolution::Aborted);
    assert_late_answer_not_pending(&mut client, &rpc_id, "ABORTED").await;
}
on_every_backend!(
    #[tokio::test]
    a_cancelled_call_aborts_its_ask
);

async fn a_killed_client_process_aborts_its_ask() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let mut events = subscribed(&mut client, "s").await;
    let url = server.url();
    let mut process = askgate(&[
        "ask",
        "--reattach-grace",
        "0s",
        "--addr",
        &url,
        "--session",
        "s",
        "--question",
        "Deploy?",
    ]);
    let rpc_id = next_requested(&mut events).await;
    process.start_kill().expect("kill the client");
    within("the client to die", process.wait())
        .await
        .expect("wait");

    let resolved = next_resolved(&mut events).await;
    assert_eq!(resolved.rpc_id, rpc_id);
    assert_eq!(resolved.reason(), Resolution::Aborted);
    assert_late_answer_not_pending(&mut client, &rpc_id, "ABORTED").await;
}
on_every_backend!(
    #[tokio::test]
    a_killed_client_process_aborts_its_ask
);

async fn a_short_deadline_expires_the_ask() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let mut events = subscribed(&mut client, "s").await;
    let mut asker = client.clone();
    let call = tokio::spawn(async move {
        asker
            .ask(yes_no("s").timeout(Duration::from_millis(200)))
            .await
    });
    let rpc_id = next_requested(&mut events).await;
    let err = within("the ask", call)
        .await
        .expect("join")
        .expect_err("expired");
    assert_eq!(
        (err.code(), err.reason()),
        (tonic::Code::DeadlineExceeded, Reason::AskExpired)
    );

    let resolved = next_resolved(&mut events).await;
    assert_eq!(resolved.rpc_id, rpc_id);
    assert_eq!(resolved.reason(), Resolution::Expired);
    assert_late_answer_not_pending(&mut client, &rpc_id, "EXPIRED").await;
}
on_every_backend!(
    #[tokio::test]
    a_short_deadline_expires_the_ask
);
