//! docs/protocol.md, Semantics 7, live agents: only the exact live incarnation may ask, a
//! child of a live parent may not (the live link only), and a detach aborts the agent's
//! pending asks.

use askgate_client::{Ask, Client, Event, Reason, question};
use askgate_proto::v1::Resolution;
use tonic::Code;

use crate::support::{TestServer, eventually, next_event, next_requested, subscribed, within};

fn ask_as(agent_id: &str, incarnation: &str) -> Ask {
    Ask::new("s")
        .question(question("q", "Proceed?").choice("yes"))
        .agent(agent_id, incarnation)
}

/// Asks as the agent and reports the failure reason, or None if the ask was accepted
/// (then cancelled by `ui`, so nothing stays pending).
async fn outcome_of(client: &mut Client, ui: &mut Client, ask: Ask) -> Option<Reason> {
    let mut events = subscribed(ui, "s").await;
    let mut asker = client.clone();
    let mut call = tokio::spawn(async move { asker.ask(ask).await });
    tokio::select! {
        refused = &mut call => refused.expect("join").err().map(|e| e.reason()),
        rpc_id = next_requested(&mut events) => {
            ui.cancel("s", &rpc_id, "").await.expect("cancel");
            let cancelled = within("the ask", call).await.expect("join");
            assert_eq!(cancelled.expect_err("cancelled").reason(), Reason::AskCancelled);
            None
        }
    }
}

async fn rule_7_caller_not_live_for_never_attached_detached_and_stale_agents() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let mut ui = server.client().await;
    let _events = subscribed(&mut ui, "s").await;

    let err = client
        .ask(ask_as("ghost", "1"))
        .await
        .expect_err("never attached");
    assert_eq!(
        (err.code(), err.reason()),
        (Code::FailedPrecondition, Reason::CallerNotLive)
    );
    assert_eq!(
        err.message(),
        "human interaction requires the exact live calling agent when an agent is supplied"
    );

    let first = client.attach("agent", "").await.expect("attach");
    let first_incarnation = first.incarnation().to_owned();
    assert_eq!(
        outcome_of(&mut client, &mut ui, ask_as("agent", &first_incarnation)).await,
        None
    );

    // Re-attaching makes the first incarnation stale.
    let second = client.attach("agent", "").await.expect("re-attach");
    assert_ne!(second.incarnation(), first_incarnation);
    assert_eq!(
        outcome_of(&mut client, &mut ui, ask_as("agent", &first_incarnation)).await,
        Some(Reason::CallerNotLive)
    );
    let second_incarnation = second.incarnation().to_owned();
    assert_eq!(
        outcome_of(&mut client, &mut ui, ask_as("agent", &second_incarnation)).await,
        None
    );

    // Detached: the lease's stream is gone.
    drop(second);
    drop(first);
    eventually("the detach to take effect", || {
        let mut client = client.clone();
        let ask = ask_as("agent", &second_incarnation);
        async move {
            match client
                .ask(ask.timeout(std::time::Duration::from_millis(100)))
                .await
            {
                Err(e) if e.reason() == Reason::CallerNotLive => Some(()),
                _ => None,
            }
        }
    })
    .await;
}
on_every_backend!(
    #[tokio::test]
    rule_7_caller_not_live_for_never_attached_detached_and_stale_agents
);

async fn rule_7_delegated_caller_while_the_parent_is_live_then_the_child_may_ask() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let ui = server.client().await;
    let parent = client.attach("parent", "").await.expect("parent");
    let child = client.attach("child", "parent").await.expect("child");
    let child_incarnation = child.incarnation().to_owned();

    let err = client
        .ask(ask_as("child", &child_incarnation))
        .await
        .expect_err("delegated");
    assert_eq!(
        (err.code(), err.reason()),
        (Code::FailedPrecondition, Reason::DelegatedCaller)
    );
    assert_eq!(
        err.message(),
        "human interaction is unavailable while the calling agent is owned by another live agent; include the unresolved question or decision in the child agent's final result"
    );

    // Only the live link counts: once the parent detaches, the child may ask.
    drop(parent);
    eventually("the parent's detach", || {
        let (mut client, mut ui) = (client.clone(), ui.clone());
        let ask = ask_as("child", &child_incarnation);
        async move {
            outcome_of(&mut client, &mut ui, ask)
                .await
                .is_none()
                .then_some(())
        }
    })
    .await;
    drop(child);
}
on_every_backend!(
    #[tokio::test]
    rule_7_delegated_caller_while_the_parent_is_live_then_the_child_may_ask
);

async fn rule_7_a_detach_aborts_the_agents_pending_asks() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let mut ui = server.client().await;
    let mut events = subscribed(&mut ui, "s").await;
    let lease = client.attach("agent", "").await.expect("attach");
    let mut asker = client.clone();
    let ask = ask_as("agent", lease.incarnation());
    let call = tokio::spawn(async move { asker.ask(ask).await });
    let rpc_id = next_requested(&mut events).await;

    drop(lease);
    let err = within("the ask", call)
        .await
        .expect("join")
        .expect_err("aborted");
    assert_eq!(
        (err.code(), err.reason()),
        (Code::Cancelled, Reason::AskAborted)
    );
    assert_eq!(
        err.message(),
        "ask_user_question was aborted before the user answered"
    );
    match next_event(&mut events).await {
        Event::Resolved { resolved, .. } => {
            assert_eq!(resolved.rpc_id, rpc_id);
            assert_eq!(resolved.reason(), Resolution::Aborted);
        }
        other => panic!("expected resolved, got {other:?}"),
    }
}
on_every_backend!(
    #[tokio::test]
    rule_7_a_detach_aborts_the_agents_pending_asks
);
