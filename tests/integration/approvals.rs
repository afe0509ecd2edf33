//! Approvals you can prove (docs/approvals.md), against a real server: receipts that
//! bind a resolution to its action and verify against the published keys, default
//! answers on expiry, and the channels an ask may be resolved from.

use std::time::Duration;

use askgate_client::{
    Ask, Client, Error, Event, Reason, answer, question,
    receipt::{self, Decision, ReceiptError, Verify, verify_receipt, verify_receipt_with},
};
use askgate_proto::v1::{Action, AnswerRequest, Resolution, Resolved};
use askgate_server::server::ApprovalConfig;
use askgate_server::server::ServerConfig;
use jsonwebtoken::jwk::JwkSet;

use crate::{
    hardening::http1,
    support::{
        TempDir, TestServer, askgate, finish, next_event, next_requested, subscribed, test_config,
        web_client, within,
    },
};

/// Two Ed25519 keys (PKCS#8 PEM, `openssl genpkey -algorithm ed25519`).
pub(crate) const KEY_A: &str = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIHGSAN8WdSYN83y/bjjMnxqhxP3l+pm2nmf61BuvPQhk\n-----END PRIVATE KEY-----\n";
pub(crate) const KEY_B: &str = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIIdhO40VjzlWmcocmgUDLdMQ1+wym16qgEk+uZVFtw9P\n-----END PRIVATE KEY-----\n";

/// A server that signs receipts with `pem`, valid for `ttl`.
pub(crate) async fn signing(dir: &TempDir, pem: &str, ttl: Duration) -> TestServer {
    TestServer::start_with(ServerConfig {
        approvals: ApprovalConfig {
            receipt_key_files: vec![dir.file("receipt.pem", pem)],
            receipt_ttl: ttl,
            ..test_config().approvals
        },
        ..test_config()
    })
    .await
}

/// The server's published keys, fetched as an executor would.
pub(crate) async fn jwks(server: &TestServer) -> JwkSet {
    let head = format!(
        "GET /.well-known/jwks.json HTTP/1.1\r\nhost: {}",
        server.addr
    );
    let (status, body) = http1(server.addr, &head, b"").await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    serde_json::from_slice(&body).expect("a JWK Set")
}

pub(crate) fn deploy() -> Action {
    Action {
        name: "deploy".into(),
        arguments_json: r#"{"service":"api","env":"prod","replicas":3}"#.into(),
        ..Default::default()
    }
}

fn ship(session: &str) -> Ask {
    Ask::new(session)
        .question(
            question("go", "Deploy api to prod?")
                .choice("Approve")
                .choice("Reject"),
        )
        .action(&deploy().name, &deploy().arguments_json)
}

/// The next `requested` event's rpc_id, with its action digest checked.
async fn requested_with_action(events: &mut askgate_client::Events) -> String {
    loop {
        if let Event::Requested { requested, .. } = next_event(events).await {
            let action = requested.action.expect("the event shows the action");
            assert_eq!(
                (action.name.as_str(), action.arguments_json.as_str()),
                (deploy().name.as_str(), deploy().arguments_json.as_str())
            );
            // The server names the approving answers: by default the first option.
            assert_eq!(
                action.approving_answers,
                [answer::select("go", ["Approve"])]
            );
            let expected =
                receipt::action_digest(&action.name, &action.arguments_json).expect("a digest");
            assert_eq!(requested.action_digest, expected);
            return requested.rpc_id;
        }
    }
}

async fn next_resolved(events: &mut askgate_client::Events) -> Resolved {
    loop {
        if let Event::Resolved { resolved, .. } = next_event(events).await {
            return resolved;
        }
    }
}

