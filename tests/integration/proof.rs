//! Proof that holds (docs/security.md, "Approvals: what an attacker tries"): each
//! attack an outside review made on approvals, receipts and budgets, made again
//! against real servers on every engine. Each test failed before the change that
//! stops it.

use std::time::Duration;

use askgate_client::{
    Ask, Client, Event, Reason, answer, question,
    receipt::{Decision, ReceiptError, verify_receipt},
};
use askgate_proto::v1::{AskResponse, QuestionAnswer, SubscribeRequest};
use askgate_server::server::ApprovalConfig;
use askgate_server::server::{AuthConfig, ServerConfig};
use serde_json::{Value, json};

use crate::{
    approvals::{KEY_A, deploy, jwks},
    audit::export,
    support::{
        TempDir, TestServer, askgate, eventually, finish, next_event, next_requested, subscribed,
        test_config, within,
    },
};

/// The deploy question: "Approve" (the approving answer, the first option) or
/// "Reject", for the action `deploy()`.
fn ship(session: &str) -> Ask {
    Ask::new(session)
        .question(
            question("go", "Deploy api to prod?")
                .choice("Approve")
                .choice("Reject"),
        )
        .action(&deploy().name, &deploy().arguments_json)
        .hold_unattended()
}

/// A server that signs receipts, with API keys for `keys` (name → {tenant, sub,
/// roles}).
struct Keyed {
    server: TestServer,
    /// Each key's token, by name.
    tokens: std::collections::HashMap<String, String>,
    /// The server's config (a peer takes the same keys and receipt key).
    config: ServerConfig,
    _dir: TempDir,
}

async fn keyed(keys: Value, config: ServerConfig) -> Keyed {
    let dir = TempDir::new();
    let (path, tokens) = crate::scenarios::keys_file(&dir, &keys).await;
    let config = ServerConfig {
        auth: AuthConfig::Keys(path.into()),
        approvals: ApprovalConfig {
            receipt_key_files: vec![dir.file("receipt.pem", KEY_A)],
            ..config.approvals
        },
        ..config
    };
    Keyed {
        server: TestServer::start_with(config.clone()).await,
        tokens,
        config,
        _dir: dir,
    }
}

async fn as_key(server: &TestServer, token: &str) -> Client {
    server.client().await.with_token(token).expect("a token")
}

/// `ask` (in session "s") made by `agent` and, once pending, resolved by `resolve`
/// (given the rpc_id); `ui` follows the session.
async fn resolved_by<F, Fut>(
    agent: &Client,
    ui: &mut Client,
    ask: Ask,
    resolve: F,
) -> Result<AskResponse, askgate_client::Error>
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut events = subscribed(ui, "s").await;
    let mut agent = agent.clone();
    let call = tokio::spawn(async move { agent.ask(ask).await });
    let rpc_id = next_requested(&mut events).await;
    resolve(rpc_id).await;
    within("the ask", call).await.expect("join")
}

/// `ask` made by `agent` and approved ("Approve" for question "go") by `approver`.
async fn approved_by(
    agent: &Client,
    approver: &Client,
    ask: Ask,
) -> Result<AskResponse, askgate_client::Error> {
    let mut watcher = approver.clone();
    resolved_by(agent, &mut watcher, ask, |rpc_id| {
        let mut approver = approver.clone();
        async move {
            approver
                .answer("s", &rpc_id, vec![answer::select("go", ["Approve"])])
                .await
                .expect("approve");
        }
    })
    .await
}

/// The receipt of an ask's outcome: in the response, or in the error's metadata.
fn receipt_of(outcome: &Result<AskResponse, askgate_client::Error>) -> String {
    match outcome {
        Ok(response) => response.receipt.clone(),
        Err(error) => error
            .metadata("receipt")
            .expect("a receipt in the error's metadata")
            .to_owned(),
    }
}

