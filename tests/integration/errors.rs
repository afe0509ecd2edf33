//! Each error reason the one-node service produces, asserted by gRPC code and
//! ErrorInfo reason (and field violations where the contract promises them).

use std::time::Duration;

use askgate_client::{Ask, Reason, answer, question};
use askgate_proto::v1::{AgentRef, AskRequest};
use askgate_server::server::{AskConfig, TransportConfig};
use askgate_server::{ServerConfig, backend::StateConfig, domain::Limits};
use tonic::Code;

use crate::support::{TestServer, next_requested, subscribed, within};

fn yes_no(session: &str) -> Ask {
    Ask::new(session).question(question("ok", "Proceed?").choice("yes").choice("no"))
}

async fn empty_questions() {
    let server = TestServer::start().await;
    let err = server
        .client()
        .await
        .ask(Ask::new("s"))
        .await
        .expect_err("refused");
    assert_eq!(
        (err.code(), err.reason()),
        (Code::InvalidArgument, Reason::EmptyQuestions)
    );
    assert_eq!(
        err.message(),
        "ask_user_question requires at least one question"
    );
}
on_every_backend!(
    #[tokio::test]
    empty_questions
);

async fn bad_request_names_every_field() {
    let server = TestServer::start().await;
    let ask = Ask::new("bad session!")
        .question(question("", "?").choice("a").choice("a"))
        .question(question("x", " "));
    let err = server.client().await.ask(ask).await.expect_err("refused");
    assert_eq!(
        (err.code(), err.reason()),
        (Code::InvalidArgument, Reason::BadRequest)
    );
    let fields: Vec<&str> = err.violations().iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(
        fields,
        [
            "session_id",
            "questions[0].id",
            "questions[0].options[1].label",
            "questions[1].question"
        ]
    );
}
on_every_backend!(
    #[tokio::test]
    bad_request_names_every_field
);

async fn oversize_input_is_refused_before_it_is_stored() {
    let config = ServerConfig {
        limits: Limits {
            max_questions: 2,
            ..Limits::default()
        },
        transport: TransportConfig {
            max_message_bytes: 64 * 1024,
            ..crate::support::test_config().transport
        },
        ..crate::support::test_config()
    };
    let server = TestServer::start_with(config).await;
    let mut client = server.client().await;
    let mut events = subscribed(&mut client, "s").await;

    let three = (0..3).fold(Ask::new("s"), |ask, i| {
        ask.question(question(&i.to_string(), "?"))
    });
    let err = client.ask(three).await.expect_err("too many questions");
    assert_eq!(err.reason(), Reason::BadRequest);
    assert_eq!(err.violations()[0].0, "questions");

    let huge = Ask::new("s").question(question("q", &"x".repeat(100 * 1024)));
    let err = client.ask(huge).await.expect_err("message too large");
    assert_eq!(
        (err.code(), err.reason()),
        (Code::InvalidArgument, Reason::BadRequest)
    );
    assert_eq!(err.violations()[0].0, "request");

    // Nothing was stored or broadcast: the next ask is the first event.
    let mut asker = client.clone();
    let waiting = tokio::spawn(async move { asker.ask(yes_no("s")).await });
    let rpc_id = next_requested(&mut events).await;
    client.cancel("s", &rpc_id, "").await.expect("cancel");
    within("ask", waiting)
        .await
        .expect("join")
        .expect_err("cancelled");
    assert!(client.list_pending("s").await.expect("list").is_empty());
}
on_every_backend!(
    #[tokio::test]
    oversize_input_is_refused_before_it_is_stored
);

async fn caller_not_live_without_an_attached_agent() {
    let server = TestServer::start().await;
    let mut ask = yes_no("s");
    ask.request_mut().agent = Some(AgentRef {
        agent_id: "agent-1".into(),
        incarnation: "1".into(),
    });
    let err = server.client().await.ask(ask).await.expect_err("refused");
    assert_eq!(
        (err.code(), err.reason()),
        (Code::FailedPrecondition, Reason::CallerNotLive)
    );
}
on_every_backend!(
    #[tokio::test]
    caller_not_live_without_an_attached_agent
);

