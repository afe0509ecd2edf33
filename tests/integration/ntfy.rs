//! Answering from a phone's push through real servers and a local fake of ntfy's
//! publish API (no ntfy server installs here: the Go module proxy refuses
//! heckel.io/ntfy). The fake refuses what ntfy's documented JSON publish refuses: no
//! or a malformed topic, a message past 4,096 bytes (the default message size limit),
//! a priority outside 1-5, more than three actions, an action other than view, http,
//! broadcast or copy, one without a label, a view or http action without an http(s)
//! URL, and a protected topic's publish without its token; it is stricter in one way:
//! it refuses fields ntfy does not document (ntfy ignores them), so a misspelt field
//! fails the test. The phone is played by POSTing an http action's URL as ntfy's app
//! does.

use std::{convert::Infallible, sync::Arc, time::Duration};

use askgate_client::{Ask, Client, Reason, answer, question};
use askgate_proto::v1::ConnectNtfyRequest;
use askgate_server::server::{ApprovalConfig, HttpConfig};
use askgate_server::{ServerConfig, channels::delivery::WebhookConfig, origin::PublicUrl};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, body::Incoming, service::service_fn};
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::{net::TcpListener, sync::Notify, task::JoinHandle};
use tonic::Code;

use crate::support::{TempDir, TestServer, in_background, pending_rpc, test_config, within};

const PUBLIC: &str = "https://askgate.example.com";
const SECRET_KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
const TOPIC: &str = "askgate-ops_7f3a";
const TOKEN: &str = "tk_AgQdq7mVBoFD37zQVN29RhuMzNIz2";

/// The fields ntfy's JSON publish documents.
const FIELDS: [&str; 15] = [
    "topic",
    "message",
    "title",
    "tags",
    "priority",
    "actions",
    "click",
    "attach",
    "markdown",
    "icon",
    "filename",
    "delay",
    "email",
    "call",
    "sequence_id",
];
const ACTION_FIELDS: [&str; 9] = [
    "action", "label", "url", "clear", "method", "headers", "body", "intent", "extras",
];

/// Why ntfy would refuse `push`, if it would.
fn refusal(push: &Value, authorization: Option<&str>) -> Option<String> {
    let Some(fields) = push.as_object() else {
        return Some("400: not JSON".into());
    };
    if let Some(unknown) = fields.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Some(format!("400: an undocumented field {unknown}"));
    }
    let topic = push["topic"].as_str().unwrap_or_default();
    if topic.is_empty()
        || topic.len() > 64
        || !topic
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Some("400: invalid topic".into());
    }
    if authorization != Some(&format!("Bearer {TOKEN}")) {
        return Some("403: forbidden (a protected topic)".into());
    }
    if push["message"].as_str().is_some_and(|m| m.len() > 4096) {
        return Some("413: message too large".into());
    }
    if push
        .get("priority")
        .is_some_and(|p| !p.as_u64().is_some_and(|p| (1..=5).contains(&p)))
    {
        return Some("400: invalid priority".into());
    }
    let http = |u: &Value| {
        u.as_str()
            .is_some_and(|u| u.starts_with("https://") || u.starts_with("http://"))
    };
    if push.get("click").is_some_and(|c| !http(c)) {
        return Some("400: invalid click URL".into());
    }
    let actions = push["actions"].as_array().cloned().unwrap_or_default();
    if actions.len() > 3 {
        return Some("400: too many actions (at most 3)".into());
    }
    for action in &actions {
        let Some(keys) = action.as_object() else {
            return Some("400: an action must be an object".into());
        };
        if let Some(unknown) = keys.keys().find(|k| !ACTION_FIELDS.contains(&k.as_str())) {
            return Some(format!("400: an undocumented action field {unknown}"));
        }
        let kind = action["action"].as_str().unwrap_or_default();
        if !["view", "http", "broadcast", "copy"].contains(&kind) {
            return Some(format!("400: invalid action {kind:?}"));
        }
        if action["label"].as_str().is_none_or(|l| l.trim().is_empty()) {
            return Some("400: an action needs a label".into());
        }
        if matches!(kind, "view" | "http") && !http(&action["url"]) {
            return Some("400: a view or http action needs an http(s) URL".into());
        }
    }
    None
}

/// A fake ntfy on 127.0.0.1 (one protected topic).
struct FakeNtfy {
    url: String,
    pushes: Arc<Mutex<Vec<Value>>>,
    /// Publishes still to hold unanswered without taking them.
    hold: Arc<Mutex<usize>>,
    arrived: Arc<Notify>,
    task: JoinHandle<()>,
}