/// The decision of a valid receipt of `tenant` for `deploy()`.
fn decision(token: &str, keys: &askgate_client::receipt::JwkSet, tenant: &str) -> Decision {
    match verify_receipt(token, keys, tenant, &deploy()) {
        Ok(claims) => claims.decision().expect("a decision"),
        Err(ReceiptError::NotApproved(claims)) => claims.decision().expect("a decision"),
        Err(e) => panic!("an invalid receipt: {e}"),
    }
}

/// `askgate receipt verify` of `token` for `deploy()` in `tenant`: exit code and the
/// claims it printed.
async fn cli_verify(server: &TestServer, token: &str, tenant: &str) -> (i32, Value, String) {
    let dir = TempDir::new();
    let action = dir.file(
        "action.json",
        json!({"name": deploy().name, "arguments_json": deploy().arguments_json}).to_string(),
    );
    let jwks = format!("{}/.well-known/jwks.json", server.url());
    let (code, out, err) = finish(askgate(&[
        "receipt",
        "verify",
        "--jwks",
        &jwks,
        "--tenant",
        tenant,
        "--action",
        action.to_str().expect("utf-8"),
        token,
    ]))
    .await;
    let claims = serde_json::from_str(&out).unwrap_or(Value::Null);
    (code, claims, err)
}

/// A rejection, a skip, own words, a default "Reject" and a quorum's default
/// "Approve" all verify as receipts (signed, this tenant, this action) but none says
/// `approved`: `receipt verify` exits 3 for them, 0 only for the approving answer.
/// Before: every one of them exited 0, and `verify && run` ran a rejected deploy.
async fn a_receipt_says_what_was_decided() {
    let keys = json!({
        "agent": {"tenant": "acme", "sub": "deployer", "roles": ["agent"]},
        "ana": {"tenant": "acme", "sub": "ana", "roles": ["ui"]},
        "bo": {"tenant": "acme", "sub": "bo", "roles": ["ui"]},
    });
    let Keyed {
        server,
        tokens,
        _dir,
        ..
    } = keyed(keys, test_config()).await;
    let agent = as_key(&server, &tokens["agent"]).await;
    let ana = as_key(&server, &tokens["ana"]).await;
    let mut watcher = ana.clone();
    let jwks = jwks(&server).await;

    let answered = |answers: Vec<QuestionAnswer>| {
        let mut ana = ana.clone();
        move |rpc_id: String| async move {
            ana.answer("s", &rpc_id, answers).await.expect("answer");
        }
    };
    let outcome = approved_by(&agent, &ana, ship("s")).await;
    let token = receipt_of(&outcome);
    assert_eq!(decision(&token, &jwks, "acme"), Decision::Approved);
    let (code, claims, err) = cli_verify(&server, &token, "acme").await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(claims["decision"], "approved");
    assert_eq!(claims["asked_by"], "deployer");

    for (answers, what) in [
        (vec![answer::select("go", ["Reject"])], "another option"),
        (vec![answer::skip("go")], "a skip"),
        (vec![answer::custom("go", "Approve")], "own words"),
    ] {
        let outcome = resolved_by(&agent, &mut watcher, ship("s"), answered(answers)).await;
        let token = receipt_of(&outcome);
        assert_eq!(
            decision(&token, &jwks, "acme"),
            Decision::Rejected,
            "{what}"
        );
        let (code, claims, err) = cli_verify(&server, &token, "acme").await;
        assert_eq!(code, 3, "{what}: {err}");
        assert_eq!(claims["decision"], "rejected", "{what}");
        assert!(err.contains("rejected"), "{what}: {err}");
    }

    // Nobody answers: the default "Reject" applies, and says so.
    let defaulted = ship("s")
        .default_answers(vec![answer::select("go", ["Reject"])])
        .ttl(Duration::from_millis(300));
    let mut waiting = agent.clone();
    let outcome = within("the ask", waiting.ask(defaulted)).await;
    assert_eq!(
        decision(&receipt_of(&outcome), &jwks, "acme"),
        Decision::Defaulted
    );
    // A quorum of two whose default is "Approve": nobody votes, and its receipt says
    // defaulted, never approved.
    let quorum_default = ship("s")
        .quorum(2)
        .default_answers(vec![answer::select("go", ["Approve"])])
        .ttl(Duration::from_millis(300));
    let outcome = within("the ask", waiting.ask(quorum_default)).await;
    let token = receipt_of(&outcome);
    assert_eq!(decision(&token, &jwks, "acme"), Decision::Defaulted);
    let (code, claims, _) = cli_verify(&server, &token, "acme").await;
    assert_eq!((code, claims["decision"].clone()), (3, json!("defaulted")));

    // A quorum whose approvers disagree ends cancelled.
    let mut bo = as_key(&server, &tokens["bo"]).await;
    let outcome = resolved_by(&agent, &mut ana.clone(), ship("s").quorum(2), |rpc_id| {
        let mut ana = ana.clone();
        async move {
            ana.answer("s", &rpc_id, vec![answer::select("go", ["Approve"])])
                .await
                .expect("ana's vote");
            bo.answer("s", &rpc_id, vec![answer::select("go", ["Reject"])])
                .await
                .expect("bo's vote");
        }
    })
    .await;
    assert_eq!(
        outcome.as_ref().map_err(|e| e.reason()).err(),
        Some(Reason::AskCancelled)
    );
    assert_eq!(
        decision(&receipt_of(&outcome), &jwks, "acme"),
        Decision::Cancelled
    );
}
on_every_backend!(
    #[tokio::test]
    a_receipt_says_what_was_decided
);

