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

/// `Abort` names the ask by the request_id it was asked with, in its session. One that
/// overtakes its Ask is recorded: the Ask, arriving later, ends ASK_ABORTED at once and
/// no one ever sees it. An abort of an ask already resolved is NOT_PENDING.
async fn abort_is_by_request_id_and_for_agents() {
    use askgate_client::{Ask, Reason, question};
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let mut events = subscribed(&mut client, "s").await;
    let ask = |request_id: &str| {
        Ask::new("s")
            .question(question("q", "ok?"))
            .request_id(request_id)
    };
    let mut asker = client.clone();
    let first = ask("req-1");
    let call = tokio::spawn(async move { asker.ask(first).await });
    let rpc_1 = next_requested(&mut events).await;
    // Another session's req-1 is another request: recorded there, this one untouched.
    client.abort("t", "req-1").await.expect("recorded in t");
    client.abort("s", "req-1").await.expect("abort");
    let outcome = within("the aborted call", call).await.expect("join");
    assert_eq!(outcome.expect_err("aborted").reason(), Reason::AskAborted);
    let again = client
        .abort("s", "req-1")
        .await
        .expect_err("already resolved");
    assert_eq!(again.reason(), Reason::NotPending);

    // The abort first, then its Ask: refused at once, never broadcast.
    client.abort("s", "req-2").await.expect("recorded");
    let late = within("the overtaken ask", client.ask(ask("req-2")))
        .await
        .expect_err("aborted");
    assert_eq!(late.reason(), Reason::AskAborted);
    // The next event after req-1's resolution is a fresh ask's, not req-2's.
    let mut asker = client.clone();
    let marker = ask("req-3");
    let _marker = tokio::spawn(async move { asker.ask(marker).await });
    let mut seen = Vec::new();
    loop {
        match crate::support::next_event(&mut events).await {
            askgate_client::Event::Requested { requested, .. } => {
                seen.push(requested.rpc_id);
                break;
            }
            askgate_client::Event::Resolved { resolved, .. } => {
                assert_eq!(resolved.rpc_id, rpc_1, "only req-1 resolved before req-3");
            }
            _ => {}
        }
    }
    assert_eq!(seen.len(), 1);
    assert_eq!(client.list_pending("s").await.expect("list").len(), 1);
}
on_every_backend!(
    #[tokio::test]
    abort_is_by_request_id_and_for_agents
);

/// However an abort falls against its ask's registration (before the Ask reaches the
/// server, racing it, or once it is pending), when the tool reports ASK_ABORTED the ask
/// is gone: nothing is pending, and nothing the tool asked is left for a human.
async fn an_abort_before_during_or_after_registration_leaves_nothing_answerable() {
    use askgate_client::{Ask, Event, question};
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let mut events = subscribed(&mut client, "s").await;
    for when in ["before", "during", "after"] {
        let tool = AskUserQuestion::new(client.clone(), "s");
        let (fire, fired) = tokio::sync::oneshot::channel::<()>();
        let run = tokio::spawn(async move {
            tool.run(ONE_QUESTION, async {
                let _ = fired.await;
            })
            .await
        });
        match when {
            "before" => {}
            "during" => tokio::task::yield_now().await,
            _ => {
                next_requested(&mut events).await;
            }
        }
        let _ = fire.send(());
        let output = within("the aborted run", run).await.expect("join");
        assert_eq!(
            output.text, "Error: ask_user_question was aborted before the user answered",
            "{when}"
        );
        assert!(
            client.list_pending("s").await.expect("list").is_empty(),
            "{when}: still pending after the tool said ASK_ABORTED"
        );
        // Whatever was broadcast is resolved before the next ask shows up.
        let marker = Ask::new("s")
            .question(question("marker", "Next?"))
            .request_id(&format!("marker-{when}"));
        let mut asker = client.clone();
        let marker_call = tokio::spawn(async move { asker.ask(marker).await });
        let mut open: Vec<String> = Vec::new();
        loop {
            match crate::support::next_event(&mut events).await {
                Event::Requested { requested, .. } if requested.questions[0].id == "marker" => {
                    assert!(open.is_empty(), "{when}: {open:?} left answerable");
                    client
                        .cancel("s", &requested.rpc_id, "")
                        .await
                        .expect("cancel the marker");
                    break;
                }
                Event::Requested { requested, .. } => open.push(requested.rpc_id),
                Event::Resolved { resolved, .. } => open.retain(|r| *r != resolved.rpc_id),
                _ => {}
            }
        }
        let _ = within("the marker", marker_call).await;
        // The marker's resolution, read so the next round starts clean.
        loop {
            if let Event::Resolved { .. } = crate::support::next_event(&mut events).await {
                break;
            }
        }
    }
}
on_every_backend!(
    #[tokio::test]
    an_abort_before_during_or_after_registration_leaves_nothing_answerable
);
