//! Answer validation before the claim (docs/protocol.md, Semantics 4) through the real service:
//! a refused batch leaves the ask pending, and normalisation reaches the agent and the
//! subscribers alike.

use askgate_client::{Ask, Client, Event, Reason, answer, question};
use askgate_proto::v1::{AskResponse, QuestionAnswer};
use tokio::task::JoinHandle;

use crate::support::{TestServer, next_event, next_requested, subscribed, within};

fn batch() -> Ask {
    Ask::new("s")
        .question(
            question("db", "Which database?")
                .choice("Postgres")
                .choice("SQLite"),
        )
        .question(
            question("features", "Which features?")
                .choice("auth")
                .choice("search")
                .choice("billing")
                .multi_select(),
        )
        .question(question("name", "Service name?"))
}

async fn pending_batch(
    client: &mut Client,
) -> (
    askgate_client::Events,
    String,
    JoinHandle<Result<AskResponse, askgate_client::Error>>,
) {
    let mut events = subscribed(client, "s").await;
    let mut asker = client.clone();
    let waiting = tokio::spawn(async move { asker.ask(batch()).await });
    let rpc_id = next_requested(&mut events).await;
    (events, rpc_id, waiting)
}

async fn an_invalid_batch_leaves_the_ask_pending_and_a_corrected_one_wins() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let (mut events, rpc_id, waiting) = pending_batch(&mut client).await;

    let invalid = [
        // incomplete
        vec![answer::select("db", ["Postgres"])],
        // two options on a single-select question
        vec![
            answer::select("db", ["Postgres", "SQLite"]),
            answer::skip("features"),
            answer::skip("name"),
        ],
        // a label selected twice
        vec![
            answer::skip("db"),
            answer::select("features", ["auth", "auth"]),
            answer::skip("name"),
        ],
        // a selection on an optionless question, an unknown id
        vec![
            answer::skip("db"),
            answer::skip("features"),
            answer::select("name", ["x"]),
            answer::skip("nope"),
        ],
    ];
    for batch in invalid {
        let err = client
            .answer("s", &rpc_id, batch.clone())
            .await
            .expect_err("invalid");
        assert_eq!(err.reason(), Reason::BadAnswer, "{batch:?}");
        let pending = client.list_pending("s").await.expect("list");
        assert_eq!(pending.len(), 1, "the ask stays pending after {batch:?}");
        assert_eq!(pending[0].rpc_id, rpc_id);
    }

    let corrected = vec![
        answer::select("db", ["SQLite"]),
        answer::select("features", ["search", "auth"]),
        answer::custom("name", "askgate"),
    ];
    client
        .answer("s", &rpc_id, corrected.clone())
        .await
        .expect("valid");
    let response = within("ask", waiting)
        .await
        .expect("join")
        .expect("answered");
    assert_eq!(response.answers, corrected);
    assert_eq!(response.rpc_id, rpc_id);
    let Event::Resolved { resolved, .. } = next_event(&mut events).await else {
        panic!("expected resolved");
    };
    assert_eq!(resolved.answers, corrected);
    assert!(client.list_pending("s").await.expect("list").is_empty());
}
on_every_backend!(
    #[tokio::test]
    an_invalid_batch_leaves_the_ask_pending_and_a_corrected_one_wins
);

async fn custom_overrides_single_select_adds_to_multi_select_and_skips_stay_explicit() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let (_events, rpc_id, waiting) = pending_batch(&mut client).await;
    let mut db = answer::select("db", ["Postgres"]);
    db.custom = Some("  CockroachDB ".into());
    let mut features = answer::select("features", ["billing"]);
    features.custom = Some("audit log".into());
    let mut name = answer::skip("name");
    name.custom = Some("   ".into());
    client
        .answer("s", &rpc_id, vec![name, features, db])
        .await
        .expect("valid");
    let response = within("ask", waiting)
        .await
        .expect("join")
        .expect("answered");
    assert_eq!(
        response.answers,
        vec![
            QuestionAnswer {
                id: "db".into(),
                selected: vec![],
                custom: Some("CockroachDB".into()),
            },
            QuestionAnswer {
                id: "features".into(),
                selected: vec!["billing".into()],
                custom: Some("audit log".into()),
            },
            answer::skip("name"),
        ]
    );
}
on_every_backend!(
    #[tokio::test]
    custom_overrides_single_select_adds_to_multi_select_and_skips_stay_explicit
);