/// One key signs every tenant's receipts: tenant beta asks for acme's very action,
/// approves it itself, and acme's executor, verifying for acme, refuses the receipt
/// (before, it ran). Beta's receipt says that beta's own subject asked and approved.
/// Nor can acme consume it.
async fn one_tenants_approval_does_not_pass_for_another() {
    let keys = json!({
        "acme": {"tenant": "acme", "sub": "acme-exec", "roles": ["agent"]},
        "beta": {"tenant": "beta", "sub": "beta-bot", "roles": ["agent", "ui"]},
    });
    let Keyed {
        server,
        tokens,
        _dir,
        ..
    } = keyed(keys, test_config()).await;
    let beta = as_key(&server, &tokens["beta"]).await;
    // Beta approves its own ask.
    let outcome = approved_by(&beta, &beta, ship("s")).await;
    let token = receipt_of(&outcome);
    let jwks = jwks(&server).await;
    let claims = verify_receipt(&token, &jwks, "beta", &deploy()).expect("beta's own receipt");
    assert_eq!(claims.asked_by, "beta-bot");
    assert_eq!(
        claims.approvers,
        ["beta-bot"],
        "an approval by its asker shows"
    );
    assert!(matches!(
        verify_receipt(&token, &jwks, "acme", &deploy()),
        Err(ReceiptError::WrongTenant { .. })
    ));
    let (code, _, err) = cli_verify(&server, &token, "acme").await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("tenant"), "{err}");
    let mut acme = as_key(&server, &tokens["acme"]).await;
    let refused = acme
        .consume_receipt(&token)
        .await
        .expect_err("beta's receipt");
    assert_eq!(refused.reason(), Reason::BadRequest);
}
on_every_backend!(
    #[tokio::test]
    one_tenants_approval_does_not_pass_for_another
);