/// `ship("s")` asked on `server` and answered `label` by a human following the
/// session: the response, and the rpc_id the human saw.
async fn answered(server: &TestServer, label: &str) -> (askgate_proto::v1::AskResponse, String) {
    let mut ui = server.client().await;
    let mut events = subscribed(&mut ui, "s").await;
    let mut agent = server.client().await;
    let call = tokio::spawn(async move { agent.ask(ship("s")).await });
    let rpc_id = requested_with_action(&mut events).await;
    ui.answer("s", &rpc_id, vec![answer::select("go", [label])])
        .await
        .expect("answer");
    let response = within("the ask", call)
        .await
        .expect("join")
        .expect("answered");
    (response, rpc_id)
}

async fn a_receipt_binds_the_resolution_to_the_action() {
    let dir = TempDir::new();
    let server = signing(&dir, KEY_A, Duration::from_secs(600)).await;
    let (response, rpc_id) = answered(&server, "Approve").await;
    assert_eq!(response.resolution(), Resolution::Answered);
    assert_eq!(
        response.approvers,
        std::slice::from_ref(&response.resolved_by)
    );

    let keys = jwks(&server).await;
    let claims =
        verify_receipt(&response.receipt, &keys, "default", &deploy()).expect("a valid receipt");
    assert_eq!(
        (claims.rpc_id.as_str(), claims.session_id.as_str()),
        (rpc_id.as_str(), "s")
    );
    assert_eq!(claims.resolution, "ANSWERED");
    assert_eq!(claims.decision(), Some(Decision::Approved));
    assert_eq!(claims.asked_by, "anonymous");
    assert_eq!(claims.jti, rpc_id);
    assert_eq!(
        claims.answers_digest,
        receipt::answers_digest(&response.answers, |_| false)
    );
    // The same arguments spelt otherwise are the same action; other arguments are not.
    let respelt = Action {
        arguments_json: "{ \"replicas\": 3, \"env\": \"prod\", \"service\": \"api\" }".into(),
        ..deploy()
    };
    assert!(verify_receipt(&response.receipt, &keys, "default", &respelt).is_ok());
    let tampered = Action {
        arguments_json: r#"{"service":"api","env":"prod","replicas":30}"#.into(),
        ..deploy()
    };
    assert!(matches!(
        verify_receipt(&response.receipt, &keys, "default", &tampered),
        Err(ReceiptError::WrongAction { .. })
    ));

    // A cancelled ask's receipt comes in the error's metadata.
    let mut ui = server.client().await;
    let mut events = subscribed(&mut ui, "s").await;
    let mut agent = server.client().await;
    let call = tokio::spawn(async move { agent.ask(ship("s")).await });
    let rpc_id = requested_with_action(&mut events).await;
    ui.cancel("s", &rpc_id, "not today").await.expect("cancel");
    let error = within("the ask", call)
        .await
        .expect("join")
        .expect_err("cancelled");
    assert_eq!(error.reason(), Reason::AskCancelled);
    let token = error
        .metadata("receipt")
        .expect("a receipt in the metadata");
    let Err(ReceiptError::NotApproved(claims)) = verify_receipt(token, &keys, "default", &deploy())
    else {
        panic!("a cancelled ask approves nothing")
    };
    assert_eq!(claims.resolution, "CANCELLED");
    assert_eq!(claims.decision(), Some(Decision::Cancelled));
    assert!(claims.approvers.is_empty());
    assert_eq!(claims.approver_rule, None, "the ask named no approvers");

    // An ask naming its approvers: the receipt says whom it allowed.
    let mut agent = server.client().await;
    let call = tokio::spawn(async move {
        agent
            .ask(
                ship("s")
                    .approvers(["Anonymous"])
                    .approver_groups(["ops"])
                    .escalate(Duration::from_secs(3600), ["group:sre"], false, ["sl_1"]),
            )
            .await
    });
    let rpc_id = requested_with_action(&mut events).await;
    ui.answer("s", &rpc_id, vec![answer::select("go", ["Approve"])])
        .await
        .expect("an approver answers");
    let response = within("the ask", call)
        .await
        .expect("join")
        .expect("answered");
    let claims = verify_receipt(&response.receipt, &keys, "default", &deploy()).expect("valid");
    let rule = claims.approver_rule.expect("the approver rule");
    assert_eq!(
        (rule.subjects, rule.groups),
        (vec!["Anonymous".to_owned()], vec!["ops".to_owned()])
    );
    // The steps that would have widened it, whether or not they came.
    assert_eq!(
        (
            rule.steps.len(),
            rule.steps[0].after_ms,
            rule.steps[0].groups.as_slice()
        ),
        (1, 3_600_000, ["sre".to_owned()].as_slice())
    );
}
on_every_backend!(
    #[tokio::test]
    a_receipt_binds_the_resolution_to_the_action
);

