//! Secret answers (docs/approvals.md) against real nodes: the waiting call gets them, a
//! retry of it too, and nothing else does. Every output of a run is searched for the
//! secret: the node's whole log at debug, every event a UI following the session got,
//! every webhook delivery, the audit log, and the store's own files (SQLite's, and
//! Redis's saved without compression). Each search also finds something that is
//! there, so that it can fail.

use askgate_client::{Ask, Client, Reason, answer, question};
use askgate_proto::v1::{
    CreateEndpointRequest, Resolution, SubscribeRequest, SubscribeResponse,
    subscribe_response::Event,
};
use askgate_testing::RedisServer;
use ring::hmac;
use serde_json::Value;
use tokio_stream::StreamExt;

use crate::{
    support::{ServeProcess, TempDir, within},
    webhooks::Receiver,
};

/// The secret a human types. Nothing but the waiting call may ever hold it.
const SECRET: &str = "zq7731-unguessable-s3cret";
/// A question's text, which every output holds: what shows a search can find things.
const SHOWN: &str = "Rotate the signing key now?";
/// The nodes' `--secret-key-file`: 32 bytes as hex.
const KEY_HEX: &str = "5a1f0c3e9b7d2a4f6e8c1b3d5f7a9c2e4b6d8f0a1c3e5b7d9f2a4c6e8b0d1f3a";

fn secret_ask(request_id: &str) -> Ask {
    Ask::new("s")
        .request_id(request_id)
        .question(question("go", SHOWN).choice("Rotate").choice("Keep"))
        .question(question("code", "The one-time code from your token?").secret())
}

/// Where a run keeps its state, to search it afterwards.
enum Store<'a> {
    Memory,
    Sqlite(&'a std::path::Path),
    Redis(&'a RedisServer),
}

impl Store<'_> {
    /// Every byte the store holds, from its files.
    async fn bytes(&self) -> Vec<u8> {
        match self {
            Self::Memory => Vec::new(),
            Self::Sqlite(dir) => {
                let mut all = Vec::new();
                for entry in std::fs::read_dir(dir).expect("the data directory") {
                    let path = entry.expect("an entry").path();
                    if path.is_file() {
                        all.extend(std::fs::read(&path).expect("a store file"));
                    }
                }
                all
            }
            Self::Redis(redis) => {
                let client = redis::Client::open(redis.url.as_str()).expect("a Redis URL");
                let mut conn = client
                    .get_multiplexed_async_connection()
                    .await
                    .expect("connect to Redis");
                let _: () = redis::cmd("CONFIG")
                    .arg("SET")
                    .arg("rdbcompression")
                    .arg("no")
                    .query_async(&mut conn)
                    .await
                    .expect("CONFIG SET");
                let _: () = redis::cmd("SAVE")
                    .query_async(&mut conn)
                    .await
                    .expect("SAVE");
                let dir: Vec<String> = redis::cmd("CONFIG")
                    .arg("GET")
                    .arg("dir")
                    .query_async(&mut conn)
                    .await
                    .expect("CONFIG GET dir");
                std::fs::read(std::path::Path::new(&dir[1]).join("dump.rdb")).expect("dump.rdb")
            }
        }
    }
}

