//! The model-facing `ask_user_question` tool through a real server: the exact result
//! text for an answer and for each error the model can meet.

use askgate_client::{Client, Events, answer, tool::AskUserQuestion};

use crate::support::{TestServer, next_requested, subscribed, within};

const ONE_QUESTION: &str = r#"{"questions":[{"id":"db","question":"Which database?","header":"Database",
    "options":[{"label":"Postgres","description":"relational"},{"label":"SQLite"}]}]}"#;

/// Runs the tool in the background; returns its result once `resolve` has run on the
/// question it asked.
async fn call_and_resolve<F, Fut>(tool: AskUserQuestion, events: &mut Events, resolve: F) -> String
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let call = tokio::spawn(async move { tool.call(ONE_QUESTION).await });
    let rpc_id = next_requested(events).await;
    resolve(rpc_id).await;
    within("the tool call", call).await.expect("join")
}

async fn the_answer_comes_back_as_compact_json() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let mut events = subscribed(&mut client, "s").await;
    let ui = client.clone();
    let result = call_and_resolve(
        AskUserQuestion::new(client, "s"),
        &mut events,
        |rpc_id| async move {
            let mut ui = ui;
            ui.answer("s", &rpc_id, vec![answer::select("db", ["Postgres"])])
                .await
                .expect("answer");
        },
    )
    .await;
    assert_eq!(
        result,
        r#"{"answers":[{"id":"db","selected":["Postgres"]}]}"#
    );
}
on_every_backend!(
    #[tokio::test]
    the_answer_comes_back_as_compact_json
);

async fn a_cancel_returns_the_users_reason() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let mut events = subscribed(&mut client, "s").await;
    let ui = client.clone();
    let result = call_and_resolve(
        AskUserQuestion::new(client, "s"),
        &mut events,
        |rpc_id| async move {
            let mut ui = ui;
            ui.cancel("s", &rpc_id, "use the existing cluster")
                .await
                .expect("cancel");
        },
    )
    .await;
    assert_eq!(
        result,
        "Error: the user cancelled the question: use the existing cluster"
    );
}
on_every_backend!(
    #[tokio::test]
    a_cancel_returns_the_users_reason
);

async fn an_agent_detaching_mid_question_returns_aborted() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let mut events = subscribed(&mut client, "s").await;
    let lease = client.attach("agent", "").await.expect("attach");
    let tool = AskUserQuestion::new(client.clone(), "s").agent("agent", lease.incarnation());
    let result = call_and_resolve(tool, &mut events, |_| async move { drop(lease) }).await;
    assert_eq!(
        result,
        "Error: ask_user_question was aborted before the user answered"
    );
}
on_every_backend!(
    #[tokio::test]
    an_agent_detaching_mid_question_returns_aborted
);

