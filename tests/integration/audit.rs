//! The audit log against real servers (docs/approvals.md): every resolution and every
//! admin change in the tenant's hash chain, exported over gRPC and by the CLI, verified,
//! a changed record found; three Redis nodes under load keep one chain that holds every
//! resolution the agents saw.

use std::collections::HashMap;

use askgate_client::{Ask, Client, Event, answer, question};
use askgate_proto::v1::{AuditRecord, CreateEndpointRequest};
use askgate_server::{backend::audit, server::ServerConfig, webhooks::WebhookConfig};
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
        .action("deploy", r#"{"env":"prod"}"#);
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
    let cancel = &bodies[3];
    assert_eq!(cancel["resolution"], "CANCELLED");
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

/// `askgate audit export` writes JSON lines that `askgate audit verify` accepts, and a
/// record changed in the file is named.
#[tokio::test]
async fn the_cli_exports_verifies_and_names_a_changed_record() {
    let server = TestServer::start().await;
    let mut ui = server.client().await;
    let mut events = subscribed(&mut ui, "s").await;
    for i in 0..3 {
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
    log_of(&ui, 3).await;
    let (code, out, err) = finish(askgate(&["audit", "export", "--addr", &server.url()])).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 3, "{out}");
    let dir = TempDir::new();
    let file = dir.file("audit.jsonl", &out);
    let path = file.to_str().expect("utf-8");
    let (code, _, err) = finish(askgate(&["audit", "verify", path])).await;
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("3 records verify"), "{err}");

    // Someone rewrites who answered the second record.
    let changed: String = out
        .lines()
        .enumerate()
        .map(|(i, line)| {
            let mut record: Value = serde_json::from_str(line).expect("a JSON line");
            if i == 1 {
                let body = record["body"].as_str().expect("a body");
                let mut fields: Value = serde_json::from_str(body).expect("a JSON body");
                fields["subject"] = "mallory".into();
                record["body"] = audit::canonical(&fields).into();
            }
            format!("{record}\n")
        })
        .collect();
    let file = dir.file("changed.jsonl", changed);
    let (code, _, err) = finish(askgate(&["audit", "verify", file.to_str().expect("utf-8")])).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("seq 2"), "{err}");

    // A record dropped from the middle.
    let dropped: String = out
        .lines()
        .enumerate()
        .filter(|(i, _)| *i != 1)
        .map(|(_, l)| format!("{l}\n"))
        .collect();
    let file = dir.file("dropped.jsonl", dropped);
    let (code, _, err) = finish(askgate(&["audit", "verify", file.to_str().expect("utf-8")])).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("seq 3"), "{err}");
}

/// Three nodes on one Redis, agents asking and humans answering through all of them at
/// once: the tenant's log is one chain that verifies, and holds each resolution the
/// agents saw exactly once.
async fn three_nodes_keep_one_chain_with_every_resolution() {
    const ASKS: usize = 60;
    let first = TestServer::start().await;
    let mut nodes = vec![first];
    for _ in 0..2 {
        let peer = nodes[0].start_peer().await.expect("a peer on redis");
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
    assert_eq!(out.lines().count(), ASKS);
    let dir = TempDir::new();
    let file = dir.file("audit.jsonl", &out);
    let (code, _, err) = finish(askgate(&["audit", "verify", file.to_str().expect("utf-8")])).await;
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