/// A number a double would change has no exact digest: the ask is refused, naming
/// the field, and a verifier refuses such an action (before, the receipt of
/// 1234567890123456789 verified for 1234567890123456700).
#[tokio::test]
async fn action_numbers_a_double_would_change_are_refused() {
    let dir = TempDir::new();
    let server = crate::approvals::signing(&dir, KEY_A, Duration::from_secs(600)).await;
    let mut agent = server.client().await;
    for arguments in [
        r#"{"user_id": 1234567890123456789}"#,
        r#"{"amount": 0.1000000000000000000001}"#,
    ] {
        let refused = agent
            .ask(
                Ask::new("s")
                    .question(question("go", "Go?").choice("yes"))
                    .action("pay", arguments),
            )
            .await
            .expect_err("not I-JSON");
        assert_eq!(refused.reason(), Reason::BadRequest);
        assert_eq!(refused.violations()[0].0, "action.arguments_json");
        assert!(refused.message().contains("as a string"), "{refused}");
    }
    let action = dir.file(
        "action.json",
        r#"{"name": "pay", "arguments": {"user_id": 1234567890123456700}}"#,
    );
    let jwks = format!("{}/.well-known/jwks.json", server.url());
    let (code, _, err) = finish(askgate(&[
        "receipt",
        "verify",
        "--jwks",
        &jwks,
        "--tenant",
        "default",
        "--action",
        action.to_str().expect("utf-8"),
        "x.y.z",
    ]))
    .await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("send it as a string"), "{err}");
}

/// An executor that consumes its receipt runs the action once, however often the
/// receipt is replayed, through any node; the first use is in the audit log.
async fn a_receipt_is_consumed_once() {
    let keys = json!({
        "agent": {"tenant": "acme", "sub": "deployer", "roles": ["agent", "ui", "admin"]},
    });
    let Keyed {
        server,
        tokens,
        config,
        _dir,
    } = keyed(keys, test_config()).await;
    let agent = as_key(&server, &tokens["agent"]).await;
    let outcome = approved_by(&agent, &agent, ship("s")).await;
    let token = receipt_of(&outcome);
    let mut executor = agent.clone();
    let consumed = executor
        .consume_receipt(&token)
        .await
        .expect("the first use");
    assert_eq!(consumed.decision, "approved");
    let again = executor
        .consume_receipt(&token)
        .await
        .expect_err("a replay");
    assert_eq!(again.reason(), Reason::ReceiptConsumed);
    assert_eq!(again.code(), tonic::Code::FailedPrecondition);
    assert!(again.metadata("consumed_at").is_some());
    if let Some(peer) = server.start_peer_with(config).await {
        let mut elsewhere = as_key(&peer, &tokens["agent"]).await;
        let replay = elsewhere
            .consume_receipt(&token)
            .await
            .expect_err("via another node");
        assert_eq!(replay.reason(), Reason::ReceiptConsumed);
    }
    let forged = format!("{}x", &token[..token.len() - 1]);
    let refused = executor.consume_receipt(&forged).await.expect_err("forged");
    assert_eq!(refused.reason(), Reason::BadRequest);
    let records = export(&mut executor).await;
    let consumptions: Vec<Value> = records
        .iter()
        .map(|r| serde_json::from_str::<Value>(&r.body_json).expect("json"))
        .filter(|b| b["kind"] == "receipt.consumed")
        .collect();
    assert_eq!(consumptions.len(), 1, "{consumptions:?}");
    assert_eq!(consumptions[0]["decision"], "approved");
}
on_every_backend!(
    #[tokio::test]
    a_receipt_is_consumed_once
);

