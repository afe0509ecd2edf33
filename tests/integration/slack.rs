//! Answering from Slack through real servers and a local fake of the Slack Web API
//! (`--slack-api-url`): the fake checks the bot token, checks every message, update
//! and modal against Block Kit's rules with the official Slack SDK's models
//! (tests/slack/blockkit.py) and refuses as Slack does (`invalid_blocks`), records
//! every call and answers as Slack does (or hangs, as scripted); interactions are
//! signed with the app's signing secret exactly as Slack signs them and POSTed to
//! `/slack/interactivity`.

use std::{
    convert::Infallible,
    net::SocketAddr,
    sync::Arc,
    time::{Duration, SystemTime},
};

use askgate_client::{Ask, Client, Event, Reason, answer, question};
use askgate_proto::v1::{
    ConnectSlackRequest, DisconnectSlackRequest, ListEndpointsRequest, ListSlackAppsRequest,
    slack_client::SlackClient, webhooks_client::WebhooksClient,
};
use askgate_server::server::{ApprovalConfig, ChannelConfig};
use askgate_server::{ServerConfig, channels::delivery::WebhookConfig};
use askgate_testing::RedisServer;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, body::Incoming, service::service_fn};
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt},
    net::TcpListener,
    sync::Notify,
    task::JoinHandle,
};
use tonic::Code;

use crate::support::{
    ServeProcess, TempDir, TestServer, helper_command, identities_of, identity, in_background,
    next_event, pending_rpc, put_anonymous_ana, test_config, until_synced, within,
};

const TOKEN: &str = "xoxb-test-token";
const SIGNING_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const CHANNEL: &str = "C0QUESTIONS";
/// A key for --secret-key-file: 32 bytes as hex.
const SECRET_KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

/// One call the fake got.
#[derive(Debug, Clone)]
struct Call {
    method: String,
    body: Value,
    /// It carried the right bot token.
    authorized: bool,
    /// For a message posted: its ts.
    ts: Option<String>,
    /// The fake never answered it.
    hung: bool,
    /// Why Slack would refuse it (the fake answered `{"ok": false, ...}`).
    refused: Option<String>,
}

#[derive(Default)]
struct FakeState {
    calls: Vec<Call>,
    /// Posts still to leave unanswered (the message is not posted).
    hang_posts: usize,
    /// Posts still to take but leave unanswered (the message is posted: the poster
    /// never hears of it).
    post_then_hang: usize,
    /// Every message posted: channel, ts and metadata, for `conversations.history`.
    history: Vec<Value>,
    next_ts: u64,
}

/// Block Kit's rules, as Slack enforces them: tests/slack/blockkit.py, a process that
/// takes one request per line and answers whether Slack would take it.
struct BlockKit {
    _child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::BufReader<tokio::process::ChildStdout>,
}

impl BlockKit {
    fn start() -> Self {
        let mut child = helper_command("slack/blockkit.py")
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("spawn the Block Kit checker (tests/slack/blockkit.py)");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = tokio::io::BufReader::new(child.stdout.take().expect("stdout"));
        Self {
            _child: child,
            stdin,
            stdout,
        }
    }

    /// Slack's error and why, if Slack would refuse `body` sent to `method`.
    async fn check(&mut self, method: &str, body: &Value) -> Option<(String, String)> {
        let mut line = json!({ "method": method, "body": body }).to_string();
        line.push('\n');
        let mut verdict = String::new();
        within("the Block Kit checker", async {
            self.stdin.write_all(line.as_bytes()).await?;
            self.stdin.flush().await?;
            self.stdout.read_line(&mut verdict).await
        })
        .await
        .expect("the Block Kit checker's verdict");
        let verdict: Value = serde_json::from_str(&verdict)
            .unwrap_or_else(|e| panic!("the Block Kit checker said {verdict:?}: {e}"));
        match verdict["ok"].as_bool() {
            Some(true) => None,
            _ => Some((
                verdict["error"]
                    .as_str()
                    .unwrap_or("invalid_blocks")
                    .to_owned(),
                verdict["detail"].as_str().unwrap_or_default().to_owned(),
            )),
        }
    }
}

/// A fake Slack Web API on 127.0.0.1: `auth.test`, `chat.postMessage`, `chat.update`,
/// `chat.postEphemeral`, `views.open` and `conversations.history` (form arguments only, as Slack's reference
/// says), each checking `authorization: Bearer TOKEN`, and each message or view
/// checked against Block Kit's rules (and its metadata against Slack's).
struct FakeSlack {
    url: String,
    state: Arc<Mutex<FakeState>>,
    changed: Arc<Notify>,
    task: JoinHandle<()>,
}