async fn bad_answer_not_pending_and_cancelled_with_reason() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let mut events = subscribed(&mut client, "s").await;
    let mut asker = client.clone();
    let waiting = tokio::spawn(async move { asker.ask(yes_no("s")).await });
    let rpc_id = next_requested(&mut events).await;

    let err = client
        .answer("s", &rpc_id, vec![answer::select("ok", ["maybe"])])
        .await
        .expect_err("not an option");
    assert_eq!(
        (err.code(), err.reason()),
        (Code::InvalidArgument, Reason::BadAnswer)
    );
    assert_eq!(err.violations()[0].0, "answers[0].selected[0]");

    let err = client
        .cancel("other", &rpc_id, "")
        .await
        .expect_err("wrong session");
    assert_eq!(
        (err.code(), err.reason()),
        (Code::NotFound, Reason::NotPending)
    );
    let err = client
        .cancel("s", "no-such-rpc", "")
        .await
        .expect_err("unknown rpc");
    assert_eq!(err.reason(), Reason::NotPending);

    client
        .cancel("s", &rpc_id, "  use the staging DB  ")
        .await
        .expect("cancel");
    let err = within("ask", waiting)
        .await
        .expect("join")
        .expect_err("cancelled");
    assert_eq!(
        (err.code(), err.reason()),
        (Code::Aborted, Reason::AskCancelled)
    );
    assert_eq!(err.metadata("reason"), Some("use the staging DB"));
    assert!(
        err.message().ends_with("use the staging DB"),
        "{}",
        err.message()
    );
    assert_eq!(err.metadata("rpc_id"), Some(rpc_id.as_str()));

    let err = client
        .answer("s", &rpc_id, vec![answer::select("ok", ["yes"])])
        .await
        .expect_err("late answer");
    assert_eq!(
        (err.code(), err.reason()),
        (Code::NotFound, Reason::NotPending)
    );
    assert_eq!(err.metadata("resolution"), Some("CANCELLED"));
}
on_every_backend!(
    #[tokio::test]
    bad_answer_not_pending_and_cancelled_with_reason
);

async fn ask_expired_at_the_callers_deadline() {
    let server = TestServer::start().await;
    let started = tokio::time::Instant::now();
    let err = server
        .client()
        .await
        .ask(
            yes_no("s")
                .hold_unattended()
                .timeout(Duration::from_millis(300)),
        )
        .await
        .expect_err("expired");
    assert_eq!(
        (err.code(), err.reason()),
        (Code::DeadlineExceeded, Reason::AskExpired)
    );
    assert!(started.elapsed() >= Duration::from_millis(300));
}
on_every_backend!(
    #[tokio::test]
    ask_expired_at_the_callers_deadline
);

async fn ask_expired_at_the_servers_maximum_wait() {
    let server = TestServer::start_with(ServerConfig {
        asks: AskConfig {
            max_wait: Duration::from_millis(200),
            ..crate::support::test_config().asks
        },
        ..crate::support::test_config()
    })
    .await;
    let err = server
        .client()
        .await
        .ask(
            yes_no("s")
                .hold_unattended()
                .timeout(Duration::from_secs(60)),
        )
        .await
        .expect_err("expired");
    assert_eq!(err.reason(), Reason::AskExpired);
}
on_every_backend!(
    #[tokio::test]
    ask_expired_at_the_servers_maximum_wait
);

async fn too_many_pending_per_session() {
    let server = TestServer::start_with(ServerConfig {
        settings: StateConfig {
            max_pending_per_session: 1,
            ..StateConfig::default()
        },
        ..crate::support::test_config()
    })
    .await;
    let mut client = server.client().await;
    let mut events = subscribed(&mut client, "s").await;
    let mut asker = client.clone();
    let _waiting = tokio::spawn(async move { asker.ask(yes_no("s")).await });
    next_requested(&mut events).await;
    let err = client.ask(yes_no("s")).await.expect_err("over the limit");
    assert_eq!(
        (err.code(), err.reason()),
        (Code::ResourceExhausted, Reason::TooManyPending)
    );
    // Another session has its own allowance.
    let err = client
        .ask(
            yes_no("t")
                .hold_unattended()
                .timeout(Duration::from_millis(50)),
        )
        .await
        .expect_err("expires");
    assert_eq!(err.reason(), Reason::AskExpired);
}
on_every_backend!(
    #[tokio::test]
    too_many_pending_per_session
);

async fn a_raw_request_with_only_an_agent_id_is_refused_field_by_field() {
    let server = TestServer::start().await;
    let mut ask = Ask::from(AskRequest {
        session_id: "s".into(),
        ..Default::default()
    })
    .question(question("q", "?"));
    ask.request_mut().agent = Some(AgentRef::default());
    let err = server.client().await.ask(ask).await.expect_err("refused");
    assert_eq!(err.reason(), Reason::BadRequest);
    assert_eq!(err.violations()[0].0, "agent.agent_id");
}
on_every_backend!(
    #[tokio::test]
    a_raw_request_with_only_an_agent_id_is_refused_field_by_field
);

