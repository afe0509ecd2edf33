//! The audit log against real servers (docs/approvals.md): every resolution and every
//! admin change in the tenant's hash chain, exported over gRPC and by the CLI, verified,
//! a changed record found; three Redis nodes under load keep one chain that holds every
//! resolution the agents saw.

use std::collections::HashMap;

use askgate_client::{Ask, Client, Event, answer, question};
use askgate_proto::v1::{AuditRecord, CreateEndpointRequest};
use askgate_server::server::ApprovalConfig;
use askgate_server::{backend::audit, channels::delivery::WebhookConfig, server::ServerConfig};
use serde_json::Value;
use tokio_stream::StreamExt;

use crate::support::{
    Backend, TempDir, TestServer, askgate, eventually, finish, next_event, next_requested,
    subscribed, test_config, within,
};

/// The tenant's whole log.
pub(crate) async fn export(client: &mut Client) -> Vec<AuditRecord> {
    let mut stream = within("export", client.export_audit(0, 0))
        .await
        .expect("export");
    let mut records = Vec::new();
    while let Some(record) = within("a record", stream.next()).await {
        records.push(record.expect("a record"));
    }
    records
}

fn body(record: &AuditRecord) -> Value {
    serde_json::from_str(&record.body_json).expect("a JSON body")
}

/// Waits until the log holds `count` records, and returns them.
async fn log_of(client: &Client, count: usize) -> Vec<AuditRecord> {
    eventually("the audit records", || {
        let mut client = client.clone();
        async move {
            let records = export(&mut client).await;
            (records.len() >= count).then_some(records)
        }
    })
    .await
}