/// One person spelt two ways is one approver: `alice` and `Alice`, or one mailbox as
/// `ana@` and `ana+ops@`, vote once; the asker's subject in another case cannot
/// approve its own ask (before, one person completed a quorum of three).
async fn one_person_is_one_approver() {
    let keys = json!({
        "agent": {"tenant": "acme", "sub": "Deployer", "roles": ["agent"]},
        "deployer": {"tenant": "acme", "sub": "deployer", "roles": ["ui"]},
        "alice": {"tenant": "acme", "sub": "alice", "roles": ["ui"]},
        "Alice": {"tenant": "acme", "sub": "Alice", "roles": ["ui"]},
        "ana": {"tenant": "acme", "sub": "email:ana@example.org", "roles": ["ui"]},
        "ana+ops": {"tenant": "acme", "sub": "email:Ana+ops@Example.org", "roles": ["ui"]},
        "bo": {"tenant": "acme", "sub": "bo", "roles": ["ui"]},
    });
    let Keyed {
        server,
        tokens,
        _dir,
        ..
    } = keyed(keys, test_config()).await;
    let agent = as_key(&server, &tokens["agent"]).await;
    let mut watcher = as_key(&server, &tokens["bo"]).await;
    let vote = |name: &str| {
        let token = tokens[name].clone();
        let server_url = server.url();
        move |rpc_id: String| async move {
            let mut client = Client::connect(server_url)
                .await
                .expect("connect")
                .with_token(&token)
                .expect("token");
            client
                .answer("s", &rpc_id, vec![answer::select("go", ["Approve"])])
                .await
        }
    };
    let outcome = resolved_by(&agent, &mut watcher, ship("s").quorum(3), |rpc_id| {
        let votes = [
            ("alice", None),
            ("Alice", Some(Reason::AlreadyApproved)),
            ("ana", None),
            ("ana+ops", Some(Reason::AlreadyApproved)),
            ("deployer", Some(Reason::SelfApproval)),
            ("bo", None),
        ]
        .map(|(name, expected)| (name, expected, vote(name)));
        async move {
            for (name, expected, cast) in votes {
                let result = cast(rpc_id.clone()).await;
                assert_eq!(result.err().map(|e| e.reason()), expected, "{name}");
            }
        }
    })
    .await;
    let response = outcome.expect("answered by three persons");
    assert_eq!(
        response.approvers,
        ["alice", "email:ana@example.org", "bo"],
        "three persons"
    );
}
on_every_backend!(
    #[tokio::test]
    one_person_is_one_approver
);

/// Subjects beginning `askgate:` are the server's own (`askgate:default` resolves
/// defaults): `askgate keys add` refuses one, a keys file holding one does not load,
/// and a token naming one is UNAUTHENTICATED.
#[tokio::test]
async fn the_servers_own_subjects_cannot_be_claimed() {
    let dir = TempDir::new();
    let path = dir.0.join("keys.json");
    let path = path.to_str().expect("utf-8");
    for sub in ["askgate:default", "Askgate:Default"] {
        let (code, _, err) = finish(askgate(&[
            "keys", "add", "--file", path, "--tenant", "acme", "--sub", sub, "--roles", "ui",
        ]))
        .await;
        assert_eq!(code, 64, "{sub}: {err}");
        assert!(err.contains("askgate:"), "{err}");
    }
    let keys = dir.file(
        "forged.json",
        json!({"keys": [{
            "sha256": askgate_server::auth::keys::hash_hex("agk_forged"),
            "tenant": "acme", "sub": "askgate:default", "roles": ["ui"],
        }]})
        .to_string(),
    );
    let refused = askgate_server::server::run(
        tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind"),
        ServerConfig {
            auth: AuthConfig::Keys(keys),
            ..test_config()
        },
        std::future::pending(),
    )
    .await
    .expect_err("a keys file naming the server's subject");
    assert!(format!("{refused:#}").contains("askgate:"), "{refused:#}");
}

/// A session's history is bounded in bytes, not only in events: asks of a large
/// detail resolved one after another leave at most `--history-bytes` behind, and a
/// resume from before what it keeps gets `reset` (before, 100 aborted asks of 3.87 MB
/// added 500 MiB).
async fn a_sessions_history_is_bounded_in_bytes() {
    let server = TestServer::start_with(ServerConfig {
        settings: askgate_server::backend::StateConfig {
            history_bytes: 64 * 1024,
            ..test_config().settings
        },
        ..test_config()
    })
    .await;
    let mut ui = server.client().await;
    let mut events = subscribed(&mut ui, "s").await;
    let mut agent = server.client().await;
    let detail = "d".repeat(30 * 1024);
    let mut first_cursor = None;
    for _ in 0..8 {
        let ask = Ask::new("s").question(question("go", "Go?").choice("yes").detail(&detail));
        let mut asking = agent.clone();
        let call = tokio::spawn(async move { asking.ask(ask).await });
        let (cursor, rpc_id) = loop {
            if let Event::Requested { cursor, requested } = next_event(&mut events).await {
                break (cursor, requested.rpc_id);
            }
        };
        first_cursor.get_or_insert(cursor);
        ui.cancel("s", &rpc_id, "").await.expect("cancel");
        let _ = within("the ask", call).await;
    }
    let _ = &mut agent;
    let mut resumed = ui
        .subscribe(SubscribeRequest {
            session_id: "s".into(),
            after: first_cursor.expect("a cursor"),
            ..Default::default()
        })
        .await
        .expect("resume");
    assert!(
        matches!(next_event(&mut resumed).await, Event::Reset),
        "the history no longer holds the first ask: a resume from it is reset"
    );
}
on_every_backend!(
    #[tokio::test]
    a_sessions_history_is_bounded_in_bytes
);