/// docs/protocol.md "Errors are bounded": whatever the input, an error's message plus its details
/// (as they travel, base64 in `grpc-status-details-bin`) stay under 4 KiB, with at
/// most 8 field violations and no echoed value over 64 bytes, so a default gRPC client
/// (8-16 KiB header limits) receives it whole, with its ErrorInfo reason.
async fn errors_stay_small_whatever_the_input() {
    use askgate_proto::v1::{
        AnswerRequest, CancelRequest, ListPendingRequest, QuestionAnswer,
        user_questions_client::UserQuestionsClient,
    };
    use tonic_types::StatusExt as _;

    let server = TestServer::start().await;
    let mut client = server.client().await;
    let mut raw = UserQuestionsClient::connect(server.url())
        .await
        .expect("connect")
        .max_decoding_message_size(usize::MAX);
    let mut events = subscribed(&mut client, "s").await;
    let mut asker = client.clone();
    let waiting = tokio::spawn(async move { asker.ask(yes_no("s").no_retry()).await });
    let rpc_id = next_requested(&mut events).await;

    let mega = "x".repeat(1024 * 1024);
    let ask = |change: &dyn Fn(&mut AskRequest)| {
        let mut request = yes_no("s").request_mut().clone();
        change(&mut request);
        request
    };
    let duplicates = ask(&|r| r.questions = vec![r.questions[0].clone(); 10_000]);
    let cases: Vec<(&str, tonic::Status, Reason)> = vec![
        (
            "1 MB question id",
            raw.ask(ask(&|r| r.questions[0].id = mega.clone()))
                .await
                .expect_err("refused"),
            Reason::BadRequest,
        ),
        (
            "10,000 duplicate questions",
            raw.ask(duplicates).await.expect_err("refused"),
            Reason::BadRequest,
        ),
        (
            "1 MB option label",
            raw.ask(ask(&|r| r.questions[0].options[0].label = mega.clone()))
                .await
                .expect_err("refused"),
            Reason::BadRequest,
        ),
        (
            "1 MB label key",
            raw.ask(ask(&|r| {
                r.labels.insert(mega.clone(), "v".into());
            }))
            .await
            .expect_err("refused"),
            Reason::BadRequest,
        ),
        (
            "1 MB session_id in Ask",
            raw.ask(ask(&|r| r.session_id = mega.clone()))
                .await
                .expect_err("refused"),
            Reason::BadRequest,
        ),
        (
            "1 MB session_id in Answer",
            raw.answer(AnswerRequest {
                session_id: mega.clone(),
                rpc_id: rpc_id.clone(),
                answers: vec![],
                grant: None,
            })
            .await
            .expect_err("refused"),
            Reason::BadRequest,
        ),
        (
            "1 MB rpc_id in Answer",
            raw.answer(AnswerRequest {
                session_id: "s".into(),
                rpc_id: mega.clone(),
                answers: vec![],
                grant: None,
            })
            .await
            .expect_err("refused"),
            Reason::BadRequest,
        ),
        (
            "1 MB session_id and rpc_id in Cancel",
            raw.cancel(CancelRequest {
                session_id: mega.clone(),
                rpc_id: mega.clone(),
                reason: String::new(),
                ..Default::default()
            })
            .await
            .expect_err("refused"),
            Reason::BadRequest,
        ),
        (
            "1 MB session_id in ListPending",
            raw.list_pending(ListPendingRequest {
                session_id: mega.clone(),
            })
            .await
            .expect_err("refused"),
            Reason::BadRequest,
        ),
        (
            "an answer with 10,000 unknown ids",
            raw.answer(AnswerRequest {
                session_id: "s".into(),
                rpc_id: rpc_id.clone(),
                answers: (0..10_000)
                    .map(|i| QuestionAnswer {
                        id: format!("{i}-{}", "u".repeat(200)),
                        ..Default::default()
                    })
                    .collect(),
                grant: None,
            })
            .await
            .expect_err("refused"),
            Reason::BadAnswer,
        ),
    ];
    for (case, status, reason) in cases {
        assert_eq!(status.code(), Code::InvalidArgument, "{case}");
        let details = status.get_error_details();
        let info = details.error_info().expect("ErrorInfo");
        assert_eq!(info.reason, reason.as_str_name(), "{case}");
        let wire = status.message().len() + status.details().len().div_ceil(3) * 4;
        assert!(wire < 4096, "{case}: {wire} bytes");
        let violations = details
            .bad_request()
            .map_or(0, |b| b.field_violations.len());
        assert!(
            (1..=8).contains(&violations),
            "{case}: {violations} violations"
        );
        for value in info.metadata.values() {
            assert!(
                value.len() <= 128,
                "{case}: metadata value of {} bytes",
                value.len()
            );
        }
        assert!(
            !status.message().contains(&"x".repeat(65))
                && !status.message().contains(&"u".repeat(65)),
            "{case}: an echoed value over 64 bytes: {}",
            &status.message()[..200.min(status.message().len())]
        );
    }
    // The ask is untouched by all of it.
    client.cancel("s", &rpc_id, "").await.expect("cancel");
    within("ask", waiting)
        .await
        .expect("join")
        .expect_err("cancelled");
}
on_every_backend!(
    #[tokio::test]
    errors_stay_small_whatever_the_input
);