async fn every_resolution_and_admin_change_is_in_the_chain() {
    let server = TestServer::start_with(ServerConfig {
        webhooks: WebhookConfig {
            allow_private: true,
            ..WebhookConfig::default()
        },
        ..test_config()
    })
    .await;
    let mut admin = server.client().await;
    let endpoint = admin
        .create_endpoint(CreateEndpointRequest {
            url: "http://127.0.0.1:9/askgate".into(),
            ..Default::default()
        })
        .await
        .expect("create an endpoint");
    admin
        .delete_endpoint(&endpoint.id)
        .await
        .expect("delete it");

    let mut tui = server.client().await.with_channel("tui").expect("a name");
    let mut events = subscribed(&mut tui, "s").await;
    let mut agent = server.client().await;
    let deploy = Ask::new("s")
        .question(question("go", "Deploy?").choice("yes").choice("no"))
        .action("deploy", r#"{"env":"prod"}"#)
        .approvers(["anonymous"]);
    let call = tokio::spawn(async move { agent.ask(deploy).await });
    let rpc_id = next_requested(&mut events).await;
    tui.answer("s", &rpc_id, vec![answer::select("go", ["yes"])])
        .await
        .expect("answer");
    within("the ask", call)
        .await
        .expect("join")
        .expect("answered");
    let mut agent = server.client().await;
    let call = tokio::spawn(async move {
        agent
            .ask(Ask::new("s").question(question("why", "Why?")))
            .await
    });
    let cancelled = next_requested(&mut events).await;
    tui.cancel("s", &cancelled, "not now")
        .await
        .expect("cancel");
    within("the ask", call)
        .await
        .expect("join")
        .expect_err("cancelled");

    let records = log_of(&admin, 4).await;
    assert_eq!(audit::verify(&records), Ok(4), "{records:?}");
    let bodies: Vec<Value> = records.iter().map(body).collect();
    assert_eq!(bodies[0]["kind"], "admin.endpoint.created");
    assert_eq!(bodies[0]["details"]["id"], endpoint.id.as_str());
    assert_eq!(bodies[0]["channel"], "grpc");
    assert_eq!(bodies[1]["kind"], "admin.endpoint.deleted");
    let answered = &bodies[2];
    assert_eq!(answered["kind"], "ask.resolved");
    assert_eq!(answered["rpc_id"], rpc_id.as_str());
    assert_eq!(answered["session_id"], "s");
    assert_eq!(answered["resolution"], "ANSWERED");
    assert_eq!(answered["channel"], "tui");
    assert_eq!(answered["tenant"], "default");
    assert_eq!(
        answered["action_digest"],
        askgate_client::receipt::action_digest("deploy", r#"{"env":"prod"}"#)
            .expect("a digest")
            .as_str()
    );
    assert_eq!(
        answered["answers"],
        serde_json::json!([{"id": "go", "selected": ["yes"]}])
    );
    // Whom the ask allowed to answer.
    assert_eq!(
        answered["approver_rule"],
        serde_json::json!({"subjects": ["anonymous"], "groups": []})
    );
    let cancel = &bodies[3];
    assert_eq!(cancel["resolution"], "CANCELLED");
    assert!(cancel.get("approver_rule").is_none(), "{cancel}");
    assert_eq!(cancel["reason"], "not now");
    assert_eq!(cancel["rpc_id"], cancelled.as_str());
    // Pages: after a seq, at most a limit.
    let mut page = within("export", admin.export_audit(2, 1))
        .await
        .expect("export");
    let first = within("a record", page.next())
        .await
        .expect("one")
        .expect("a record");
    assert_eq!(first.seq, 3);
    assert!(within("the end", page.next()).await.is_none());
}
on_every_backend!(
    #[tokio::test]
    every_resolution_and_admin_change_is_in_the_chain
);

/// `askgate audit verify --jwks URL --tenant T FILE` for `file`: exit code and stderr.
pub(crate) async fn verify_export(
    server: &TestServer,
    tenant: &str,
    file: &std::path::Path,
    anchor: Option<&str>,
) -> (i32, String) {
    let jwks = format!("{}/.well-known/jwks.json", server.url());
    let mut args = vec!["audit", "verify", "--jwks", &jwks, "--tenant", tenant];
    if let Some(anchor) = anchor {
        args.extend(["--anchor", anchor]);
    }
    args.push(file.to_str().expect("utf-8"));
    let (code, _, err) = finish(askgate(&args)).await;
    (code, err)
}

/// `lines` as a file of `dir`.
fn lines_file(dir: &TempDir, name: &str, lines: &[String]) -> std::path::PathBuf {
    dir.file(
        name,
        lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
    )
}

/// Each record line re-hashed from `prev` on, as someone rewriting the log would.
fn rechained(lines: &[String]) -> Vec<String> {
    let mut prev = String::new();
    lines
        .iter()
        .map(|line| {
            let mut record: Value = serde_json::from_str(line).expect("a JSON line");
            if record.get("head").is_some() {
                return line.clone();
            }
            let body = record["body"].as_str().expect("a body").to_owned();
            record["prev_hash"] = prev.clone().into();
            let hash = audit::link_hash(&prev, &body);
            record["hash"] = hash.clone().into();
            prev = hash;
            record.to_string()
        })
        .collect()
}

/// `askgate audit export` writes the records and, last, the head the server signed
/// after them; `askgate audit verify --jwks --tenant` accepts exactly that. A
/// changed, re-chained, renumbered, truncated (at either end) or emptied export fails,
/// naming why, and so does one verified for another tenant; an export after an
/// earlier one verifies from that one's head (`--anchor`). Before, every one of these
/// verified, even an empty file ("0 records verify").
async fn an_export_proves_its_end() {
    let keys_dir = TempDir::new();
    let server = crate::approvals::signing(
        &keys_dir,
        crate::approvals::KEY_A,
        std::time::Duration::from_secs(600),
    )
    .await;
    let mut ui = server.client().await;
    let mut events = subscribed(&mut ui, "s").await;
    for i in 0..4 {
        let mut agent = server.client().await;
        let call = tokio::spawn(async move {
            agent
                .ask(Ask::new("s").question(question("go", "Go?").choice("yes")))
                .await
        });
        let rpc_id = next_requested(&mut events).await;
        ui.answer("s", &rpc_id, vec![answer::select("go", ["yes"])])
            .await
            .unwrap_or_else(|e| panic!("answer {i}: {e}"));
        within("the ask", call)
            .await
            .expect("join")
            .expect("answered");
    }
    log_of(&ui, 4).await;
    let (code, out, err) = finish(askgate(&["audit", "export", "--addr", &server.url()])).await;
    assert_eq!(code, 0, "{err}");
    let lines: Vec<String> = out.lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 5, "four records and the head: {out}");
    let head: Value = serde_json::from_str(&lines[4]).expect("the head line");
    assert_eq!(head["head"]["seq"], 4);
    assert_eq!(head["head"]["tenant"], "default");
    let dir = TempDir::new();
    let whole = lines_file(&dir, "audit.jsonl", &lines);
    let (code, err) = verify_export(&server, "default", &whole, None).await;
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("4 records verify"), "{err}");

    let refused = |name: &'static str, lines: Vec<String>, why: &'static str| {
        let file = lines_file(&dir, name, &lines);
        let server = &server;
        async move {
            let (code, err) = verify_export(server, "default", &file, None).await;
            assert_eq!(code, 1, "{name}: {err}");
            assert!(err.contains(why), "{name}: {err}");
        }
    };
    // Who answered the second record, rewritten.
    let mut changed = lines.clone();
    let mut record: Value = serde_json::from_str(&changed[1]).expect("json");
    let mut fields: Value =
        serde_json::from_str(record["body"].as_str().expect("a body")).expect("json");
    fields["subject"] = "mallory".into();
    record["body"] = askgate_client::receipt::canonical(&fields).into();
    changed[1] = record.to_string();
    refused("changed.jsonl", changed.clone(), "seq 2").await;
    // ...and the chain re-hashed after it: every link holds, the signed head does not.
    refused("rechained.jsonl", rechained(&changed), "signed head").await;
    // A record dropped from the middle, the rest renumbered and re-chained.
    let mut renumbered: Vec<String> = lines.clone();
    renumbered.remove(1);
    for (i, line) in renumbered.iter_mut().enumerate().take(3) {
        let mut record: Value = serde_json::from_str(line).expect("json");
        let mut fields: Value =
            serde_json::from_str(record["body"].as_str().expect("a body")).expect("json");
        fields["seq"] = (i as u64 + 1).into();
        record["seq"] = (i as u64 + 1).into();
        record["body"] = askgate_client::receipt::canonical(&fields).into();
        *line = record.to_string();
    }
    refused("renumbered.jsonl", rechained(&renumbered), "signed head").await;
    // The last record cut off (its head kept), and the head cut off.
    let mut tail_cut = lines.clone();
    tail_cut.remove(3);
    refused("tail.jsonl", tail_cut, "signed head is at seq 4").await;
    refused("headless.jsonl", lines[..4].to_vec(), "no signed head").await;
    // The first record cut off.
    refused("head_cut.jsonl", lines[1..].to_vec(), "starts at seq 2").await;
    // Nothing but the head, and nothing at all.
    refused("empty.jsonl", lines[4..].to_vec(), "holds no record").await;
    refused("nothing.jsonl", Vec::new(), "no signed head").await;
    // Another tenant's export: the head is signed for "default".
    let (code, err) = verify_export(&server, "acme", &whole, None).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("tenant"), "{err}");

    // An export after the first four verifies from their head.
    let mut agent = server.client().await;
    let call = tokio::spawn(async move {
        agent
            .ask(Ask::new("s").question(question("go", "Go?").choice("yes")))
            .await
    });
    let rpc_id = next_requested(&mut events).await;
    ui.answer("s", &rpc_id, vec![answer::select("go", ["yes"])])
        .await
        .expect("answer");
    within("the ask", call)
        .await
        .expect("join")
        .expect("answered");
    log_of(&ui, 5).await;
    let (code, out, err) = finish(askgate(&[
        "audit",
        "export",
        "--addr",
        &server.url(),
        "--after",
        "4",
    ]))
    .await;
    assert_eq!(code, 0, "{err}");
    let later = lines_file(
        &dir,
        "later.jsonl",
        &out.lines().map(str::to_owned).collect::<Vec<_>>(),
    );
    let anchor = head["head"]["hash"]
        .as_str()
        .expect("the first head's hash");
    let (code, err) = verify_export(&server, "default", &later, Some(anchor)).await;
    assert_eq!(code, 0, "{err}");
    let (code, err) = verify_export(&server, "default", &later, None).await;
    assert_eq!(code, 1, "without the anchor: {err}");
    let (code, err) = verify_export(&server, "default", &later, Some(&"0".repeat(64))).await;
    assert_eq!(code, 1, "another anchor: {err}");
}
on_every_backend!(
    #[tokio::test]
    an_export_proves_its_end
);