/// Outcomes kept for retries count against the tenant's byte budget until they
/// expire: with nothing pending, a tenant whose answered asks hold its budget is
/// refused TOO_MANY_PENDING, and asks again once they expired (before, 300 answered
/// asks added 199 MiB outside every budget).
async fn recorded_outcomes_count_against_the_tenant_budget() {
    let server = TestServer::start_with(ServerConfig {
        settings: askgate_server::backend::StateConfig {
            max_pending_bytes_per_tenant: 64 * 1024,
            request_retention: Duration::from_secs(3),
            ..test_config().settings
        },
        ..test_config()
    })
    .await;
    let mut ui = server.client().await;
    let mut events = subscribed(&mut ui, "s").await;
    let words = "w".repeat(15 * 1024);
    let ask = |i: usize| {
        Ask::new("s")
            .question(question("why", "Why?"))
            .request_id(&format!("r-{i}"))
            .no_retry()
    };
    let mut answered = 0;
    let refused = loop {
        assert!(answered < 10, "the budget never filled");
        let mut agent = server.client().await;
        let call = tokio::spawn({
            let ask = ask(answered);
            async move { agent.ask(ask).await }
        });
        let rpc_id = tokio::select! {
            rpc_id = next_requested(&mut events) => rpc_id,
            result = call => break result.expect("join").expect_err("refused"),
        };
        ui.answer("s", &rpc_id, vec![answer::custom("why", &words)])
            .await
            .expect("answer");
        answered += 1;
    };
    assert_eq!(refused.reason(), Reason::TooManyPending, "{refused}");
    assert!(refused.message().contains("tenant"), "{refused}");
    assert!(
        (3..=5).contains(&answered),
        "{answered} outcomes of 15 KiB in 64 KiB"
    );
    let mut agent = server.client().await;
    assert!(
        agent.list_pending("s").await.expect("list").is_empty(),
        "nothing is pending"
    );
    eventually("the outcomes to expire", || {
        let mut agent = agent.clone();
        async move {
            let call = agent.ask(
                Ask::new("s")
                    .question(question("again", "Again?").choice("yes"))
                    .timeout(Duration::from_millis(200))
                    .hold_unattended()
                    .no_retry(),
            );
            match call.await {
                Err(e) if e.reason() == Reason::AskExpired => Some(()),
                _ => None,
            }
        }
    })
    .await;
}
on_every_backend!(
    #[tokio::test]
    recorded_outcomes_count_against_the_tenant_budget
);

