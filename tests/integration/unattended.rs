//! docs/protocol.md, Semantics 8, unattended sessions: FAIL (the default) refuses an ask
//! nobody follows, except within the reconnect grace; HOLD waits for a subscriber; one
//! exclusive subscriber per session.

use std::time::Duration;

use askgate_client::{Ask, Reason, answer, question};
use askgate_proto::v1::SubscribeRequest;
use askgate_server::{ServerConfig, backend::StateConfig};
use tonic::Code;

use crate::support::{TestServer, eventually, next_requested, subscribed, until_synced, within};

fn yes(session: &str) -> Ask {
    Ask::new(session).question(question("q", "Proceed?").choice("yes"))
}

fn with_grace(grace: Duration) -> ServerConfig {
    ServerConfig {
        settings: StateConfig {
            reconnect_grace: grace,
            ..StateConfig::default()
        },
        ..crate::support::test_config()
    }
}

/// Asks in `session` until one is refused NO_PROVIDER: its last subscriber's reconnect
/// grace is over (each ask expires at once if the session is still attended).
async fn until_unattended(client: &askgate_client::Client, session: &str) {
    eventually("the grace to run out", || {
        let mut client = client.clone();
        async move {
            let ask = yes(session).timeout(Duration::from_millis(100));
            match client.ask(ask).await {
                Err(e) if e.reason() == Reason::NoProvider => Some(()),
                _ => None,
            }
        }
    })
    .await;
}

/// Asks `ask` (in `session`) from `client`; once `events` (a subscription that sees
/// the session) shows it, answers "yes" through `answerer`, and waits for the answer;
/// the ask's rpc_id.
async fn asked_and_answered(
    client: &askgate_client::Client,
    answerer: &mut askgate_client::Client,
    events: &mut askgate_client::Events,
    (session, ask): (&str, Ask),
) -> String {
    let mut asker = client.clone();
    let call = tokio::spawn(async move { asker.ask(ask).await });
    let rpc_id = next_requested(events).await;
    answerer
        .answer(session, &rpc_id, vec![answer::select("q", ["yes"])])
        .await
        .expect("answer");
    within("the ask", call)
        .await
        .expect("join")
        .expect("answered");
    rpc_id
}

async fn rule_8_no_provider_when_nobody_follows_the_session() {
    let server = TestServer::start().await;
    let err = server
        .client()
        .await
        .ask(yes("s"))
        .await
        .expect_err("unattended");
    assert_eq!(
        (err.code(), err.reason()),
        (Code::FailedPrecondition, Reason::NoProvider)
    );
    assert_eq!(err.message(), "no user-questions provider is registered");
    // The seed's text for agents; the next step for a person, apart.
    let hint = err.hint().expect("a hint");
    assert!(
        hint.starts_with("nobody follows session s: start `askgate answer --session s`"),
        "{hint}"
    );
    assert!(
        err.to_string().ends_with(&format!("(hint: {hint})")),
        "{err}"
    );
}
on_every_backend!(
    #[tokio::test]
    rule_8_no_provider_when_nobody_follows_the_session
);

async fn rule_8_an_all_sessions_subscriber_attends_every_session() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let mut all = client.subscribe_all().await.expect("subscribe all");
    until_synced(&mut all).await;
    let asker = client.clone();
    asked_and_answered(&asker, &mut client, &mut all, ("any", yes("any"))).await;
}
on_every_backend!(
    #[tokio::test]
    rule_8_an_all_sessions_subscriber_attends_every_session
);

async fn rule_8_no_error_within_the_reconnect_grace_then_no_provider() {
    let server = TestServer::start_with(with_grace(Duration::from_millis(300))).await;
    let mut client = server.client().await;
    let events = subscribed(&mut client, "s").await;
    drop(events);
    // The subscriber just left: the session is still attended (answered within the
    // grace). The ask may come before or after this subscription: in its replay or live.
    let mut ui = server.client().await;
    let mut events = ui.subscribe_session("s").await.expect("subscribe");
    asked_and_answered(&client, &mut ui, &mut events, ("s", yes("s"))).await;
    drop(events);

    // Once the grace is over, nobody attends the session any more.
    until_unattended(&client, "s").await;
}
on_every_backend!(
    #[tokio::test]
    rule_8_no_error_within_the_reconnect_grace_then_no_provider
);

/// Semantics 10 before 8: an agent whose call dropped and who retries after the human
/// left gets the answer it was given; only a new ask is NO_PROVIDER. (Before, Redis
/// refused the retry NO_PROVIDER once nobody had followed the session for the grace.)
async fn a_retry_after_the_human_left_gets_its_recorded_answer() {
    let server = TestServer::start_with(with_grace(Duration::from_millis(200))).await;
    let mut client = server.client().await;
    let mut events = subscribed(&mut client, "s").await;
    let retried = yes("s").request_id("r");
    let asker = client.clone();
    let rpc_id = asked_and_answered(&asker, &mut client, &mut events, ("s", retried.clone())).await;
    drop(events);

    until_unattended(&client, "s").await;
    let again = client
        .ask(retried)
        .await
        .expect("the recorded answer, followed or not");
    assert_eq!(again.rpc_id, rpc_id);
    assert_eq!(again.answers[0].selected, ["yes"]);
}
on_every_backend!(
    #[tokio::test]
    a_retry_after_the_human_left_gets_its_recorded_answer
);

async fn rule_8_hold_waits_for_a_late_subscriber_who_answers() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let mut asker = client.clone();
    let call = tokio::spawn(async move { asker.ask(yes("late").hold_unattended()).await });
    let pending = crate::support::eventually("the held ask", || {
        let mut client = client.clone();
        async move {
            client
                .list_pending("late")
                .await
                .ok()
                .filter(|p| !p.is_empty())
        }
    })
    .await;
    // A subscriber arriving later gets the held question in its replay.
    let mut events = client.subscribe_session("late").await.expect("subscribe");
    let replay = until_synced(&mut events).await;
    assert_eq!(
        crate::support::requested_ids(&replay),
        [pending[0].rpc_id.clone()]
    );
    client
        .answer(
            "late",
            &pending[0].rpc_id,
            vec![answer::select("q", ["yes"])],
        )
        .await
        .expect("answer");
    let response = within("the ask", call)
        .await
        .expect("join")
        .expect("answered");
    assert_eq!(response.answers[0].selected, ["yes"]);
}
on_every_backend!(
    #[tokio::test]
    rule_8_hold_waits_for_a_late_subscriber_who_answers
);

async fn rule_8_duplicate_provider_for_a_second_exclusive_subscriber_until_the_first_ends() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let exclusive = SubscribeRequest {
        session_id: "s".into(),
        exclusive: true,
        ..Default::default()
    };
    let first = client
        .subscribe(exclusive.clone())
        .await
        .expect("first exclusive");
    let err = client
        .subscribe(exclusive.clone())
        .await
        .expect_err("second exclusive");
    assert_eq!(
        (err.code(), err.reason()),
        (Code::AlreadyExists, Reason::DuplicateProvider)
    );
    assert_eq!(
        err.message(),
        "another exclusive subscriber holds this session"
    );
    let mut plain = client
        .subscribe_session("s")
        .await
        .expect("non-exclusive is unaffected");
    until_synced(&mut plain).await;
    drop(first);
    eventually("the exclusive hold to be released", || {
        let mut client = client.clone();
        let exclusive = exclusive.clone();
        async move { client.subscribe(exclusive).await.ok() }
    })
    .await;
}
on_every_backend!(
    #[tokio::test]
    rule_8_duplicate_provider_for_a_second_exclusive_subscriber_until_the_first_ends
);