fn holds(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

/// What the audit log holds of a secret answer: HMAC-SHA256, under a key derived from
/// the sealing key (HMAC-SHA256 of the label), of the answers' canonical JSON.
fn expected_hmac() -> String {
    let key = hex::decode(KEY_HEX).expect("hex");
    let derived = hmac::sign(
        &hmac::Key::new(hmac::HMAC_SHA256, &key),
        b"askgate answers_hmac v1",
    );
    let answers = format!(r#"[{{"custom":"{SECRET}","id":"code","selected":[]}}]"#);
    hex::encode(hmac::sign(
        &hmac::Key::new(hmac::HMAC_SHA256, derived.as_ref()),
        answers.as_bytes(),
    ))
}

/// The next message of a raw subscription.
async fn next(stream: &mut tonic::Streaming<SubscribeResponse>) -> SubscribeResponse {
    within("an event", stream.next())
        .await
        .expect("the stream goes on")
        .expect("an event")
}

/// One run on a node started with `args`: the secret answered, looked for everywhere.
async fn the_secret_reaches_the_waiting_call_only(args: &[&str], store: Store<'_>) {
    let dir = TempDir::new();
    let key_file = dir.file("secret.key", KEY_HEX);
    let mut flags = vec!["--log", "debug", "--webhook-allow-private"];
    flags.extend(["--secret-key-file", key_file.to_str().expect("a path")]);
    flags.extend(args);
    let mut node = ServeProcess::start_with(&flags).await;
    let receiver = Receiver::start().await;
    let mut admin = node.client().await;
    let endpoint = admin
        .create_endpoint(CreateEndpointRequest {
            url: receiver.url("/all"),
            ..Default::default()
        })
        .await
        .expect("create an endpoint");
    receiver.configure("/all", &endpoint.secret, &[]).await;

    let mut ui = node.client().await;
    let mut events = ui
        .subscribe_raw(SubscribeRequest {
            session_id: "s".into(),
            ..Default::default()
        })
        .await
        .expect("follow s");
    let mut seen = Vec::new();
    let agent = node.client().await;
    let asking = {
        let mut agent = agent.clone();
        tokio::spawn(async move { agent.ask(secret_ask("req-1")).await })
    };
    let (requested, cursor) = loop {
        let message = next(&mut events).await;
        seen.push(format!("{message:?}"));
        if let Some(Event::Requested(requested)) = message.event {
            break (requested, message.cursor);
        }
    };
    assert!(requested.questions[1].secret, "the UI is told to mask it");
    ui.answer(
        "s",
        &requested.rpc_id,
        vec![
            answer::select("go", ["Rotate"]),
            answer::custom("code", SECRET),
        ],
    )
    .await
    .expect("answer");

    // The waiting call gets every answer, in the questions' order; a retry the same.
    let response = within("the ask", asking)
        .await
        .expect("join")
        .expect("answered");
    assert_eq!(response.resolution(), Resolution::Answered);
    let ids: Vec<&str> = response.answers.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(ids, ["go", "code"]);
    assert_eq!(response.answers[1].custom.as_deref(), Some(SECRET));
    let retried = agent
        .clone()
        .ask(secret_ask("req-1"))
        .await
        .expect("the retry");
    assert_eq!(retried.answers, response.answers);

    // The UI's `resolved` holds the other answers, and nothing sealed.
    let resolved = loop {
        let message = next(&mut events).await;
        seen.push(format!("{message:?}"));
        if let Some(Event::Resolved(resolved)) = message.event {
            break resolved;
        }
    };
    let ids: Vec<&str> = resolved.answers.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(ids, ["go"], "{resolved:?}");
    assert_eq!(
        resolved.sealed_answers, "",
        "sealed answers were handed out"
    );
    // A UI that resumes from before the resolution gets the history's copy: the same.
    let mut late = node.client().await;
    let mut replay = late
        .subscribe_raw(SubscribeRequest {
            session_id: "s".into(),
            after: cursor,
            ..Default::default()
        })
        .await
        .expect("resume s");
    loop {
        let message = next(&mut replay).await;
        seen.push(format!("{message:?}"));
        match message.event {
            Some(Event::Resolved(resolved)) => assert_eq!(resolved.sealed_answers, ""),
            Some(Event::Synced(_)) => break,
            _ => {}
        }
    }

    let deliveries = receiver
        .wait_for("ask.resolved", |r| r.event_type() == "ask.resolved")
        .await;
    let delivered = format!("{deliveries:?}");
    let audit = audit_of(&mut admin).await;
    let record = audit
        .iter()
        .find(|b| b["kind"] == "ask.resolved" && b["rpc_id"] == requested.rpc_id.as_str())
        .expect("the resolution's record");
    assert_eq!(
        record["answers"].as_array().map(Vec::len),
        Some(1),
        "{record}"
    );
    assert_eq!(record["answers_hmac"], expected_hmac().as_str(), "{record}");

    let log = node
        .kill_and_read_log()
        .await
        .expect("the node's log, under 8 MiB");
    let stored = store.bytes().await;
    let events = seen.join("\n");
    let audit = serde_json::to_string(&audit).expect("JSON");
    for (output, text) in [
        ("the node's log", log.as_bytes()),
        ("the UI's events", events.as_bytes()),
        ("the webhook deliveries", delivered.as_bytes()),
        ("the audit log", audit.as_bytes()),
    ] {
        assert!(!holds(text, SECRET), "the secret is in {output}");
        assert!(
            holds(text, &requested.rpc_id),
            "{output} was searched blind"
        );
    }
    assert!(
        !holds(&stored, SECRET),
        "the secret is in the store's files"
    );
    if !matches!(store, Store::Memory) {
        assert!(
            holds(&stored, SHOWN),
            "the store's files were searched blind"
        );
    }
}

/// The bodies of the tenant's audit records.
async fn audit_of(client: &mut Client) -> Vec<Value> {
    crate::audit::export(client)
        .await
        .iter()
        .map(|record| serde_json::from_str(&record.body_json).expect("a JSON body"))
        .collect()
}

#[tokio::test]
async fn on_memory_a_secret_answer_reaches_the_waiting_call_only() {
    the_secret_reaches_the_waiting_call_only(&[], Store::Memory).await;
}

#[tokio::test]
async fn on_sqlite_a_secret_answer_reaches_the_waiting_call_only() {
    let data = TempDir::new();
    let path = data.0.to_str().expect("a path").to_owned();
    the_secret_reaches_the_waiting_call_only(
        &["--backend", "sqlite", "--data-dir", &path],
        Store::Sqlite(&data.0),
    )
    .await;
}

#[tokio::test]
async fn on_redis_a_secret_answer_reaches_the_waiting_call_only() {
    let redis = RedisServer::start().await;
    the_secret_reaches_the_waiting_call_only(
        &["--backend", "redis", "--redis-url", &redis.url],
        Store::Redis(&redis),
    )
    .await;
}

/// Redis nodes without a shared key cannot seal an answer another node opens: they
/// take no secret question, and say why.
#[tokio::test]
async fn redis_nodes_without_a_key_refuse_secret_questions() {
    let redis = RedisServer::start().await;
    let nodes = ServeProcess::redis_nodes(&redis.url, false, 1, &[]).await;
    let refused = nodes[0]
        .client()
        .await
        .ask(secret_ask("req-1"))
        .await
        .expect_err("refused");
    assert_eq!(refused.reason(), Reason::BadRequest);
    let (field, why) = &refused.violations()[0];
    assert_eq!(field, "questions[1].secret");
    assert!(why.contains("--secret-key-file"), "{why}");
}