/// Answers over 4 KiB are recorded as their digest, and a tenant's audit log is
/// bounded in bytes: the oldest records go, the newest stays and the chain goes on
/// (before, 300 answered asks added 146 MiB of audit in 3 s).
async fn the_audit_log_is_bounded() {
    let server = TestServer::start_with(ServerConfig {
        settings: askgate_server::backend::StateConfig {
            max_audit_bytes_per_tenant: 16 * 1024,
            ..test_config().settings
        },
        ..test_config()
    })
    .await;
    let mut ui = server.client().await;
    let mut events = subscribed(&mut ui, "s").await;
    let long = "l".repeat(10 * 1024);
    for i in 0..30 {
        let mut agent = server.client().await;
        let call = tokio::spawn(async move {
            agent
                .ask(Ask::new("s").question(question("why", "Why?")))
                .await
        });
        let rpc_id = next_requested(&mut events).await;
        let words = match i {
            0 => long.clone(),
            _ => format!("answer {i} {}", "x".repeat(600)),
        };
        ui.answer("s", &rpc_id, vec![answer::custom("why", &words)])
            .await
            .expect("answer");
        within("the ask", call)
            .await
            .expect("join")
            .expect("answered");
    }
    let records = eventually("the last record", || {
        let mut ui = ui.clone();
        async move {
            let records = export(&mut ui).await;
            (records.last().is_some_and(|r| r.seq == 30)).then_some(records)
        }
    })
    .await;
    let held: usize = records
        .iter()
        .map(|r| r.body_json.len() + r.hash.len() + r.prev_hash.len())
        .sum();
    assert!(held <= 16 * 1024, "{held} bytes of audit kept");
    assert!(records[0].seq > 1, "the oldest records went");
    assert_eq!(
        askgate_server::backend::audit::verify(&records),
        Ok(records.len() as u64)
    );
    // The first answer (10 KiB) was recorded as its digest: find it wherever it is
    // still kept; the others hold their answers.
    for record in &records {
        let body: Value = serde_json::from_str(&record.body_json).expect("json");
        assert!(body.get("answers").is_some() != body.get("answers_sha256").is_some());
        assert!(
            record.body_json.len() < 4 * 1024,
            "{}",
            record.body_json.len()
        );
    }
}
on_every_backend!(
    #[tokio::test]
    the_audit_log_is_bounded
);

#[tokio::test]
async fn long_answers_are_recorded_as_their_digest() {
    let server = TestServer::start().await;
    let mut ui = server.client().await;
    let mut events = subscribed(&mut ui, "s").await;
    let mut agent = server.client().await;
    let call = tokio::spawn(async move {
        agent
            .ask(Ask::new("s").question(question("why", "Why?")))
            .await
    });
    let rpc_id = next_requested(&mut events).await;
    let long = "l".repeat(10 * 1024);
    ui.answer("s", &rpc_id, vec![answer::custom("why", &long)])
        .await
        .expect("answer");
    within("the ask", call)
        .await
        .expect("join")
        .expect("answered");
    let records = eventually("the record", || {
        let mut ui = ui.clone();
        async move {
            let records = export(&mut ui).await;
            (!records.is_empty()).then_some(records)
        }
    })
    .await;
    let body: Value = serde_json::from_str(&records[0].body_json).expect("json");
    assert!(body.get("answers").is_none(), "{body}");
    let canonical =
        askgate_client::receipt::canonical(&json!([{"id": "why", "selected": [], "custom": long}]));
    let digest = hex::encode(ring::digest::digest(
        &ring::digest::SHA256,
        canonical.as_bytes(),
    ));
    assert_eq!(body["answers_sha256"], digest.as_str());
}

/// docs/approvals.md's Rust snippet, compiled from its file (the doc holds the same
/// text: checked below).
#[path = "snippets/executor.rs"]
mod executor_snippet;

/// A code block of docs/approvals.md, by the `<!-- snippet: NAME -->` line before it.
fn approvals_snippet(name: &str) -> String {
    let doc = std::fs::read_to_string(crate::support::tests_file("../docs/approvals.md"))
        .expect("docs/approvals.md");
    let marker = format!("<!-- snippet: {name} -->\n");
    let start = doc
        .find(&marker)
        .unwrap_or_else(|| panic!("no snippet {name}"))
        + marker.len();
    let code = &doc[start..];
    let code = &code[code.find('\n').expect("a fence") + 1..];
    code[..code.find("```").expect("a closing fence")].to_owned()
}

