//! docs/protocol.md, Semantics 10, idempotent reattach: an asker that dies and comes back with
//! the same request_id gets the human's answer (within the reattach grace), or the
//! recorded ABORTED without one; a retried ask never produces a second `requested`.
//! Also the feedback rules: a cancel reason reaches the agent, and a late answer learns
//! how and by whom the ask was resolved.

use askgate_client::{Ask, Event, Events, Reason, answer, question};
use serde_json::Value;

use crate::support::{TestServer, askgate, finish, next_event, next_requested, subscribed, within};

fn ask_process(url: &str, request_id: &str, grace: &str) -> tokio::process::Child {
    askgate(&[
        "ask",
        "--addr",
        url,
        "--session",
        "s",
        "--question",
        "Deploy?",
        "--id",
        "deploy",
        "--option",
        "yes",
        "--option",
        "no",
        "--request-id",
        request_id,
        "--reattach-grace",
        grace,
    ])
}

/// No further event arrives within a short while (used after the last expected one).
async fn assert_quiet(events: &mut Events) {
    use tokio_stream::StreamExt;
    let quiet = tokio::time::timeout(std::time::Duration::from_millis(200), events.next()).await;
    assert!(quiet.is_err(), "unexpected event: {quiet:?}");
}

async fn rule_10_a_killed_asker_reattaches_by_request_id_and_gets_the_answer() {
    let server = TestServer::start().await;
    let url = server.url();
    let mut client = server.client().await;
    let mut events = subscribed(&mut client, "s").await;

    let mut first = ask_process(&url, "deploy-42", "30s");
    let rpc_id = next_requested(&mut events).await;
    first.start_kill().expect("kill");
    within("the asker to die", first.wait())
        .await
        .expect("wait");

    // The human answers while no call waits: the answer is kept for the reattach.
    client
        .answer("s", &rpc_id, vec![answer::select("deploy", ["no"])])
        .await
        .expect("answer within the grace");
    let (code, stdout, stderr) = finish(ask_process(&url, "deploy-42", "30s")).await;
    assert_eq!(code, 0, "{stderr}");
    let response: Value = serde_json::from_str(stdout.trim()).expect("JSON");
    assert_eq!(response["rpc_id"], rpc_id.as_str());
    assert_eq!(response["answers"][0]["selected"][0], "no");

    // One requested, one resolved, nothing else: the reattach asked nothing new.
    assert!(matches!(
        next_event(&mut events).await,
        Event::Resolved { .. }
    ));
    assert_quiet(&mut events).await;
}
on_every_backend!(
    #[tokio::test]
    rule_10_a_killed_asker_reattaches_by_request_id_and_gets_the_answer
);

async fn rule_10_without_a_grace_a_killed_asker_gets_aborted_on_reattach() {
    let server = TestServer::start().await;
    let url = server.url();
    let mut client = server.client().await;
    let mut events = subscribed(&mut client, "s").await;
    let mut first = ask_process(&url, "deploy-43", "0s");
    let rpc_id = next_requested(&mut events).await;
    first.start_kill().expect("kill");
    within("the asker to die", first.wait())
        .await
        .expect("wait");
    match next_event(&mut events).await {
        Event::Resolved { resolved, .. } => assert_eq!(resolved.rpc_id, rpc_id),
        other => panic!("expected resolved, got {other:?}"),
    }
    let (code, _, stderr) = finish(ask_process(&url, "deploy-43", "0s")).await;
    assert_eq!(code, 5, "the recorded outcome is ASK_ABORTED: {stderr}");
    assert!(stderr.contains("ASK_ABORTED"), "{stderr}");
    assert_quiet(&mut events).await;
}
on_every_backend!(
    #[tokio::test]
    rule_10_without_a_grace_a_killed_asker_gets_aborted_on_reattach
);

async fn rule_10_a_retried_ask_never_produces_a_second_requested() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let mut events = subscribed(&mut client, "s").await;
    let ask = Ask::new("s")
        .question(question("q", "Proceed?").choice("yes"))
        .request_id("same");
    let calls: Vec<_> = (0..3)
        .map(|_| {
            let (mut client, ask) = (client.clone(), ask.clone());
            tokio::spawn(async move { client.ask(ask).await })
        })
        .collect();
    let rpc_id = next_requested(&mut events).await;
    // Every call joins the one ask (or, arriving after the answer, gets its outcome).
    client
        .answer("s", &rpc_id, vec![answer::select("q", ["yes"])])
        .await
        .expect("answer");
    for call in calls {
        let response = within("a call", call)
            .await
            .expect("join")
            .expect("answered");
        assert_eq!(response.rpc_id, rpc_id);
    }
    // And a retry after the resolution gets the recorded outcome.
    let again = client.ask(ask).await.expect("recorded outcome");
    assert_eq!(again.rpc_id, rpc_id);
    assert!(matches!(
        next_event(&mut events).await,
        Event::Resolved { .. }
    ));
    assert_quiet(&mut events).await;
}
on_every_backend!(
    #[tokio::test]
    rule_10_a_retried_ask_never_produces_a_second_requested
);

async fn the_cancel_reason_reaches_the_agent_and_a_late_answer_learns_who_resolved_it() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let mut events = subscribed(&mut client, "s").await;
    let mut asker = client.clone();
    let call = tokio::spawn(async move {
        asker
            .ask(Ask::new("s").question(question("q", "Proceed?").choice("yes")))
            .await
    });
    let rpc_id = next_requested(&mut events).await;
    client
        .cancel("s", &rpc_id, "not on a Friday")
        .await
        .expect("cancel");
    let err = within("the ask", call)
        .await
        .expect("join")
        .expect_err("cancelled");
    assert_eq!(err.reason(), Reason::AskCancelled);
    assert_eq!(
        err.message(),
        "the user cancelled the question: not on a Friday"
    );
    assert_eq!(err.metadata("reason"), Some("not on a Friday"));

    let late = client
        .answer("s", &rpc_id, vec![answer::select("q", ["yes"])])
        .await
        .expect_err("too late");
    assert_eq!(late.reason(), Reason::NotPending);
    assert_eq!(late.metadata("resolution"), Some("CANCELLED"));
    assert_eq!(late.metadata("resolved_by"), Some("anonymous"));
    let never = client
        .answer("s", "no-such-rpc", vec![answer::select("q", ["yes"])])
        .await
        .expect_err("never existed");
    assert_eq!(never.reason(), Reason::NotPending);
    assert_eq!(never.metadata("resolution"), None);
}
on_every_backend!(
    #[tokio::test]
    the_cancel_reason_reaches_the_agent_and_a_late_answer_learns_who_resolved_it
);