/// A receipt signed by another server's key, or one that expired, does not verify;
/// a server without keys signs nothing and publishes nothing.
async fn a_receipt_of_a_stranger_or_out_of_date_is_refused() {
    let dir = TempDir::new();
    let server = signing(&dir, KEY_A, Duration::from_secs(1)).await;
    let stranger_dir = TempDir::new();
    let stranger = signing(&stranger_dir, KEY_B, Duration::from_secs(600)).await;
    let (response, _) = answered(&server, "Reject").await;
    assert_eq!(
        verify_receipt(
            &response.receipt,
            &jwks(&stranger).await,
            "default",
            &deploy()
        ),
        Err(ReceiptError::UnknownKey)
    );
    let keys = jwks(&server).await;
    let exact = Verify {
        leeway: Duration::ZERO,
        any_decision: true,
    };
    let claims = verify_receipt_with(&response.receipt, &keys, "default", &deploy(), &exact)
        .expect("valid while fresh");
    assert_eq!(claims.decision(), Some(Decision::Rejected));
    // Past its second of validity (timestamps are whole seconds).
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert_eq!(
        verify_receipt_with(&response.receipt, &keys, "default", &deploy(), &exact),
        Err(ReceiptError::Expired),
        "{claims:?}"
    );

    let plain = TestServer::start().await;
    let head = format!(
        "GET /.well-known/jwks.json HTTP/1.1\r\nhost: {}",
        plain.addr
    );
    assert_eq!(http1(plain.addr, &head, b"").await.0, 404);
    let (response, _) = answered(&plain, "Approve").await;
    assert!(response.receipt.is_empty(), "no keys, no receipt");
}
on_every_backend!(
    #[tokio::test]
    a_receipt_of_a_stranger_or_out_of_date_is_refused
);

/// When an ask's lifetime ends unanswered it resolves with its default answers,
/// DEFAULTED (never ANSWERED) by `askgate:default`; a retry gets the same. Without
/// default answers it expires as before.
async fn default_answers_apply_when_nobody_answers() {
    let dir = TempDir::new();
    let server = signing(&dir, KEY_A, Duration::from_secs(600)).await;
    let mut ui = server.client().await;
    let mut events = subscribed(&mut ui, "s").await;
    let defaulted = || {
        ship("s")
            .default_answers(vec![answer::select("go", ["Reject"])])
            .ttl(Duration::from_millis(300))
            .request_id("r-default")
    };
    let mut agent = server.client().await;
    let response = within("the ask", agent.ask(defaulted()))
        .await
        .expect("the defaults are an outcome, not an error");
    assert_eq!(response.resolution(), Resolution::Defaulted);
    assert_eq!(response.resolved_by, "askgate:default");
    assert!(response.approvers.is_empty());
    assert_eq!(response.answers, [answer::select("go", ["Reject"])]);
    let Err(ReceiptError::NotApproved(claims)) = verify_receipt(
        &response.receipt,
        &jwks(&server).await,
        "default",
        &deploy(),
    ) else {
        panic!("defaults approve nothing")
    };
    assert_eq!(claims.resolution, "DEFAULTED");
    assert_eq!(claims.decision(), Some(Decision::Defaulted));

    let rpc_id = requested_with_action(&mut events).await;
    let resolved = next_resolved(&mut events).await;
    assert_eq!(resolved.rpc_id, rpc_id);
    assert_eq!(resolved.reason(), Resolution::Defaulted);
    assert_eq!(resolved.resolved_by, "askgate:default");
    assert_eq!(resolved.channel, "askgate");

    let again = within("the retry", agent.ask(defaulted()))
        .await
        .expect("the recorded outcome");
    assert_eq!(
        (again.rpc_id.as_str(), again.resolution()),
        (rpc_id.as_str(), Resolution::Defaulted)
    );

    let expired = within(
        "an ask without defaults",
        agent.ask(ship("s").ttl(Duration::from_millis(300))),
    )
    .await
    .expect_err("expired");
    assert_eq!(expired.reason(), Reason::AskExpired);
}
on_every_backend!(
    #[tokio::test]
    default_answers_apply_when_nobody_answers
);