impl Drop for FakeSlack {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeSlack {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let state = Arc::new(Mutex::new(FakeState::default()));
        let changed = Arc::new(Notify::new());
        let rules = Arc::new(tokio::sync::Mutex::new(BlockKit::start()));
        let (s, c) = (state.clone(), changed.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (s, c, r) = (s.clone(), c.clone(), rules.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |request| {
                        Self::serve(s.clone(), c.clone(), r.clone(), request)
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self {
            url: format!("http://{addr}/api"),
            state,
            changed,
            task,
        }
    }

    async fn serve(
        state: Arc<Mutex<FakeState>>,
        changed: Arc<Notify>,
        rules: Arc<tokio::sync::Mutex<BlockKit>>,
        request: Request<Incoming>,
    ) -> Result<Response<Full<Bytes>>, Infallible> {
        let method = request.uri().path().trim_start_matches("/api/").to_owned();
        let authorized = request
            .headers()
            .get("authorization")
            .is_some_and(|v| v.as_bytes() == format!("Bearer {TOKEN}").as_bytes());
        let form = request
            .headers()
            .get("content-type")
            .is_some_and(|v| v.as_bytes() == b"application/x-www-form-urlencoded");
        let body = request
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        // Slack's reading methods take form arguments only: a JSON body's are ignored.
        let body: Value = match form {
            true => form_urlencoded::parse(&body)
                .map(|(k, v)| (k.into_owned(), Value::String(v.into_owned())))
                .collect::<serde_json::Map<_, _>>()
                .into(),
            false => serde_json::from_slice(&body).unwrap_or(Value::Null),
        };
        let refused = match (authorized, method.as_str()) {
            (false, _) => None,
            (true, "conversations.history") if !form || body["channel"].as_str().is_none() => {
                Some((
                    "channel_not_found".to_owned(),
                    "conversations.history takes form arguments, with a channel".to_owned(),
                ))
            }
            (true, "conversations.history") => None,
            (true, _) => rules.lock().await.check(&method, &body).await,
        };
        let (reply, hang) = {
            let mut state = state.lock();
            let mut call = Call {
                method: method.clone(),
                body: body.clone(),
                authorized,
                ts: None,
                hung: false,
                refused: refused
                    .as_ref()
                    .map(|(error, detail)| format!("{error}: {detail}")),
            };
            let reply = if !authorized {
                json!({ "ok": false, "error": "invalid_auth" })
            } else if let Some((error, _)) = &refused {
                json!({ "ok": false, "error": error })
            } else {
                match method.as_str() {
                    "auth.test" => json!({ "ok": true, "team_id": "T1", "user_id": "UBOT" }),
                    "chat.postMessage" if state.hang_posts > 0 => {
                        state.hang_posts -= 1;
                        call.hung = true;
                        Value::Null
                    }
                    "chat.postMessage" => {
                        state.next_ts += 1;
                        let ts = format!("1700000000.{:06}", state.next_ts);
                        call.ts = Some(ts.clone());
                        let posted = json!({ "channel": body["channel"], "ts": ts, "metadata": body["metadata"] });
                        state.history.push(posted);
                        if state.post_then_hang > 0 {
                            state.post_then_hang -= 1;
                            call.hung = true;
                        }
                        json!({ "ok": true, "channel": body["channel"], "ts": ts, "message": { "blocks": body["blocks"] } })
                    }
                    "conversations.history" => {
                        let with_metadata = body["include_all_metadata"] == "true";
                        let messages: Vec<Value> = state
                            .history
                            .iter()
                            .rev()
                            .filter(|m| m["channel"] == body["channel"])
                            .map(|m| match with_metadata {
                                true => json!({ "type": "message", "user": "UBOT", "ts": m["ts"], "metadata": m["metadata"] }),
                                false => json!({ "type": "message", "user": "UBOT", "ts": m["ts"] }),
                            })
                            .collect();
                        json!({ "ok": true, "messages": messages, "has_more": false })
                    }
                    "chat.update" => {
                        json!({ "ok": true, "channel": body["channel"], "ts": body["ts"] })
                    }
                    "views.open" => json!({ "ok": true, "view": { "id": "V1" } }),
                    "chat.postEphemeral" => {
                        json!({ "ok": true, "message_ts": "1700000000.999999" })
                    }
                    _ => json!({ "ok": false, "error": "unknown_method" }),
                }
            };
            let hang = call.hung;
            state.calls.push(call);
            (reply, hang)
        };
        changed.notify_waiters();
        if hang {
            std::future::pending::<()>().await;
        }
        Ok(Response::new(Full::new(Bytes::from(reply.to_string()))))
    }

    fn calls(&self, method: &str) -> Vec<Call> {
        self.state
            .lock()
            .calls
            .iter()
            .filter(|c| c.method == method)
            .cloned()
            .collect()
    }

    /// Fails the test if Slack would have refused anything askgate sent.
    fn assert_all_taken(&self) {
        let state = self.state.lock();
        if let Some(call) = state.calls.iter().find(|c| c.refused.is_some()) {
            panic!(
                "Slack refuses askgate's {}: {}\n{}",
                call.method,
                call.refused.as_deref().unwrap_or_default(),
                call.body
            );
        }
    }

    /// Waits for a call of `method` matching `matching`; fails at once if Slack would
    /// have refused anything askgate sent.
    async fn wait_for(&self, what: &str, method: &str, matching: impl Fn(&Call) -> bool) -> Call {
        within(what, async {
            loop {
                let notified = self.changed.notified();
                self.assert_all_taken();
                if let Some(call) = self.calls(method).into_iter().find(|c| matching(c)) {
                    return call;
                }
                notified.await;
            }
        })
        .await
    }

    /// The message posted for `rpc_id` (its controls carry the rpc_id).
    async fn posted(&self, rpc_id: &str) -> Call {
        self.wait_for("the question's message", "chat.postMessage", |c| {
            c.ts.is_some() && c.body["blocks"].to_string().contains(rpc_id)
        })
        .await
    }

    /// The update of the message at `ts`.
    async fn updated(&self, ts: &str) -> Call {
        self.wait_for("the message's update", "chat.update", |c| {
            c.body["ts"] == ts
        })
        .await
    }
}

/// Every element of every block of `message`.
fn elements(message: &Value) -> impl Iterator<Item = &Value> {
    message["blocks"]
        .as_array()
        .expect("blocks")
        .iter()
        .filter_map(|b| b["elements"].as_array())
        .flatten()
}

/// The value of the control of `message` with `action_id` (and `text`, if given).
fn control(message: &Value, action_id: &str, text: Option<&str>) -> String {
    elements(message)
        .find(|e| {
            e["action_id"]
                .as_str()
                .is_some_and(|id| id == action_id || id.starts_with(&format!("{action_id}.")))
                && text.is_none_or(|t| e["text"]["text"] == t)
        })
        .and_then(|e| e["value"].as_str())
        .unwrap_or_else(|| panic!("no {action_id} {text:?} in {message}"))
        .to_owned()
}

/// The action id of the control of `message` whose value is `value`.
fn action_id_of(message: &Value, value: &str) -> String {
    elements(message)
        .find(|e| e["value"] == value)
        .and_then(|e| e["action_id"].as_str())
        .unwrap_or_else(|| panic!("no control with {value} in {message}"))
        .to_owned()
}

fn actions_of(message: &Value) -> usize {
    message["blocks"]
        .as_array()
        .expect("blocks")
        .iter()
        .filter(|b| b["type"] == "actions")
        .count()
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

/// A click on a message's control, as Slack sends it.
fn click(action_id: &str, value: &str, message: &Value) -> Value {
    json!({
        "type": "block_actions",
        "team": { "id": "T1", "domain": "acme" },
        "user": { "id": "U1", "username": "ana" },
        "trigger_id": "trigger-1",
        "channel": { "id": CHANNEL },
        "message": { "blocks": message["blocks"] },
        "state": { "values": {} },
        "actions": [{ "action_id": action_id, "value": value, "type": "button" }],
    })
}

/// A form submitted, as Slack sends it.
fn submit(view: &Value, values: Value) -> Value {
    json!({
        "type": "view_submission",
        "team": { "id": "T1" },
        "user": { "id": "U1" },
        "view": {
            "callback_id": view["callback_id"],
            "private_metadata": view["private_metadata"],
            "state": { "values": values },
        },
    })
}

/// POSTs `payload` to `/slack/interactivity` of `addr`, signed with `secret` at
/// `timestamp` as Slack signs (or unsigned); the status and the JSON body.
async fn interact_with(
    addr: SocketAddr,
    payload: &Value,
    secret: Option<&str>,
    timestamp: u64,
) -> (u16, Value) {
    interact_spelled(addr, payload, secret, timestamp, str::to_owned).await
}

/// [`interact_with`], the signature's hex spelled by `spell`.
async fn interact_spelled(
    addr: SocketAddr,
    payload: &Value,
    secret: Option<&str>,
    timestamp: u64,
    spell: fn(&str) -> String,
) -> (u16, Value) {
    let body = format!(
        "payload={}",
        form_urlencoded::byte_serialize(payload.to_string().as_bytes()).collect::<String>()
    );
    post_signed(addr, "/slack/interactivity", body, secret, timestamp, spell).await
}

/// POSTs the form `body` to `path` of `addr`, signed with `secret` at `timestamp` as
/// Slack signs (the hex spelled by `spell`), or unsigned; the status and JSON body.
async fn post_signed(
    addr: SocketAddr,
    path: &str,
    body: String,
    secret: Option<&str>,
    timestamp: u64,
    spell: fn(&str) -> String,
) -> (u16, Value) {
    let mut request = Request::post(path)
        .header("host", addr.to_string())
        .header("content-type", "application/x-www-form-urlencoded");
    if let Some(secret) = secret {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes());
        let signed = format!("v0:{timestamp}:{body}");
        let signature = hex::encode(ring::hmac::sign(&key, signed.as_bytes()).as_ref());
        request = request
            .header("x-slack-request-timestamp", timestamp.to_string())
            .header("x-slack-signature", format!("v0={}", spell(&signature)));
    }
    let request = request.body(Full::new(Bytes::from(body))).expect("request");
    within("the Slack endpoint", async {
        let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .expect("handshake");
        tokio::spawn(connection);
        let response = sender.send_request(request).await.expect("response");
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
    })
    .await
}

async fn interact(addr: SocketAddr, payload: &Value) -> (u16, Value) {
    interact_with(addr, payload, Some(SIGNING_SECRET), now()).await
}

fn connect_request() -> ConnectSlackRequest {
    ConnectSlackRequest {
        bot_token: TOKEN.into(),
        signing_secret: SIGNING_SECRET.into(),
        channel: CHANNEL.into(),
        session_prefix: "ops/".into(),
        description: "on-call".into(),
        ..Default::default()
    }
}

/// A node posting to `fake`, with a quick retry and a secret key.
fn config(fake: &FakeSlack, dir: &TempDir) -> ServerConfig {
    ServerConfig {
        webhooks: WebhookConfig {
            retry_initial: Duration::from_millis(100),
            retry_max: Duration::from_millis(500),
            ..WebhookConfig::default()
        },
        channels: ChannelConfig {
            slack_api_url: fake.url.clone(),
            ..test_config().channels
        },
        approvals: ApprovalConfig {
            secret_key_file: Some(dir.file("secret.key", SECRET_KEY)),
            ..test_config().approvals
        },
        ..test_config()
    }
}

async fn server(fake: &FakeSlack, dir: &TempDir) -> TestServer {
    TestServer::start_with(config(fake, dir)).await
}

/// A fake Slack, a server posting to it, and the app connected (the folder holds the
/// server's key file).
async fn with_app() -> (FakeSlack, TempDir, TestServer) {
    let (fake, dir) = (FakeSlack::start().await, TempDir::new());
    let server = server(&fake, &dir).await;
    slack_admin(server.url())
        .await
        .connect_slack(connect_request())
        .await
        .expect("connect");
    (fake, dir, server)
}

async fn slack_admin(url: String) -> SlackClient<tonic::transport::Channel> {
    within("connect", SlackClient::connect(url))
        .await
        .expect("connect")
}

fn deploy(session: &str) -> Ask {
    Ask::new(session).question(
        question("q", "Deploy to production?")
            .choice("yes")
            .choice("no"),
    )
}

async fn a_question_is_posted_answered_with_a_click_and_updated_in_place() {
    let (fake, dir) = (FakeSlack::start().await, TempDir::new());
    let server = server(&fake, &dir).await;
    let mut admin = slack_admin(server.url()).await;

    let mut bad = connect_request();
    bad.bot_token = "xoxb-wrong".into();
    let refused = admin
        .connect_slack(bad)
        .await
        .expect_err("a token Slack refuses");
    assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
    assert!(refused.message().contains("invalid_auth"), "{refused:?}");

    let app = admin
        .connect_slack(connect_request())
        .await
        .expect("connect")
        .into_inner();
    assert_eq!(
        (app.team_id.as_str(), app.channel.as_str()),
        ("T1", CHANNEL)
    );
    let listed = admin
        .list_slack_apps(ListSlackAppsRequest {})
        .await
        .expect("list")
        .into_inner();
    assert_eq!(listed.apps, std::slice::from_ref(&app));
    assert!(
        !format!("{listed:?}").contains(TOKEN),
        "no secret comes back"
    );
    let mut webhooks = WebhooksClient::connect(server.url())
        .await
        .expect("connect");
    let endpoints = webhooks
        .list_endpoints(ListEndpointsRequest {})
        .await
        .expect("list");
    assert!(
        endpoints.into_inner().endpoints.is_empty(),
        "an app is not a webhook endpoint"
    );

    // Nobody subscribes: the app counts as following ops/ (an if_unattended FAIL ask
    // is held for it), not other sessions.
    let client = server.client().await;
    let call = in_background(&client, deploy("ops/1"));
    let other = client
        .clone()
        .ask(deploy("dev/1").no_retry())
        .await
        .expect_err("no provider");
    assert_eq!(other.reason(), Reason::NoProvider);

    let posted = fake.posted("").await;
    assert!(posted.authorized);
    assert_eq!(posted.body["channel"], CHANNEL);
    let text = posted.body.to_string();
    assert!(
        text.contains("Deploy to production?") && text.contains("session `ops/1`"),
        "{text}"
    );
    // Each option's button has an action id of its own (Slack refuses repeats within a
    // block); the click carries it.
    let yes = control(&posted.body, "askgate.choose", Some("yes"));
    let yes_action = action_id_of(&posted.body, &yes);
    assert_eq!(yes_action, "askgate.choose.0");
    let (status, _) = interact(server.addr, &click(&yes_action, &yes, &posted.body)).await;
    assert_eq!(status, 200);
    let answered = within("the ask", call)
        .await
        .expect("join")
        .expect("answered");
    assert_eq!(answered.answers[0].selected, ["yes"]);
    assert_eq!(answered.resolved_by, "slack:T1/U1");

    let updated = fake.updated(posted.ts.as_deref().expect("ts")).await;
    assert!(updated.authorized);
    assert_eq!(updated.body["channel"], CHANNEL);
    let text = updated.body.to_string();
    assert!(
        text.contains("Answered by <@U1>") && text.contains("*yes*"),
        "{text}"
    );
    assert_eq!(actions_of(&updated.body), 0, "the buttons are gone");

    admin
        .disconnect_slack(DisconnectSlackRequest { id: app.id.clone() })
        .await
        .expect("disconnect");
    let again = admin
        .disconnect_slack(DisconnectSlackRequest { id: app.id })
        .await
        .expect_err("gone");
    assert_eq!(again.code(), Code::NotFound);
}
on_every_backend!(
    #[tokio::test]
    a_question_is_posted_answered_with_a_click_and_updated_in_place
);

/// A click by `user` on the option `label` of `posted`, signed as Slack signs it.
async fn click_as(addr: SocketAddr, posted: &Call, label: &str, user: &str) -> u16 {
    let value = control(&posted.body, "askgate.choose", Some(label));
    let action = action_id_of(&posted.body, &value);
    let mut payload = click(&action, &value, &posted.body);
    payload["user"]["id"] = user.into();
    payload["trigger_id"] = format!("trigger-{user}-{}", posted.ts.as_deref().unwrap_or("")).into();
    let (status, _) = interact(addr, &payload).await;
    status
}

/// docs/approvals.md "Escalation": an ask for U1 alone; its step adds U7 and sends the
/// ask to a second app (the on-call channel, whose prefix the session is not under).
/// Before the step, U7 is refused and nothing changes; once it came, subscribers see
/// `escalated{step: 1}`, the second app has the ask, and U7 answers there; both
/// messages show the outcome.
async fn an_escalation_step_reaches_a_second_app_whose_approvers_then_answer() {
    let (fake, _dir, server) = with_app().await;
    let mut admin = slack_admin(server.url()).await;
    let oncall = admin
        .connect_slack(ConnectSlackRequest {
            channel: "C0ONCALL".into(),
            session_prefix: "oncall/".into(),
            ..connect_request()
        })
        .await
        .expect("the on-call app")
        .into_inner();
    let client = server.client().await;
    let mut events = client
        .clone()
        .subscribe_session("ops/esc")
        .await
        .expect("subscribe");
    until_synced(&mut events).await;

    // Not yet: the step is an hour away.
    let later = deploy("ops/esc").approvers(["slack:T1/U1"]).escalate(
        Duration::from_secs(3600),
        ["slack:T1/U7"],
        false,
        [oncall.id.as_str()],
    );
    let mut call = in_background(&client, later);
    let posted = fake.posted("").await;
    assert_eq!(click_as(server.addr, &posted, "yes", "U7").await, 200);
    let told = fake
        .wait_for("the refusal", "chat.postEphemeral", |c| {
            c.body["user"] == "U7"
        })
        .await;
    assert!(
        told.body["text"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Only slack:T1/U1 may answer"),
        "{}",
        told.body
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(1), &mut call)
            .await
            .is_err()
    );
    let rpc = pending_rpc(&client, "ops/esc").await;
    client
        .clone()
        .cancel("ops/esc", &rpc, "asking again")
        .await
        .expect("cancel");
    let _ = within("the cancelled ask", call).await;

    // The step comes at once: U7 answers in the on-call channel.
    let soon = deploy("ops/esc").approvers(["slack:T1/U1"]).escalate(
        Duration::from_millis(200),
        ["slack:T1/U7"],
        false,
        [oncall.id.as_str()],
    );
    let call = in_background(&client, soon);
    let step = loop {
        match next_event(&mut events).await {
            Event::Escalated { escalated, .. } => break escalated,
            _ => continue,
        }
    };
    assert_eq!(step.step, 1);
    let escalated = fake
        .wait_for("the ask in the on-call channel", "chat.postMessage", |c| {
            c.ts.is_some() && c.body["channel"] == "C0ONCALL"
        })
        .await;
    assert_eq!(click_as(server.addr, &escalated, "no", "U7").await, 200);
    let answered = within("the ask", call)
        .await
        .expect("join")
        .expect("answered");
    assert_eq!(
        (
            answered.resolved_by.as_str(),
            answered.answers[0].selected.as_slice()
        ),
        ("slack:T1/U7", ["no".to_owned()].as_slice())
    );
    let updated = fake.updated(escalated.ts.as_deref().expect("ts")).await;
    assert_eq!(updated.body["channel"], "C0ONCALL");
    assert!(
        updated.body.to_string().contains("<@U7>"),
        "{}",
        updated.body
    );
    fake.assert_all_taken();
}
on_every_backend!(
    #[tokio::test]
    an_escalation_step_reaches_a_second_app_whose_approvers_then_answer
);

/// docs/slack.md "Linking people": `/link CODE` sent to the app adds the sender to the
/// person whose code it is; the command is verified as every interaction is.
async fn a_slack_user_is_linked_with_the_apps_link_command() {
    let (_fake, _dir, server) = with_app().await;
    let mut client = server.client().await;
    let app = slack_admin(server.url())
        .await
        .list_slack_apps(ListSlackAppsRequest::default())
        .await
        .expect("list")
        .into_inner()
        .apps
        .remove(0);
    let path = format!("/slack/commands/default/{}", app.id);
    put_anonymous_ana(&mut client).await;
    let code = client.start_link().await.expect("a code").code;
    let command = |team: &str, text: &str| {
        format!("command=%2Flink&text={text}&team_id={team}&user_id=U0ANA&channel_id=D1")
    };
    // Unsigned, or signed with another secret, or from another workspace: nothing.
    let body = command("T1", &code);
    let (status, _) =
        post_signed(server.addr, &path, body.clone(), None, now(), str::to_owned).await;
    assert_eq!(status, 401);
    let other = Some("another-signing-secret");
    let (status, _) = post_signed(server.addr, &path, body, other, now(), str::to_owned).await;
    assert_eq!(status, 401);
    let (status, _) = post_signed(
        server.addr,
        &path,
        command("T2", &code),
        Some(SIGNING_SECRET),
        now(),
        str::to_owned,
    )
    .await;
    assert_eq!(status, 401, "another workspace");
    let anonymous = identity("subject", "anonymous");
    assert_eq!(
        identities_of(&mut client, "ana").await,
        std::slice::from_ref(&anonymous)
    );

    // The app's own: linked, said to the sender alone.
    let (status, reply) = post_signed(
        server.addr,
        &path,
        command("T1", &code),
        Some(SIGNING_SECRET),
        now(),
        str::to_owned,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        reply,
        json!({
            "response_type": "ephemeral",
            "text": "Linked: your answers here count as Ana Lima.",
        })
    );
    assert_eq!(
        identities_of(&mut client, "ana").await,
        [anonymous, identity("slack", "t1/u0ana")]
    );

    // The code is spent: a second use says so, to its sender only.
    let (status, reply) = post_signed(
        server.addr,
        &path,
        command("T1", &format!("link+{code}")),
        Some(SIGNING_SECRET),
        now() - 1,
        str::to_owned,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(reply["response_type"], "ephemeral");
    assert!(
        reply["text"]
            .as_str()
            .is_some_and(|t| t.contains("used or expired")),
        "{reply}"
    );
}
on_every_backend!(
    #[tokio::test]
    a_slack_user_is_linked_with_the_apps_link_command
);

#[tokio::test]
async fn every_resolution_updates_the_message_and_forms_answer_batches() {
    let (fake, _dir, server) = with_app().await;
    let client = server.client().await;
    let addr = server.addr;

    // Cancel: the button opens a form for the reason; its submission cancels.
    let call = in_background(&client, deploy("ops/cancel"));
    let posted = fake.posted("ops/cancel").await;
    let cancel = control(&posted.body, "askgate.cancel", None);
    interact(addr, &click("askgate.cancel", &cancel, &posted.body)).await;
    let opened = fake
        .wait_for("the cancel form", "views.open", |c| {
            c.body["view"]["callback_id"] == "askgate.cancel"
        })
        .await;
    assert_eq!(opened.body["trigger_id"], "trigger-1");
    let values =
        json!({ "reason": { "text": { "type": "plain_text_input", "value": "not on a Friday" } } });
    let (status, body) = interact(addr, &submit(&opened.body["view"], values)).await;
    assert_eq!((status, body), (200, Value::Null), "the form closes");
    let err = within("the ask", call)
        .await
        .expect("join")
        .expect_err("cancelled");
    assert_eq!(err.reason(), Reason::AskCancelled);
    assert!(err.message().contains("not on a Friday"), "{err:?}");
    let updated = fake.updated(posted.ts.as_deref().expect("ts")).await;
    assert!(
        updated
            .body
            .to_string()
            .contains("Cancelled by <@U1>: not on a Friday"),
        "{}",
        updated.body
    );

    // Expired and aborted.
    let expiring = in_background(
        &client,
        deploy("ops/expire")
            .timeout(Duration::from_millis(1500))
            .no_retry(),
    );
    let posted = fake.posted("ops/expire").await;
    within("the ask", expiring)
        .await
        .expect("join")
        .expect_err("expired");
    let updated = fake.updated(posted.ts.as_deref().expect("ts")).await;
    assert!(
        updated.body.to_string().contains("Expired"),
        "{}",
        updated.body
    );
    let aborting = in_background(&client, deploy("ops/abort").request_id("r-abort"));
    let posted = fake.posted("ops/abort").await;
    client
        .clone()
        .abort("ops/abort", "r-abort")
        .await
        .expect("abort");
    within("the ask", aborting)
        .await
        .expect("join")
        .expect_err("aborted");
    let updated = fake.updated(posted.ts.as_deref().expect("ts")).await;
    assert!(
        updated.body.to_string().contains("Aborted"),
        "{}",
        updated.body
    );

    // Multi-select: checkboxes and Submit, with the state Slack sends.
    let checks = Ask::new("ops/checks").question(
        question("c", "Which checks?")
            .choice("lint")
            .choice("tests")
            .choice("bench")
            .multi_select(),
    );
    let call = in_background(&client, checks);
    let posted = fake.posted("ops/checks").await;
    let mut payload = click(
        "askgate.submit",
        &control(&posted.body, "askgate.submit", None),
        &posted.body,
    );
    payload["state"]["values"] = json!({ "askgate.checks": { "askgate.checks": {
        "type": "checkboxes", "selected_options": [{ "value": "0" }, { "value": "2" }],
    }}});
    interact(addr, &payload).await;
    let answered = within("the ask", call)
        .await
        .expect("join")
        .expect("answered");
    assert_eq!(answered.answers[0].selected, ["lint", "bench"]);

    // A batch of several questions: the form, one block per question, Other included;
    // an unknown option index is ignored, a question left empty is skipped.
    let batch = Ask::new("ops/batch")
        .question(
            question("db", "Which database?")
                .choice("Postgres")
                .choice("SQLite"),
        )
        .question(question("why", "Why?"))
        .question(
            question("env", "Where first?")
                .choice("staging")
                .choice("prod"),
        );
    let call = in_background(&client, batch);
    let posted = fake.posted("ops/batch").await;
    interact(
        addr,
        &click(
            "askgate.open",
            &control(&posted.body, "askgate.open", None),
            &posted.body,
        ),
    )
    .await;
    let opened = fake
        .wait_for("the answer form", "views.open", |c| {
            c.body["view"]["callback_id"] == "askgate.answer"
        })
        .await;
    let values = json!({
        "q0": { "choice": { "type": "radio_buttons", "selected_option": { "value": "1" } } },
        "q0.other": { "text": { "type": "plain_text_input", "value": null } },
        "q1": { "text": { "type": "plain_text_input", "value": "  it is small  " } },
        "q2": { "choice": { "type": "radio_buttons", "selected_option": null } },
        "q2.other": { "text": { "type": "plain_text_input", "value": "" } },
    });
    let (status, body) = interact(addr, &submit(&opened.body["view"], values)).await;
    assert_eq!((status, body), (200, Value::Null));
    let answered = within("the ask", call)
        .await
        .expect("join")
        .expect("answered");
    let got: Vec<(&str, &[String], Option<&str>)> = answered
        .answers
        .iter()
        .map(|a| (a.id.as_str(), a.selected.as_slice(), a.custom.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            ("db", ["SQLite".to_owned()].as_slice(), None),
            ("why", [].as_slice(), Some("it is small")),
            ("env", [].as_slice(), None),
        ]
    );

    // A form submitted after the ask resolved says so in the form.
    let (status, body) = interact(addr, &submit(&opened.body["view"], json!({}))).await;
    assert_eq!(status, 200);
    assert_eq!(body["response_action"], "errors", "{body}");
}

#[tokio::test]
async fn unsigned_forged_stale_and_replayed_requests_are_refused() {
    let (fake, _dir, server) = with_app().await;
    let mut client = server.client().await;
    let _call = in_background(&client, deploy("ops/guarded"));
    let posted = fake.posted("ops/guarded").await;
    let yes = click(
        "askgate.choose",
        &control(&posted.body, "askgate.choose", Some("yes")),
        &posted.body,
    );

    for (what, secret, at) in [
        ("unsigned", None, now()),
        (
            "signed with another secret",
            Some("another-signing-secret"),
            now(),
        ),
        ("stale", Some(SIGNING_SECRET), now() - 6 * 60),
        ("from the future", Some(SIGNING_SECRET), now() + 6 * 60),
    ] {
        let (status, body) = interact_with(server.addr, &yes, secret, at).await;
        assert_eq!(status, 401, "{what}: {body}");
    }
    let mut forged = yes.clone();
    forged["actions"][0]["value"] = json!(["ag1", "default", "sl_missing", "ops/guarded", "x", 0])
        .to_string()
        .into();
    forged["message"] = json!({});
    assert_eq!(
        interact(server.addr, &forged).await.0,
        401,
        "an app that does not exist"
    );
    assert_eq!(
        client
            .list_pending("ops/guarded")
            .await
            .expect("list")
            .len(),
        1,
        "still pending"
    );

    // A valid request is taken once; the same request again is a replay.
    let checks = click("askgate.checks", "", &posted.body);
    let at = now();
    assert_eq!(
        interact_with(server.addr, &checks, Some(SIGNING_SECRET), at)
            .await
            .0,
        200
    );
    let (status, body) = interact_with(server.addr, &checks, Some(SIGNING_SECRET), at).await;
    assert_eq!(status, 401, "{body}");
    assert!(body.to_string().contains("replayed"), "{body}");
    // The same signature in other letters is the same request.
    for spell in [str::to_ascii_uppercase, |hex: &str| {
        hex.char_indices()
            .map(|(i, c)| {
                if i % 2 == 0 {
                    c.to_ascii_uppercase()
                } else {
                    c
                }
            })
            .collect()
    }] {
        let (status, body) =
            interact_spelled(server.addr, &checks, Some(SIGNING_SECRET), at, spell).await;
        assert_eq!(status, 401, "{body}");
        assert!(body.to_string().contains("replayed"), "{body}");
    }

    // The other workspace's click, validly signed, is refused too.
    let mut elsewhere = yes.clone();
    elsewhere["team"]["id"] = "T2".into();
    assert_eq!(interact(server.addr, &elsewhere).await.0, 401);
    assert_eq!(
        client
            .list_pending("ops/guarded")
            .await
            .expect("list")
            .len(),
        1,
        "still pending"
    );
}

/// Slack apps on Redis as the kill tests run them: a fake Slack, one sealing key for
/// every node, short retries and leases.
struct SlackOnRedis {
    redis: RedisServer,
    fake: FakeSlack,
    _dir: TempDir,
    key: String,
}

impl SlackOnRedis {
    async fn start() -> Self {
        let dir = TempDir::new();
        let key = dir.file("secret.key", SECRET_KEY);
        Self {
            redis: RedisServer::start().await,
            fake: FakeSlack::start().await,
            key: key.to_str().expect("path").to_owned(),
            _dir: dir,
        }
    }

    /// `count` nodes on the rig's Redis and fake Slack.
    async fn nodes(&self, count: usize) -> Vec<ServeProcess> {
        let flags = [
            "--slack-api-url",
            &self.fake.url,
            "--secret-key-file",
            &self.key,
            "--webhook-timeout",
            "2s",
            "--webhook-retry-initial",
            "200ms",
            "--webhook-retry-max",
            "1s",
            "--redis-lease",
            "2s",
        ];
        ServeProcess::redis_nodes(&self.redis.url, false, count, &flags).await
    }

    /// A node with the Slack app connected through it.
    async fn connected_node(&self) -> ServeProcess {
        let node = self.nodes(1).await.remove(0);
        let mut admin = slack_admin(node.url.clone()).await;
        admin
            .connect_slack(connect_request())
            .await
            .expect("connect");
        node
    }
}

/// docs/slack.md: a node that dies after Slack took its post but before it heard the
/// reply (and noted where the message went) does not make the message posted twice:
/// the survivor's attempt finds it in the channel's history by its metadata, and the
/// answer updates that message.
#[tokio::test]
async fn on_redis_a_post_whose_reply_died_with_its_node_is_not_posted_twice() {
    let rig = SlackOnRedis::start().await;
    let fake = &rig.fake;
    let first = rig.connected_node().await;
    fake.state.lock().post_then_hang = 1;
    let call = in_background(
        &first.client().await,
        deploy("ops/twice").reattach_grace(Duration::from_secs(60)),
    );
    let posted = fake
        .wait_for("the post Slack took", "chat.postMessage", |c| c.hung)
        .await;
    let survivors = rig.nodes(1).await;
    first.signal("KILL");
    drop(call);

    fake.wait_for("the survivor's look-up", "conversations.history", |c| {
        c.body["include_all_metadata"] == "true"
    })
    .await;
    let addr = survivors[0].addr();
    let yes = control(&posted.body, "askgate.choose", Some("yes"));
    assert_eq!(
        interact(addr, &click("askgate.choose", &yes, &posted.body))
            .await
            .0,
        200
    );
    fake.updated(posted.ts.as_deref().expect("ts")).await;
    let posts = fake
        .calls("chat.postMessage")
        .into_iter()
        .filter(|c| c.body.to_string().contains("ops/twice"))
        .count();
    assert_eq!(posts, 1, "the message was posted once");
    assert_eq!(
        posted.body["metadata"]["event_type"], "askgate_ask",
        "{}",
        posted.body
    );
}

/// Text with everything Slack could read as markup: emoji (as characters and as
/// `:codes:`), mentions, channel pings, links, mrkdwn and entities.
const MARKUP: &str =
    "🎉 :tada: <!channel> <@U0123> <https://evil.example|click> *b* _i_ ~s~ `c` &amp; >q";

/// Every question shape askgate may post, each with the labels it is known by.
fn shapes() -> Vec<(String, Ask)> {
    let labels = |count: usize| -> Vec<String> {
        (0..count)
            .map(|i| format!("{i} {MARKUP}"))
            .collect::<Vec<_>>()
    };
    let mut shapes = Vec::new();
    for count in [2, 10, 11, 30, 100] {
        for multi in [false, true] {
            let mut q = question("q", &format!("Pick one of {count}? {MARKUP}")).header(MARKUP);
            for (i, label) in labels(count).iter().enumerate() {
                q = match i % 2 {
                    0 => q.option(label, &format!("what {label} does")),
                    _ => q.choice(label),
                };
            }
            if multi {
                q = q.multi_select();
            }
            let name = format!("{count} options{}", if multi { ", several" } else { "" });
            shapes.push((name, Ask::new("ops/shape").question(q)));
        }
    }
    shapes.push((
        "free text".into(),
        Ask::new("ops/shape").question(question("q", MARKUP).detail(MARKUP)),
    ));
    shapes.push((
        "a plan review with a long detail".into(),
        Ask::new("ops/shape").question(
            question("q", &format!("Ship this release plan? {MARKUP}"))
                .header("Release plan")
                .detail(&format!("{MARKUP}\n").repeat(600))
                .option("Approve", MARKUP)
                .option("Revise", MARKUP)
                .plan_review("Approve"),
        ),
    ));
    for count in [1, 2, 7, 20] {
        let mut ask = Ask::new("ops/shape");
        for i in 0..count {
            let q = question(&format!("q{i}"), &format!("Question {i}? {MARKUP}"))
                .detail(&MARKUP.repeat(20));
            ask = ask.question(match i % 3 {
                0 => q.choice("yes").choice(MARKUP),
                1 => q.choice("a").choice("b").multi_select(),
                _ => q,
            });
        }
        shapes.push((format!("a batch of {count}"), ask));
    }
    shapes.push((
        "blank descriptions and header".into(),
        Ask::new("ops/shape").question(
            question("q", "Which?")
                .header(" \u{2003} ")
                .option("a", "   ")
                .option("b", "\u{2003}")
                .choice("c"),
        ),
    ));
    let long = "x".repeat(250);
    shapes.push((
        "250-character labels".into(),
        Ask::new("ops/shape").question(
            question("q", &long)
                .header(&long)
                .option(&long, &long)
                .choice(&format!("{}y", "x".repeat(249))),
        ),
    ));
    let four_k = format!("{} {MARKUP}", "word ".repeat(800));
    shapes.push((
        "4 KiB questions".into(),
        Ask::new("ops/shape")
            .question(question("q0", &four_k).option("a", &four_k).choice("b"))
            .question(question("q1", &four_k).detail(&four_k)),
    ));
    // What an answer approves (docs/approvals.md): the action's arguments past a
    // section's length, and the answers that apply when nobody answers in time.
    let arguments = serde_json::json!({ "notes": four_k, "markup": MARKUP }).to_string();
    shapes.push((
        "an action and default answers".into(),
        Ask::new("ops/shape")
            .question(question("go", "Deploy?").choice("yes").choice("no"))
            .action("deploy", &arguments)
            .default_answers(vec![answer::select("go", ["no"])]),
    ));
    shapes
}

/// Every shape of question, posted, opened in each of its forms and resolved, goes
/// through a fake that refuses what Slack's Block Kit rules refuse.
#[tokio::test]
async fn every_question_shape_is_taken_by_slack() {
    let (fake, dir) = (FakeSlack::start().await, TempDir::new());
    let server = TestServer::start_with(ServerConfig {
        limits: askgate_server::domain::Limits {
            max_options: 100,
            ..Default::default()
        },
        channels: ChannelConfig {
            slack_api_url: fake.url.clone(),
            ..test_config().channels
        },
        approvals: ApprovalConfig {
            secret_key_file: Some(dir.file("secret.key", SECRET_KEY)),
            ..test_config().approvals
        },
        ..test_config()
    })
    .await;
    slack_admin(server.url())
        .await
        .connect_slack(connect_request())
        .await
        .expect("connect");
    let mut client = server.client().await;
    for (n, (name, mut ask)) in shapes().into_iter().enumerate() {
        let session = format!("ops/shape-{n}");
        ask.request_mut().session_id = session.clone();
        let questions = ask.request_mut().questions.clone();
        // One question that approves an action takes its options only: no form.
        let approving = ask.request_mut().action.is_some()
            && questions.len() == 1
            && !questions[0].options.is_empty();
        let call = in_background(&client, ask);
        let rpc = pending_rpc(&client, &session).await;
        let posted = fake.posted(&rpc).await;
        let forms = [
            ("askgate.open", "askgate.answer"),
            ("askgate.cancel", "askgate.cancel"),
        ];
        if approving {
            assert!(
                !elements(&posted.body).any(|e| e["action_id"] == "askgate.open"),
                "{name}: no Other… on the approving question"
            );
        }
        // Each form the message opens.
        for (action, callback) in forms.into_iter().skip(usize::from(approving)) {
            let value = control(&posted.body, action, None);
            interact(server.addr, &click(action, &value, &posted.body)).await;
            fake.wait_for(
                &format!("the {callback} form of {name}"),
                "views.open",
                |c| {
                    c.body["view"]["callback_id"] == callback
                        && c.body["view"]["private_metadata"]
                            .as_str()
                            .is_some_and(|m| m.contains(&rpc))
                },
            )
            .await;
        }
        // Answered: the first option of each question, or a text.
        let answers = questions
            .iter()
            .map(|q| match q.options.first() {
                Some(option) => answer::select(&q.id, [option.label.as_str()]),
                None => answer::custom(&q.id, MARKUP),
            })
            .collect();
        client
            .answer(&session, &rpc, answers)
            .await
            .unwrap_or_else(|e| panic!("answering {name}: {e:?}"));
        within(&format!("the ask of {name}"), call)
            .await
            .expect("join")
            .unwrap_or_else(|e| panic!("{name}: {e:?}"));
        fake.updated(posted.ts.as_deref().expect("ts")).await;
    }
    // And a message cancelled with a long reason full of markup.
    let session = "ops/shape-cancelled";
    let call = in_background(&client, deploy(session));
    let rpc = pending_rpc(&client, session).await;
    let posted = fake.posted(&rpc).await;
    client
        .cancel(session, &rpc, &format!("{MARKUP} ").repeat(4))
        .await
        .expect("cancel");
    within("the cancelled ask", call)
        .await
        .expect("join")
        .expect_err("cancelled");
    fake.updated(posted.ts.as_deref().expect("ts")).await;
    // An ask Slack may not answer is posted with the console instead of controls.
    let session = "ops/shape-console-only";
    let console_only = deploy(session).allowed_channels(["console"]);
    let call = in_background(&client, console_only);
    let rpc = pending_rpc(&client, session).await;
    // It has no controls to carry the rpc_id: found by the message's metadata.
    let posted = fake
        .wait_for("the console-only message", "chat.postMessage", |c| {
            c.ts.is_some() && c.body["metadata"]["event_payload"]["rpc_id"] == rpc.as_str()
        })
        .await;
    let blocks = posted.body["blocks"].as_array().expect("blocks");
    assert!(
        blocks.iter().all(|b| b["type"] != "actions"),
        "no controls: {}",
        posted.body
    );
    assert!(
        posted
            .body
            .to_string()
            .contains("cannot be answered from Slack")
    );
    call.abort();
    fake.assert_all_taken();
}

impl crate::conformance::Conformant for FakeSlack {
    const NAME: &'static str = "slack";
    type Message = Call;

    async fn start(hold: usize) -> Self {
        let fake = FakeSlack::start().await;
        fake.state.lock().hang_posts = hold;
        fake
    }

    fn config(&self, dir: &TempDir) -> ServerConfig {
        config(self, dir)
    }

    fn flags(&self, dir: &TempDir) -> Vec<String> {
        let key = dir.file("secret.key", SECRET_KEY);
        [
            "--slack-api-url",
            &self.url,
            "--secret-key-file",
            key.to_str().expect("path"),
            "--webhook-timeout",
            "2s",
        ]
        .map(str::to_owned)
        .into()
    }

    async fn connect(&mut self, admin: &mut Client, _node: SocketAddr) {
        admin
            .connect_slack(connect_request())
            .await
            .expect("connect the app");
    }

    async fn holding(&self) {
        self.wait_for("the hanging post", "chat.postMessage", |c| c.hung)
            .await;
    }

    async fn asked(&self, session: &str) -> Call {
        let marker = format!("session `{session}`");
        self.wait_for("the ask's message", "chat.postMessage", |c| {
            c.ts.is_some() && c.body["blocks"].to_string().contains(&marker)
        })
        .await
    }

    /// A click on the option's button, signed as Slack signs it. Slack tells the
    /// clicking person nothing of a late click: the message shows the outcome.
    async fn answer(&self, node: SocketAddr, posted: &Call, option: &str) -> Option<bool> {
        let value = control(&posted.body, "askgate.choose", Some(option));
        let action = action_id_of(&posted.body, &value);
        // Each click is a request of its own (the same one again is a replay).
        static CLICKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let mut click = click(&action, &value, &posted.body);
        let n = CLICKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        click["trigger_id"] = format!("trigger-conformance-{n}").into();
        let (status, body) = interact(node, &click).await;
        assert_eq!(status, 200, "a click is acknowledged: {body}");
        None
    }

    async fn outcome(&self, posted: &Call) -> String {
        self.updated(posted.ts.as_deref().expect("ts"))
            .await
            .body
            .to_string()
    }

    fn person(&self) -> Option<String> {
        Some("slack:T1/U1".into())
    }

    fn other(&self) -> String {
        "slack:T1/U9".into()
    }

    /// The person's click on the option, then what Slack showed them alone.
    async fn refused(&self, node: SocketAddr, session: &str, option: &str) -> Option<String> {
        let posted = self.asked(session).await;
        let told = self.calls("chat.postEphemeral").len();
        // The refusal is shown before the click is acknowledged.
        self.answer(node, &posted, option).await;
        self.assert_all_taken();
        let mut shown = self.calls("chat.postEphemeral");
        assert_eq!(shown.len(), told + 1, "the refusal is shown once");
        let ephemeral = shown.pop().expect("shown");
        assert_eq!(
            ephemeral.body["user"], "U1",
            "shown to the clicking user alone"
        );
        assert_eq!(ephemeral.body["channel"], CHANNEL);
        Some(ephemeral.body["text"].as_str().expect("text").to_owned())
    }

    fn taken(&self, posted: &Call) -> (usize, usize) {
        let rpc_id = &posted.body["metadata"]["event_payload"]["rpc_id"];
        let posts = self
            .calls("chat.postMessage")
            .iter()
            .filter(|c| c.ts.is_some() && &c.body["metadata"]["event_payload"]["rpc_id"] == rpc_id)
            .count();
        let updates = self
            .calls("chat.update")
            .iter()
            .filter(|c| c.body["ts"].as_str() == posted.ts.as_deref())
            .count();
        (posts, updates)
    }
}

channel_conformance!(FakeSlack);