/// Three nodes on one Redis, agents asking and humans answering through all of them at
/// once: the tenant's log is one chain that verifies, and holds each resolution the
/// agents saw exactly once.
async fn three_nodes_keep_one_chain_with_every_resolution() {
    const ASKS: usize = 60;
    let keys_dir = TempDir::new();
    let config = ServerConfig {
        approvals: ApprovalConfig {
            receipt_key_files: vec![keys_dir.file("receipt.pem", crate::approvals::KEY_A)],
            ..test_config().approvals
        },
        ..test_config()
    };
    let first = TestServer::start_with(config.clone()).await;
    let mut nodes = vec![first];
    for _ in 0..2 {
        let peer = nodes[0]
            .start_peer_with(config.clone())
            .await
            .expect("a peer on redis");
        nodes.push(peer);
    }
    let mut answerers = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        let mut ui = node.client().await;
        let session = format!("s{i}");
        let mut events = subscribed(&mut ui, &session).await;
        answerers.push(tokio::spawn(async move {
            let mut answered = 0;
            while answered < ASKS / 3 {
                if let Event::Requested { requested, .. } = next_event(&mut events).await {
                    let _ = ui
                        .answer(
                            &session,
                            &requested.rpc_id,
                            vec![answer::select("go", ["yes"])],
                        )
                        .await;
                    answered += 1;
                }
            }
        }));
    }
    let mut calls = Vec::new();
    for i in 0..ASKS {
        // Asked through one node, in a session another node's human answers.
        let mut agent = nodes[(i + 1) % 3].client().await;
        let session = format!("s{}", i % 3);
        calls.push(tokio::spawn(async move {
            agent
                .ask(Ask::new(&session).question(question("go", "Go?").choice("yes")))
                .await
        }));
    }
    let mut seen = Vec::new();
    for call in calls {
        let response = within("an ask", call)
            .await
            .expect("join")
            .expect("answered");
        seen.push(response.rpc_id);
    }
    for answerer in answerers {
        within("the answerers", answerer).await.expect("join");
    }
    let admin = nodes[2].client().await;
    let records = log_of(&admin, ASKS).await;
    assert_eq!(audit::verify(&records), Ok(ASKS as u64));
    let mut recorded: HashMap<String, usize> = HashMap::new();
    for record in &records {
        let rpc_id = body(record)["rpc_id"]
            .as_str()
            .expect("an rpc_id")
            .to_owned();
        *recorded.entry(rpc_id).or_default() += 1;
    }
    for rpc_id in &seen {
        assert_eq!(recorded.get(rpc_id), Some(&1), "{rpc_id} recorded once");
    }
    assert_eq!(recorded.len(), ASKS, "no record of anything else");
    // What an auditor runs: the export of another node, verified by the CLI.
    let (code, out, err) = finish(askgate(&["audit", "export", "--addr", &nodes[0].url()])).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), ASKS + 1, "the records and the head");
    let dir = TempDir::new();
    let file = dir.file("audit.jsonl", &out);
    let (code, err) = verify_export(&nodes[1], "default", &file, None).await;
    assert_eq!(code, 0, "{err}");
    assert!(err.contains(&format!("{ASKS} records verify")), "{err}");
}