/// Default answers are a valid answer batch, checked when the ask is made.
async fn invalid_default_answers_are_refused_up_front() {
    let server = TestServer::start().await;
    let mut agent = server.client().await;
    let error: Error = agent
        .ask(ship("s").default_answers(vec![answer::select("go", ["Maybe"])]))
        .await
        .expect_err("not an option");
    assert_eq!(error.reason(), Reason::BadRequest);
    assert!(
        error.violations()[0].0.starts_with("default_answers[0]"),
        "{:?}",
        error.violations()
    );
}
on_every_backend!(
    #[tokio::test]
    invalid_default_answers_are_refused_up_front
);

/// Only the channels an ask allows may resolve it; a client names its channel in
/// `askgate-channel`, cannot claim the server's own, and gRPC-Web is the console.
async fn only_the_allowed_channels_resolve_an_ask() {
    let server = TestServer::start().await;
    let mut watcher = server.client().await;
    let mut events = subscribed(&mut watcher, "s").await;
    let mut agent = server.client().await;
    let ask = Ask::new("s")
        .question(question("go", "Go?").choice("yes"))
        .allowed_channels(["console", "tui"]);
    let call = tokio::spawn(async move { agent.ask(ask).await });
    let rpc_id = loop {
        if let Event::Requested { requested, .. } = next_event(&mut events).await {
            assert_eq!(requested.allowed_channels, ["console", "tui"]);
            break requested.rpc_id;
        }
    };
    let yes = || vec![answer::select("go", ["yes"])];

    let mut plain = server.client().await;
    let refused = plain.answer("s", &rpc_id, yes()).await.expect_err("grpc");
    assert_eq!(refused.reason(), Reason::ChannelNotAllowed);
    assert_eq!(refused.code(), tonic::Code::PermissionDenied);
    let refused = plain.cancel("s", &rpc_id, "").await.expect_err("grpc");
    assert_eq!(refused.reason(), Reason::ChannelNotAllowed);
    let mut ops = server.client().await.with_channel("ops").expect("a name");
    let refused = ops.answer("s", &rpc_id, yes()).await.expect_err("ops");
    assert_eq!(refused.reason(), Reason::ChannelNotAllowed);
    let mut pretender = server
        .client()
        .await
        .with_channel("console")
        .expect("a name");
    let refused = pretender
        .answer("s", &rpc_id, yes())
        .await
        .expect_err("claimed");
    assert_eq!(refused.reason(), Reason::BadRequest);
    assert!(refused.message().contains("askgate-channel"), "{refused:?}");

    let mut tui: Client = server.client().await.with_channel("tui").expect("a name");
    tui.answer("s", &rpc_id, yes()).await.expect("tui may");
    within("the ask", call)
        .await
        .expect("join")
        .expect("answered");
    let resolved = next_resolved(&mut events).await;
    assert_eq!(
        (resolved.channel.as_str(), resolved.rpc_id.as_str()),
        ("tui", rpc_id.as_str())
    );

    // The console: every gRPC-Web call, whatever header it sends.
    let mut agent = server.client().await;
    let ask = Ask::new("s")
        .question(question("go", "Go?").choice("yes"))
        .allowed_channels(["console"]);
    let call = tokio::spawn(async move { agent.ask(ask).await });
    let rpc_id = next_requested(&mut events).await;
    let mut console = web_client(&server);
    let mut request = tonic::Request::new(AnswerRequest {
        session_id: "s".into(),
        rpc_id: rpc_id.clone(),
        answers: yes(),
        grant: None,
    });
    request
        .metadata_mut()
        .insert("askgate-channel", "tui".parse().expect("ascii"));
    console.answer(request).await.expect("the console may");
    within("the ask", call)
        .await
        .expect("join")
        .expect("answered");
    let resolved = next_resolved(&mut events).await;
    assert_eq!(resolved.channel, "console");
}
on_every_backend!(
    #[tokio::test]
    only_the_allowed_channels_resolve_an_ask
);