/// A server of tenant acme that signs receipts, and an approved receipt for the
/// docs' deploy (`{"service": "api", "env": "prod"}`): the server, the agent's token
/// and the receipt.
async fn an_approved_deploy() -> (Keyed, String) {
    let keys = json!({
        "agent": {"tenant": "acme", "sub": "deployer", "roles": ["agent"]},
        "ana": {"tenant": "acme", "sub": "ana", "roles": ["ui"]},
    });
    let keyed = keyed(keys, test_config()).await;
    let agent = as_key(&keyed.server, &keyed.tokens["agent"]).await;
    let mut ana = as_key(&keyed.server, &keyed.tokens["ana"]).await;
    let deploy = Ask::new("s")
        .question(
            question("go", "Deploy api to prod?")
                .choice("Approve")
                .choice("Reject"),
        )
        .action("deploy", r#"{"service": "api", "env": "prod"}"#)
        .hold_unattended();
    let approver = ana.clone();
    let outcome = resolved_by(&agent, &mut ana, deploy, |rpc_id| {
        let mut ana = approver.clone();
        async move {
            ana.answer("s", &rpc_id, vec![answer::select("go", ["Approve"])])
                .await
                .expect("approve");
        }
    })
    .await;
    let receipt = receipt_of(&outcome);
    (keyed, receipt)
}

/// The executor's whole check as docs/approvals.md writes it for the command line:
/// run as written, it says to run the deploy once; a replay of the receipt runs
/// nothing (exit 8, RECEIPT_CONSUMED).
#[tokio::test]
async fn the_docs_executor_check_runs_as_written_on_the_command_line() {
    let (keyed, receipt) = an_approved_deploy().await;
    let dir = TempDir::new();
    let snippet = approvals_snippet("executor-sh");
    // The action file the snippet's first line describes.
    let action = snippet
        .lines()
        .next()
        .and_then(|line| line.strip_prefix("# action.json: "))
        .expect("the snippet names its action file");
    dir.file("action.json", action);
    let bin = std::path::Path::new(crate::support::ASKGATE)
        .parent()
        .expect("the binary's directory");
    let run = || {
        tokio::process::Command::new("bash")
            .args(["-euo", "pipefail", "-c", &snippet])
            .current_dir(&dir.0)
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    bin.display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            )
            .env("ASKGATE_ADDR", keyed.server.url())
            .env("ASKGATE_TOKEN", &keyed.tokens["agent"])
            .env("RECEIPT", &receipt)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("bash")
    };
    let (code, out, err) = finish(run()).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("run the deploy"), "{out}");
    let (code, out, err) = finish(run()).await;
    assert_eq!(code, 8, "a replay: {out} {err}");
    assert!(err.contains("RECEIPT_CONSUMED"), "{err}");
    assert!(!out.contains("run the deploy"), "{out}");
}

/// The executor's whole check as docs/approvals.md writes it in Rust (the file the
/// test compiles is the doc's text): the receipt approves the deploy once.
#[tokio::test]
async fn the_docs_executor_check_runs_as_written_in_rust() {
    let text = std::fs::read_to_string(crate::support::tests_file(
        "integration/snippets/executor.rs",
    ))
    .expect("the snippet's file");
    assert_eq!(
        approvals_snippet("executor-rust"),
        text,
        "docs/approvals.md's Rust snippet and tests/integration/snippets/executor.rs differ"
    );
    let (keyed, receipt) = an_approved_deploy().await;
    let mut client = as_key(&keyed.server, &keyed.tokens["agent"]).await;
    let keys = jwks(&keyed.server).await;
    let claims = executor_snippet::check_deploy(&mut client, &keys, &receipt)
        .await
        .expect("approved, once");
    assert_eq!(claims.approvers, ["ana"]);
    assert_eq!(claims.asked_by, "deployer");
    let replay = executor_snippet::check_deploy(&mut client, &keys, &receipt)
        .await
        .expect_err("a replay");
    assert!(
        matches!(&replay, askgate_client::receipt::CheckError::Call(e) if e.reason() == Reason::ReceiptConsumed),
        "{replay}"
    );
}