impl Drop for FakeNtfy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeNtfy {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (pushes, arrived) = (Arc::new(Mutex::new(Vec::new())), Arc::new(Notify::new()));
        let hold = Arc::new(Mutex::new(0));
        let (p, a, h) = (pushes.clone(), arrived.clone(), hold.clone());
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (p, a, h) = (p.clone(), a.clone(), h.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |request| {
                        Self::serve(p.clone(), a.clone(), h.clone(), request)
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self {
            url: format!("http://{addr}"),
            pushes,
            hold,
            arrived,
            task,
        }
    }

    async fn serve(
        pushes: Arc<Mutex<Vec<Value>>>,
        arrived: Arc<Notify>,
        hold: Arc<Mutex<usize>>,
        request: Request<Incoming>,
    ) -> Result<Response<Full<Bytes>>, Infallible> {
        let root = request.method() == hyper::Method::POST && request.uri().path() == "/";
        let authorization = request
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = request
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let push: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let refused = match root {
            true => refusal(&push, authorization.as_deref()),
            false => Some("404: JSON publishes go to the root URL".into()),
        };
        let status = refused
            .as_deref()
            .map_or(200, |r| r[..3].parse().unwrap_or(400));
        let mut record = push.clone();
        record["refused"] = refused.clone().into();
        let held = {
            let mut hold = hold.lock();
            let held = *hold > 0 && refused.is_none();
            *hold -= usize::from(held);
            held
        };
        if held {
            record["held"] = true.into();
            pushes.lock().push(record.clone());
            arrived.notify_waiters();
            // Never answered, never taken.
            std::future::pending::<()>().await;
        }
        pushes.lock().push(record);
        arrived.notify_waiters();
        let reply = match &refused {
            None => json!({ "id": "m1", "time": 1, "event": "message", "topic": push["topic"] }),
            Some(why) => json!({ "code": status * 100, "http": status, "error": why }),
        };
        let mut response = Response::new(Full::new(Bytes::from(reply.to_string())));
        *response.status_mut() = hyper::StatusCode::from_u16(status).expect("status");
        Ok(response)
    }

    /// The first push matching `matching`; fails at once if ntfy refused any.
    async fn wait_for(&self, what: &str, matching: impl Fn(&Value) -> bool) -> Value {
        within(what, async {
            loop {
                let notified = self.arrived.notified();
                {
                    let pushes = self.pushes.lock();
                    if let Some(bad) = pushes.iter().find(|p| !p["refused"].is_null()) {
                        panic!("ntfy refuses askgate's push: {bad}");
                    }
                    if let Some(push) = pushes.iter().find(|p| matching(p)) {
                        return push.clone();
                    }
                }
                notified.await;
            }
        })
        .await
    }

    /// The push of the ask in `session`.
    async fn asked(&self, session: &str) -> Value {
        let line = format!("session {session}");
        self.wait_for("the ask's push", |p| {
            p["held"] != true
                && p["message"]
                    .as_str()
                    .is_some_and(|m| m.lines().any(|l| l == line))
        })
        .await
    }
}

fn path(url: &Value) -> String {
    url.as_str()
        .and_then(|u| u.strip_prefix(PUBLIC))
        .expect("a link to the public URL")
        .to_owned()
}

/// POSTs (as ntfy's app does for an http action) or GETs `path`: the status.
async fn http(server: &TestServer, method: &str, path: &str) -> u16 {
    crate::support::request_to(server.addr, method, path, &[], "")
        .await
        .0
}

/// A node publishing to a fake ntfy (on loopback), with a quick retry, a secret key
/// and a public URL.
fn config(dir: &TempDir) -> ServerConfig {
    ServerConfig {
        webhooks: WebhookConfig {
            allow_private: true,
            retry_initial: Duration::from_millis(100),
            retry_max: Duration::from_millis(500),
            ..WebhookConfig::default()
        },
        approvals: ApprovalConfig {
            secret_key_file: Some(dir.file("secret.key", SECRET_KEY)),
            ..test_config().approvals
        },
        http: HttpConfig {
            public_url: Some(PublicUrl::parse(PUBLIC).expect("a public url")),
            ..test_config().http
        },
        ..test_config()
    }
}

fn connect_request(fake: &FakeNtfy) -> ConnectNtfyRequest {
    ConnectNtfyRequest {
        server_url: fake.url.clone(),
        topic: TOPIC.into(),
        token: Some(TOKEN.into()),
        session_prefix: "ops/".into(),
        ..Default::default()
    }
}

/// A fake ntfy, an askgate publishing to it, and the topic connected for `ops/`.
async fn with_topic() -> (FakeNtfy, TempDir, TestServer) {
    let (fake, dir) = (FakeNtfy::start().await, TempDir::new());
    let server = TestServer::start_with(config(&dir)).await;
    let mut admin = server.client().await;
    let connect = connect_request(&fake);
    let bad = ConnectNtfyRequest {
        topic: "not/a topic".into(),
        ..connect.clone()
    };
    assert_eq!(
        admin
            .connect_ntfy(bad)
            .await
            .expect_err("a bad topic")
            .code(),
        Code::InvalidArgument
    );
    let topic = admin.connect_ntfy(connect).await.expect("connect");
    assert!(topic.has_token);
    assert_eq!(
        admin.list_ntfy_topics().await.expect("list"),
        std::slice::from_ref(&topic)
    );
    assert!(
        !format!("{topic:?}").contains(TOKEN),
        "the token never comes back"
    );
    (fake, dir, server)
}

fn deploy(session: &str, options: &[&str]) -> Ask {
    let q = options
        .iter()
        .fold(question("q", "Deploy now?"), |q, o| q.choice(o));
    Ask::new(session).question(q)
}

async fn a_push_is_answered_by_its_action_once_and_replaced_by_the_outcome() {
    let (fake, _dir, server) = with_topic().await;
    let client = server.client().await;
    let call = in_background(&client, deploy("ops/1", &["yes", "no"]));
    let push = fake.asked("ops/1").await;
    assert_eq!(push["topic"], TOPIC);
    let actions = push["actions"].as_array().expect("actions");
    let kinds: Vec<&str> = actions
        .iter()
        .filter_map(|a| a["action"].as_str())
        .collect();
    assert_eq!(kinds, ["view", "http", "http"]);
    assert_eq!(actions[1]["label"], "yes");
    assert_eq!(actions[1]["method"], "POST");
    // A tap opens the ask's page; opening it answers nothing.
    assert_eq!(push["click"], actions[0]["url"]);
    assert_eq!(http(&server, "GET", &path(&push["click"])).await, 200);
    assert_eq!(
        client
            .clone()
            .list_pending("ops/1")
            .await
            .expect("pending")
            .len(),
        1
    );
    // A forged action does nothing.
    let no = path(&actions[2]["url"]);
    let (payload, mac) = no.rsplit_once('.').expect("signed");
    assert_eq!(
        http(&server, "POST", &format!("{payload}x.{mac}")).await,
        403
    );

    // The phone's "no": an empty POST to its link.
    assert_eq!(http(&server, "POST", &no).await, 200);
    let answered = within("the ask", call)
        .await
        .expect("join")
        .expect("answered");
    assert_eq!(answered.answers[0].selected, ["no"]);
    // The connection, never the topic: the topic is its secret.
    let id = client
        .clone()
        .list_ntfy_topics()
        .await
        .expect("topics")
        .remove(0)
        .id;
    assert_eq!(answered.resolved_by, format!("ntfy:{id}"));
    assert!(!answered.resolved_by.contains(TOPIC));
    // Once only; and the other option's action is too late.
    assert_eq!(http(&server, "POST", &no).await, 410);
    assert_eq!(http(&server, "POST", &path(&actions[1]["url"])).await, 409);
    // The outcome replaces the push (the same sequence id).
    let outcome = fake
        .wait_for("the outcome", |p| {
            p["sequence_id"] == push["sequence_id"]
                && p["title"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("Resolved: "))
        })
        .await;
    assert!(
        outcome["message"]
            .as_str()
            .is_some_and(|m| m.contains(&format!("Answered by ntfy:{id}")) && !m.contains(TOPIC))
    );
}
on_every_backend!(
    #[tokio::test]
    a_push_is_answered_by_its_action_once_and_replaced_by_the_outcome
);

/// A push shows questions and options only: a plan to review (its detail), an action
/// (its arguments) or a text cut to a push's size gets no answer button, only the page
/// that shows all of it (before, "Approve" on a plan of "DROP TABLE users" was one tap
/// away from a push that never showed it).
async fn a_push_offers_no_answer_for_what_it_does_not_show() {
    let (fake, _dir, server) = with_topic().await;
    let client = server.client().await;
    let kinds = |push: &Value| -> Vec<String> {
        push["actions"]
            .as_array()
            .expect("actions")
            .iter()
            .filter_map(|a| a["action"].as_str().map(str::to_owned))
            .collect()
    };
    let plan = Ask::new("ops/plan").question(
        question("plan", "Run this migration?")
            .detail("DROP TABLE users;")
            .choice("Approve")
            .choice("Reject")
            .plan_review("Approve"),
    );
    let _plan = in_background(&client, plan);
    let push = fake.asked("ops/plan").await;
    assert_eq!(kinds(&push), ["view"], "{push}");
    assert!(
        !push["message"]
            .as_str()
            .unwrap_or_default()
            .contains("DROP")
    );
    let action = deploy("ops/action", &["yes", "no"]).action("deploy", r#"{"env":"prod"}"#);
    let _action = in_background(&client, action);
    assert_eq!(kinds(&fake.asked("ops/action").await), ["view"]);
    let long = Ask::new("ops/long").question(
        question("q", &"a long question ".repeat(250))
            .choice("yes")
            .choice("no"),
    );
    let _long = in_background(&client, long);
    assert_eq!(kinds(&fake.asked("ops/long").await), ["view"]);
    // Nothing hidden: the options' buttons.
    let _plain = in_background(&client, deploy("ops/plain", &["yes", "no"]));
    assert_eq!(
        kinds(&fake.asked("ops/plain").await),
        ["view", "http", "http"]
    );
}
on_every_backend!(
    #[tokio::test]
    a_push_offers_no_answer_for_what_it_does_not_show
);

/// An ntfy server on an internal address is refused when the topic is connected,
/// naming the field, unless the server allows private addresses (as for webhooks).
#[tokio::test]
async fn an_internal_ntfy_server_is_refused_at_connect() {
    let dir = TempDir::new();
    let server = TestServer::start_with(ServerConfig {
        approvals: ApprovalConfig {
            secret_key_file: Some(dir.file("secret.key", SECRET_KEY)),
            ..test_config().approvals
        },
        http: HttpConfig {
            public_url: Some(PublicUrl::parse(PUBLIC).expect("a public url")),
            ..test_config().http
        },
        ..test_config()
    })
    .await;
    let mut admin = server.client().await;
    for internal in [
        "http://127.0.0.1:8080",
        "http://169.254.169.254",
        "http://10.0.0.7",
    ] {
        let refused = admin
            .connect_ntfy(ConnectNtfyRequest {
                server_url: internal.into(),
                topic: TOPIC.into(),
                ..Default::default()
            })
            .await
            .expect_err("an internal server");
        assert_eq!(refused.reason(), Reason::BadRequest, "{internal}");
        assert_eq!(refused.violations()[0].0, "server_url", "{internal}");
    }
    assert!(admin.list_ntfy_topics().await.expect("list").is_empty());
}

async fn actions_follow_the_ask_and_the_console_wins_first() {
    let (fake, _dir, server) = with_topic().await;
    let mut client = server.client().await;
    // Three options: an action each (ntfy shows three at most), the page on a tap.
    let _three = in_background(&client, deploy("ops/3", &["a", "b", "c"]));
    let push = fake.asked("ops/3").await;
    let kinds: Vec<&str> = push["actions"]
        .as_array()
        .expect("actions")
        .iter()
        .filter_map(|a| a["action"].as_str())
        .collect();
    assert_eq!(kinds, ["http", "http", "http"]);
    // Four options, or a batch: one action, to the page.
    let _four = in_background(&client, deploy("ops/4", &["a", "b", "c", "d"]));
    let push = fake.asked("ops/4").await;
    assert_eq!(push["actions"][0]["action"], "view");
    assert_eq!(push["actions"].as_array().map(Vec::len), Some(1));
    // Only the console may answer: the action opens the console.
    let _console = in_background(
        &client,
        deploy("ops/c", &["yes", "no"]).allowed_channels(["console"]),
    );
    let push = fake.asked("ops/c").await;
    assert_eq!(
        push["actions"][0]["url"],
        format!("{PUBLIC}/console/#/inbox")
    );
    assert_eq!(push["actions"].as_array().map(Vec::len), Some(1));
    // The console first: the outcome replaces the push, and the action is too late.
    let call = in_background(&client, deploy("ops/w", &["yes", "no"]));
    let push = fake.asked("ops/w").await;
    let rpc = pending_rpc(&client, "ops/w").await;
    client
        .answer("ops/w", &rpc, vec![answer::select("q", ["yes"])])
        .await
        .expect("answered");
    within("the ask", call)
        .await
        .expect("join")
        .expect("answered");
    fake.wait_for("the outcome", |p| {
        p["sequence_id"] == push["sequence_id"] && p["priority"] == 2
    })
    .await;
    assert_eq!(
        http(&server, "POST", &path(&push["actions"][2]["url"])).await,
        409
    );
    // Cancelled from the page.
    let call = in_background(&client, deploy("ops/x", &["yes", "no"]));
    let push = fake.asked("ops/x").await;
    let page = path(&push["click"]);
    let form_type = [("content-type", "application/x-www-form-urlencoded")];
    let (status, _) = crate::support::request_to(
        server.addr,
        "POST",
        &page,
        &form_type,
        "cancel=1&reason=later",
    )
    .await;
    assert_eq!(status, 200);
    let cancelled = within("the ask", call)
        .await
        .expect("join")
        .expect_err("cancelled");
    assert_eq!(cancelled.reason(), Reason::AskCancelled);
}
on_every_backend!(
    #[tokio::test]
    actions_follow_the_ask_and_the_console_wins_first
);

impl crate::conformance::Conformant for FakeNtfy {
    const NAME: &'static str = "ntfy";
    type Message = Value;

    async fn start(hold: usize) -> Self {
        let fake = FakeNtfy::start().await;
        *fake.hold.lock() = hold;
        fake
    }

    fn config(&self, dir: &TempDir) -> ServerConfig {
        config(dir)
    }

    fn flags(&self, dir: &TempDir) -> Vec<String> {
        let key = dir.file("secret.key", SECRET_KEY);
        [
            "--secret-key-file",
            key.to_str().expect("path"),
            "--public-url",
            PUBLIC,
            "--webhook-allow-private",
            "--webhook-timeout",
            "10s",
        ]
        .map(str::to_owned)
        .into()
    }

    async fn connect(&mut self, admin: &mut Client, _node: std::net::SocketAddr) {
        admin
            .connect_ntfy(connect_request(self))
            .await
            .expect("connect the topic");
    }

    async fn holding(&self) {
        self.wait_for("the held publish", |p| p["held"] == true)
            .await;
    }

    async fn asked(&self, session: &str) -> Value {
        FakeNtfy::asked(self, session).await
    }

    /// The phone's tap on the option's action: POSTs its URL, as ntfy's app does.
    async fn answer(&self, node: std::net::SocketAddr, push: &Value, option: &str) -> Option<bool> {
        let action = push["actions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| a["action"] == "http" && a["label"] == option)
            .unwrap_or_else(|| panic!("no action {option:?} in {push}"));
        let (status, page) =
            crate::support::request_to(node, "POST", &path(&action["url"]), &[], "").await;
        match status {
            200 => Some(true),
            409 | 410 => Some(false),
            other => panic!("the action {option:?} got {other}: {page}"),
        }
    }

    async fn outcome(&self, push: &Value) -> String {
        let outcome = self
            .wait_for("the outcome", |p| {
                p["held"] != true && p["sequence_id"] == push["sequence_id"] && p["priority"] == 2
            })
            .await;
        format!("{}\n{}", outcome["title"], outcome["message"])
    }

    /// Whoever holds a topic presses its buttons: it cannot tell who answers.
    fn person(&self) -> Option<String> {
        None
    }

    fn other(&self) -> String {
        "ana".into()
    }

    /// An ask with approvers is pushed with no action that answers, and a tap opens
    /// the console, which says who may answer.
    async fn refused(
        &self,
        _node: std::net::SocketAddr,
        session: &str,
        _option: &str,
    ) -> Option<String> {
        let push = FakeNtfy::asked(self, session).await;
        let actions = push["actions"].as_array().cloned().unwrap_or_default();
        assert!(
            actions
                .iter()
                .all(|a| a["action"] == "view" && a["url"] == push["click"]),
            "no action but the console's: {push}"
        );
        assert!(
            !push["click"]
                .as_str()
                .unwrap_or_default()
                .contains("/answer/"),
            "a tap opens no answering page: {push}"
        );
        assert!(
            push["message"]
                .as_str()
                .unwrap_or_default()
                .contains("Only ana may answer"),
            "{push}"
        );
        None
    }

    fn taken(&self, push: &Value) -> (usize, usize) {
        let pushes = self.pushes.lock();
        let taken = |priority: u64| {
            pushes
                .iter()
                .filter(|p| {
                    p["held"] != true
                        && p["sequence_id"] == push["sequence_id"]
                        && p["priority"] == priority
                })
                .count()
        };
        (taken(4), taken(2))
    }
}

channel_conformance!(FakeNtfy);