async fn refusals_return_the_documented_messages() {
    let server = TestServer::start().await;
    let mut client: Client = server.client().await;
    let _events = subscribed(&mut client, "attended").await;
    let attended = AskUserQuestion::new(client.clone(), "attended");

    for nothing in [r#"{"questions":[]}"#, "{}"] {
        assert_eq!(
            attended.call(nothing).await,
            "Error: ask_user_question requires at least one question",
            "{nothing}"
        );
    }
    assert_eq!(
        AskUserQuestion::new(client.clone(), "nobody-here")
            .call(ONE_QUESTION)
            .await,
        "Error: no user-questions provider is registered"
    );
    assert_eq!(
        attended
            .clone()
            .agent("ghost", "1")
            .call(ONE_QUESTION)
            .await,
        "Error: human interaction requires the exact live calling agent when an agent is supplied"
    );
    let _parent = client.attach("parent", "").await.expect("parent");
    let child = client.attach("child", "parent").await.expect("child");
    assert_eq!(
        attended
            .clone()
            .agent("child", child.incarnation())
            .call(ONE_QUESTION)
            .await,
        "Error: human interaction is unavailable while the calling agent is owned by another live agent; include the unresolved question or decision in the child agent's final result"
    );
    // Any other failure: the server's message.
    assert_eq!(
        attended
            .call(r#"{"questions":[{"id":"","question":"Why?"}]}"#)
            .await,
        "Error: invalid request: questions[0].id: must not be empty"
    );
    // Fields of other tools' schemas are refused before anything is asked.
    let refused = attended
        .call(r#"{"questions":[{"id":"a","question":"Q?","options":[{"label":"x","value":"1"}]}]}"#)
        .await;
    // The refusal names the field, and not serde's position in a line of JSON.
    assert!(
        refused.starts_with(
            "Error: invalid arguments: questions[0].options[0].value: unknown field `value`"
        ),
        "{refused}"
    );
    assert!(!refused.contains("at line"), "{refused}");
}
on_every_backend!(
    #[tokio::test]
    refusals_return_the_documented_messages
);

/// An abort of the tool's run resolves its ask ABORTED at once (not after the reattach
/// grace), returns the fixed text, and says so as data as well.
async fn an_abort_resolves_the_ask_aborted_at_once() {
    use askgate_client::{Event, Reason, proto::Resolution};
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let mut events = subscribed(&mut client, "s").await;
    let tool = AskUserQuestion::new(client.clone(), "s");
    let (abort, aborted) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(async move {
        tool.run(ONE_QUESTION, async {
            let _ = aborted.await;
        })
        .await
    });
    let rpc_id = next_requested(&mut events).await;
    abort.send(()).expect("the run is waiting");
    let output = within("the aborted run", run).await.expect("join");
    assert_eq!(
        output.text,
        "Error: ask_user_question was aborted before the user answered"
    );
    let error = output.error.expect("an error");
    assert_eq!(
        (error.reason, error.name(), error.code),
        (Reason::AskAborted, "ASK_ABORTED", tonic::Code::Cancelled)
    );
    // Resolved when the run returned, although the tool's asks carry a reattach grace.
    assert!(client.list_pending("s").await.expect("list").is_empty());
    loop {
        if let Event::Resolved { resolved, .. } = crate::support::next_event(&mut events).await {
            assert_eq!(resolved.rpc_id, rpc_id);
            assert_eq!(resolved.reason(), Resolution::Aborted);
            break;
        }
    }
    // A human's late answer finds nothing.
    let late = client
        .answer("s", &rpc_id, vec![answer::select("db", ["Postgres"])])
        .await
        .expect_err("late");
    assert_eq!(late.reason(), Reason::NotPending);
}
on_every_backend!(
    #[tokio::test]
    an_abort_resolves_the_ask_aborted_at_once
);

/// `Abort` names the ask by the request_id it was asked with; an unknown one is
/// NOT_PENDING, and only the agent side may abort.
async fn abort_is_by_request_id_and_for_agents() {
    use askgate_client::{Ask, Reason, question};
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let mut events = subscribed(&mut client, "s").await;
    let mut asker = client.clone();
    let call = tokio::spawn(async move {
        asker
            .ask(
                Ask::new("s")
                    .question(question("q", "ok?"))
                    .request_id("req-1"),
            )
            .await
    });
    next_requested(&mut events).await;
    let unknown = client.abort("s", "req-2").await.expect_err("unknown");
    assert_eq!(unknown.reason(), Reason::NotPending);
    let wrong_session = client.abort("t", "req-1").await.expect_err("other session");
    assert_eq!(wrong_session.reason(), Reason::NotPending);
    client.abort("s", "req-1").await.expect("abort");
    let outcome = within("the aborted call", call).await.expect("join");
    assert_eq!(outcome.expect_err("aborted").reason(), Reason::AskAborted);
    let again = client
        .abort("s", "req-1")
        .await
        .expect_err("already resolved");
    assert_eq!(again.reason(), Reason::NotPending);
}
on_every_backend!(
    #[tokio::test]
    abort_is_by_request_id_and_for_agents
);