#[tokio::test]
async fn three_redis_nodes_keep_one_chain_with_every_resolution() {
    Backend::Redis
        .run(three_nodes_keep_one_chain_with_every_resolution())
        .await;
}

#[tokio::test]
async fn three_cluster_nodes_keep_one_chain_with_every_resolution() {
    Backend::Cluster
        .run(three_nodes_keep_one_chain_with_every_resolution())
        .await;
}

/// A Redis node that dies right after an admin change, before it appended the change's
/// audit record, leaves the record with the change (written in one script): the next
/// node takes it into the chain, and the record is not left waiting.
#[tokio::test]
async fn on_redis_an_admin_record_left_by_a_dead_node_is_taken_in() {
    use askgate_engines::redis_engine::{RedisBackend, RedisConfig};
    use askgate_server::{
        approvals::Audit,
        backend::{
            StateConfig,
            hooks::{HookStore, StoreLimits, records::EndpointRecord},
        },
        domain::{DEFAULT_TENANT, Resolver},
    };
    let redis = askgate_testing::RedisServer::start().await;
    // What the dead node left: the endpoint and its record, nothing appended.
    let engine = RedisBackend::connect(RedisConfig::new(&redis.url), StateConfig::default())
        .await
        .expect("connect");
    let store = engine.hook_store(StoreLimits {
        max_endpoints: 10,
        max_queued: 10,
        keep_finished: 10,
        max_people: 10,
    });
    let endpoint = EndpointRecord {
        id: "ep_left_behind".into(),
        tenant: DEFAULT_TENANT.into(),
        url: "https://hooks.example.com/in".into(),
        events: Vec::new(),
        description: String::new(),
        labels: HashMap::new(),
        secret: "whsec_c2VjcmV0".into(),
        provides: false,
        created_ms: 1,
        session_prefix: String::new(),
        slack: None,
        channel: None,
    };
    let by = Resolver::new("ana", "cli");
    let details = serde_json::json!({ "id": endpoint.id, "url": endpoint.url });
    let entry = Audit::admin_entry(DEFAULT_TENANT, &by, "endpoint.created", details);
    store
        .create_endpoint(&endpoint, &entry)
        .await
        .expect("the change and its record");

    let nodes = crate::support::ServeProcess::redis_nodes(&redis.url, false, 1, &[]).await;
    let client = nodes[0].client().await;
    let records = log_of(&client, 1).await;
    let body = body(&records[0]);
    assert_eq!(body["kind"], "admin.endpoint.created", "{body}");
    assert_eq!(body["details"]["id"], "ep_left_behind");
    assert_eq!(
        (body["subject"].as_str(), body["channel"].as_str()),
        (Some("ana"), Some("cli"))
    );
    eventually("the record to leave the hook store", || {
        let store = &store;
        async move { store.unaudited(10).await.ok().filter(Vec::is_empty) }
    })
    .await;
}