/// `askgate receipt verify`, as an executor's script runs it: 0 for the action the
/// human approved, 1 for other arguments or another server's keys, 2 for an action
/// it cannot read.
#[tokio::test]
async fn the_cli_verifies_a_receipt_against_the_action() {
    let dir = TempDir::new();
    let server = signing(&dir, KEY_A, Duration::from_secs(600)).await;
    let (response, rpc_id) = answered(&server, "Approve").await;
    let token = response.receipt;
    let jwks_url = format!("{}/.well-known/jwks.json", server.url());
    let approved = dir.file(
        "approved.json",
        r#"{"name": "deploy", "arguments": {"env": "prod", "replicas": 3, "service": "api"}}"#,
    );
    let (code, out, err) = verify(&jwks_url, path(&approved), &token).await;
    assert_eq!(code, 0, "{err}");
    let claims: serde_json::Value = serde_json::from_str(&out).expect("the claims");
    assert_eq!(claims["rpc_id"], rpc_id);

    let other = dir.file(
        "other.json",
        r#"{"name": "deploy", "arguments_json": "{\"env\":\"prod\",\"replicas\":3,\"service\":\"db\"}"}"#,
    );
    let (code, _, err) = verify(&jwks_url, path(&other), &token).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("another action"), "{err}");

    let stranger_dir = TempDir::new();
    let stranger = signing(&stranger_dir, KEY_B, Duration::from_secs(600)).await;
    let keys_file = dir.file(
        "stranger.json",
        serde_json::to_vec(&jwks(&stranger).await).expect("json"),
    );
    let (code, _, err) = verify(path(&keys_file), path(&approved), &token).await;
    assert_eq!(code, 1, "{err}");

    let broken = dir.file(
        "broken.json",
        r#"{"name": "deploy", "arguments_json": "{"}"#,
    );
    let (code, _, err) = verify(&jwks_url, path(&broken), &token).await;
    assert_eq!(code, 2, "{err}");
}

/// `askgate receipt verify --jwks <jwks> --tenant default --action <action> <token>`:
/// exit code, out, err.
async fn verify(jwks: &str, action: &str, token: &str) -> (i32, String, String) {
    finish(askgate(&[
        "receipt", "verify", "--jwks", jwks, "--tenant", "default", "--action", action, token,
    ]))
    .await
}

fn path(path: &std::path::Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// Approvers racing on one quorum ask through three nodes: one tally, so exactly the
/// needed number are counted (the others find it decided), the ask resolves ANSWERED
/// with them, and the audit log holds each counted vote and the resolution.
async fn approvers_racing_across_nodes_make_one_tally() {
    const NEEDED: usize = 3;
    const APPROVERS: usize = 8;
    let dir = TempDir::new();
    let mut keys = serde_json::json!({ "agent": {"tenant": "acme", "sub": "agent-1", "roles": ["agent", "ui"]} });
    for i in 0..APPROVERS {
        keys[format!("a{i}")] =
            serde_json::json!({"tenant": "acme", "sub": format!("a{i}"), "roles": ["ui", "admin"]});
    }
    let (path, tokens) = crate::scenarios::keys_file(&dir, &keys).await;
    let config = ServerConfig {
        auth: askgate_server::server::AuthConfig::Keys(path.into()),
        ..test_config()
    };
    let first = TestServer::start_with(config.clone()).await;
    let mut nodes = vec![first];
    for _ in 0..2 {
        let peer = nodes[0]
            .start_peer_with(config.clone())
            .await
            .expect("a peer");
        nodes.push(peer);
    }
    let mut agent = nodes[0]
        .client()
        .await
        .with_token(&tokens["agent"])
        .expect("token");
    let ask = Ask::new("s")
        .question(question("go", "Go?").choice("yes"))
        .hold_unattended()
        .quorum(NEEDED as u32)
        .action("deploy", "{}");
    let call = tokio::spawn(async move { agent.ask(ask).await });
    let watcher = nodes[1]
        .client()
        .await
        .with_token(&tokens["a0"])
        .expect("token");
    let rpc_id = crate::support::eventually("the ask", || {
        let mut watcher = watcher.clone();
        async move {
            watcher
                .list_pending("s")
                .await
                .ok()?
                .pop()
                .map(|p| p.rpc_id)
        }
    })
    .await;
    let mut votes = Vec::new();
    for i in 0..APPROVERS {
        let mut approver = nodes[i % 3]
            .client()
            .await
            .with_token(&tokens[&format!("a{i}")])
            .expect("token");
        let rpc_id = rpc_id.clone();
        votes.push(tokio::spawn(async move {
            let result = approver
                .answer("s", &rpc_id, vec![answer::select("go", ["yes"])])
                .await;
            (format!("a{i}"), result)
        }));
    }
    let mut counted = Vec::new();
    for vote in votes {
        let (subject, result) = within("a vote", vote).await.expect("join");
        match result {
            Ok(()) => counted.push(subject),
            Err(e) => assert_eq!(e.reason(), Reason::NotPending, "{subject}: {e}"),
        }
    }
    assert_eq!(counted.len(), NEEDED, "{counted:?}");
    let response = within("the ask", call)
        .await
        .expect("join")
        .expect("answered");
    let mut approvers = response.approvers.clone();
    approvers.sort();
    counted.sort();
    assert_eq!(approvers, counted);
    assert!(response.approvers.last() == Some(&response.resolved_by));

    let admin = nodes[2]
        .client()
        .await
        .with_token(&tokens["a0"])
        .expect("token");
    let records = crate::support::eventually("the audit records", || {
        let mut admin = admin.clone();
        async move {
            let mut stream = admin.export_audit(0, 0).await.ok()?;
            let mut records = Vec::new();
            while let Some(Ok(record)) = tokio_stream::StreamExt::next(&mut stream).await {
                records.push(record);
            }
            (records.len() >= NEEDED).then_some(records)
        }
    })
    .await;
    assert_eq!(
        askgate_server::backend::audit::verify(&records),
        Ok(NEEDED as u64)
    );
    // Approvers answering at once: a vote's record may follow the resolution its quorum
    // completed (each is appended as it is made); the chain holds each once.
    let mut kinds: Vec<String> = records
        .iter()
        .map(|r| {
            let body: serde_json::Value = serde_json::from_str(&r.body_json).expect("json");
            body["kind"].as_str().expect("kind").to_owned()
        })
        .collect();
    kinds.sort();
    assert_eq!(kinds, ["ask.resolved", "ask.vote", "ask.vote"]);
}

#[tokio::test]
async fn approvers_racing_across_redis_nodes_make_one_tally() {
    crate::support::Backend::Redis
        .run(approvers_racing_across_nodes_make_one_tally())
        .await;
}

#[tokio::test]
async fn approvers_racing_across_cluster_nodes_make_one_tally() {
    crate::support::Backend::Cluster
        .run(approvers_racing_across_nodes_make_one_tally())
        .await;
}
