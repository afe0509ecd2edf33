//! Answering from Telegram through real servers and a local fake of the Bot API
//! (`--telegram-api-url`). The fake checks the bot token and refuses, as Telegram
//! does (`400 Bad Request: …`), every call that breaks the Bot API's published rules:
//! HTML parse mode (only Telegram's tags, balanced, only its four named entities), a
//! text of 1-4,096 characters once parsed, inline keyboards (a non-blank text and
//! exactly one action per button, `callback_data` of 1-64 bytes, at most 8 buttons a
//! row and 100 in all), force replies (a placeholder of 1-64 characters), callback
//! answers (at most 200 characters) and webhooks (HTTPS on 443, 80, 88 or 8443, a
//! secret token of 1-256 characters of `A-Z a-z 0-9 _ -`). Updates are POSTed to
//! `/telegram/webhook/{bot}` with the secret token, as Telegram sends them.

use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};

use askgate_client::{Ask, Client, Reason, answer, question};
use askgate_proto::v1::{
    ConnectTelegramRequest, Identity, ListEndpointsRequest, Person, webhooks_client::WebhooksClient,
};
use askgate_server::server::{ApprovalConfig, ChannelConfig, HttpConfig};
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

const TOKEN: &str = "123456:ABC-DEF1234ghIkl-zyx57W2v1u123ew11";
const CHAT: i64 = -1001234567890;
const PUBLIC: &str = "https://askgate.example.com";
const SECRET_KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

/// One call the fake got: its method, its body, and why Telegram would refuse it.
#[derive(Debug, Clone)]
struct Call {
    method: String,
    body: Value,
    refused: Option<String>,
    /// For a message sent: its id.
    message_id: Option<i64>,
    /// The fake never answered it (and did not take the message).
    hung: bool,
}

#[derive(Default)]
struct FakeState {
    calls: Vec<Call>,
    next_message: i64,
    /// Sends still to leave unanswered without taking them (the message is not sent).
    hang_sends: usize,
}

/// The HTML tags Telegram's HTML parse mode takes.
const TAGS: [&str; 15] = [
    "b",
    "strong",
    "i",
    "em",
    "u",
    "ins",
    "s",
    "strike",
    "del",
    "code",
    "pre",
    "a",
    "tg-spoiler",
    "blockquote",
    "tg-emoji",
];

/// The text of `html` once Telegram parses it, or why it cannot be parsed.
fn parse_html(html: &str) -> Result<String, String> {
    let (mut text, mut open, mut rest) = (String::new(), Vec::<String>::new(), html);
    while let Some(at) = rest.find(['<', '&', '>']) {
        text.push_str(&rest[..at]);
        rest = &rest[at..];
        match rest.as_bytes()[0] {
            b'>' => return Err("can't parse entities: unexpected \">\"".into()),
            b'&' => {
                let end = rest
                    .find(';')
                    .filter(|&e| e <= 10)
                    .ok_or("can't parse entities: a bare \"&\"")?;
                let entity = &rest[1..end];
                text.push(match entity {
                    "lt" => '<',
                    "gt" => '>',
                    "amp" => '&',
                    "quot" => '"',
                    e if e.starts_with('#') => e[1..]
                        .parse::<u32>()
                        .ok()
                        .and_then(char::from_u32)
                        .ok_or("can't parse entities: a bad number")?,
                    e => return Err(format!("can't parse entities: unsupported entity &{e};")),
                });
                rest = &rest[end + 1..];
            }
            _ => {
                let end = rest
                    .find('>')
                    .ok_or("can't parse entities: an unclosed tag")?;
                let tag = &rest[1..end];
                rest = &rest[end + 1..];
                if let Some(name) = tag.strip_prefix('/') {
                    match open.pop() {
                        Some(top) if top == name => {}
                        _ => return Err(format!("can't parse entities: unmatched end tag {name}")),
                    }
                    continue;
                }
                let name = tag.split(' ').next().unwrap_or_default();
                if !TAGS.contains(&name) {
                    return Err(format!(
                        "can't parse entities: unsupported start tag \"{name}\""
                    ));
                }
                if name == "a" && !(tag.starts_with("a href=\"") && tag.ends_with('"')) {
                    return Err("can't parse entities: a link without href".into());
                }
                open.push(name.to_owned());
            }
        }
    }
    text.push_str(rest);
    match open.is_empty() {
        true => Ok(text),
        false => Err(format!("can't parse entities: unclosed {open:?}")),
    }
}

/// Why Telegram would refuse a reply markup, if it would.
fn markup_error(markup: &Value, inline_only: bool) -> Option<String> {
    if markup.is_null() {
        return None;
    }
    if markup.get("force_reply").is_some() {
        if inline_only || markup["force_reply"] != true {
            return Some("a force reply must be force_reply: true, and only on sendMessage".into());
        }
        let placeholder = markup["input_field_placeholder"]
            .as_str()
            .map(|p| p.chars().count());
        return placeholder
            .filter(|n| !(1..=64).contains(n))
            .map(|_| "input_field_placeholder must be 1-64 characters".into());
    }
    let Some(rows) = markup["inline_keyboard"].as_array() else {
        return Some("unsupported reply_markup".into());
    };
    let mut total = 0;
    for row in rows {
        let Some(row) = row.as_array() else {
            return Some("a keyboard row must be an array of buttons".into());
        };
        if row.len() > 8 {
            return Some("BUTTON_ROWS_TOO_MUCH: more than 8 buttons in a row".into());
        }
        for button in row {
            total += 1;
            if button["text"].as_str().is_none_or(|t| t.trim().is_empty()) {
                return Some("BUTTON_TEXT_EMPTY".into());
            }
            let actions = ["url", "callback_data"]
                .iter()
                .filter(|k| button.get(**k).is_some())
                .count();
            if actions != 1 || button.as_object().is_some_and(|o| o.len() != 2) {
                return Some("a button needs exactly one of its optional fields".into());
            }
            if let Some(data) = button.get("callback_data")
                && data.as_str().is_none_or(|d| !(1..=64).contains(&d.len()))
            {
                return Some("BUTTON_DATA_INVALID".into());
            }
            let linkable = |u: &str| {
                ["https://", "http://", "tg://"]
                    .iter()
                    .any(|s| u.starts_with(s))
            };
            if button
                .get("url")
                .is_some_and(|url| !url.as_str().is_some_and(linkable))
            {
                return Some("BUTTON_URL_INVALID".into());
            }
        }
    }
    (total > 100).then(|| "REPLY_MARKUP_TOO_LONG".into())
}

/// Why Telegram would refuse `body` sent to `method`, if it would.
fn refusal(method: &str, body: &Value) -> Option<String> {
    let text = |body: &Value| -> Option<String> {
        if body["parse_mode"] != "HTML" {
            return Some("askgate always sends HTML".into());
        }
        match parse_html(body["text"].as_str()?) {
            Err(e) => Some(e),
            Ok(t) if t.trim().is_empty() => Some("message text is empty".into()),
            Ok(t) if t.encode_utf16().count() > 4096 => Some("message is too long".into()),
            Ok(_) => None,
        }
    };
    let chat_ok =
        body["chat_id"].is_i64() || body["chat_id"].as_str().is_some_and(|c| c.starts_with('@'));
    match method {
        "getMe" | "deleteWebhook" => None,
        "setWebhook" => {
            let url = body["url"].as_str().unwrap_or_default();
            let host = url
                .strip_prefix("https://")
                .map(|h| h.split('/').next().unwrap_or_default());
            let port_ok = host.is_some_and(|h| match h.rsplit_once(':') {
                Some((_, port)) => ["443", "80", "88", "8443"].contains(&port),
                None => true,
            });
            let secret = body["secret_token"].as_str().unwrap_or_default();
            let secret_ok = (1..=256).contains(&secret.len())
                && secret
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            match (port_ok, secret_ok) {
                (false, _) => Some("bad webhook: An HTTPS URL must be provided for webhook".into()),
                (_, false) => {
                    Some("bad webhook: secret token contains unallowed characters".into())
                }
                _ => None,
            }
        }
        "sendMessage" | "editMessageText" if !chat_ok => Some("chat not found".into()),
        "sendMessage" => text(body)
            .or_else(|| markup_error(&body["reply_markup"], false))
            .or_else(|| {
                let reply = &body["reply_parameters"];
                (!reply.is_null() && !reply["message_id"].is_i64())
                    .then(|| "reply_parameters needs the message_id to reply to".into())
            }),
        "editMessageText" => text(body)
            .or_else(|| {
                body["message_id"]
                    .as_i64()
                    .is_none()
                    .then(|| "message to edit not found".into())
            })
            .or_else(|| markup_error(&body["reply_markup"], true)),
        "editMessageReplyMarkup" => markup_error(&body["reply_markup"], true),
        "answerCallbackQuery" => match body["text"].as_str().map(|t| t.chars().count()) {
            _ if body["callback_query_id"].as_str().is_none() => {
                Some("query is too old or the id is invalid".into())
            }
            Some(n) if n > 200 => Some("text is too long".into()),
            _ => None,
        },
        other => Some(format!("Not Found: method {other}")),
    }
}

/// A fake Bot API on 127.0.0.1 that refuses what Telegram refuses.
struct FakeTelegram {
    url: String,
    state: Arc<Mutex<FakeState>>,
    changed: Arc<Notify>,
    task: JoinHandle<()>,
}

impl Drop for FakeTelegram {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeTelegram {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let state = Arc::new(Mutex::new(FakeState {
            next_message: 100,
            ..Default::default()
        }));
        let changed = Arc::new(Notify::new());
        let (s, c) = (state.clone(), changed.clone());
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (s, c) = (s.clone(), c.clone());
                tokio::spawn(async move {
                    let service =
                        service_fn(move |request| Self::serve(s.clone(), c.clone(), request));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self {
            url: format!("http://{addr}"),
            state,
            changed,
            task,
        }
    }

    async fn serve(
        state: Arc<Mutex<FakeState>>,
        changed: Arc<Notify>,
        request: Request<Incoming>,
    ) -> Result<Response<Full<Bytes>>, Infallible> {
        let path = request.uri().path().to_owned();
        let json_body = request
            .headers()
            .get("content-type")
            .is_some_and(|v| v == "application/json");
        let body = request
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let (status, reply) = match path.strip_prefix(&format!("/bot{TOKEN}/")) {
            None => (
                401,
                json!({ "ok": false, "error_code": 401, "description": "Unauthorized" }),
            ),
            Some(method) => {
                let refused = match json_body {
                    true => refusal(method, &body),
                    false => Some("askgate sends JSON".into()),
                };
                let mut state = state.lock();
                let mut call = Call {
                    method: method.to_owned(),
                    body: body.clone(),
                    refused: refused.clone(),
                    message_id: None,
                    hung: false,
                };
                let reply = match (refused, method) {
                    (Some(why), _) => (
                        400,
                        json!({ "ok": false, "error_code": 400, "description": format!("Bad Request: {why}") }),
                    ),
                    (None, "getMe") => (
                        200,
                        json!({ "ok": true, "result": { "id": 777, "is_bot": true, "first_name": "askgate", "username": "askgate_test_bot" } }),
                    ),
                    (None, "sendMessage") if state.hang_sends > 0 => {
                        state.hang_sends -= 1;
                        call.hung = true;
                        (0, Value::Null)
                    }
                    (None, "sendMessage") => {
                        state.next_message += 1;
                        call.message_id = Some(state.next_message);
                        (
                            200,
                            json!({ "ok": true, "result": { "message_id": state.next_message, "chat": { "id": body["chat_id"], "type": "supergroup" }, "date": 1 } }),
                        )
                    }
                    (None, _) => (200, json!({ "ok": true, "result": true })),
                };
                state.calls.push(call);
                reply
            }
        };
        changed.notify_waiters();
        if status == 0 {
            // A hung send: never answered.
            std::future::pending::<()>().await;
        }
        let mut response = Response::new(Full::new(Bytes::from(reply.to_string())));
        *response.status_mut() = hyper::StatusCode::from_u16(status).expect("status");
        Ok(response)
    }

    /// Waits for a call of `method` matching `matching`; fails at once if Telegram
    /// would have refused anything askgate sent.
    async fn wait_for(&self, what: &str, method: &str, matching: impl Fn(&Call) -> bool) -> Call {
        within(what, async {
            loop {
                let notified = self.changed.notified();
                {
                    let state = self.state.lock();
                    if let Some(call) = state.calls.iter().find(|c| c.refused.is_some()) {
                        panic!(
                            "Telegram refuses askgate's {}: {:?}\n{}",
                            call.method, call.refused, call.body
                        );
                    }
                    if let Some(call) = state
                        .calls
                        .iter()
                        .find(|c| c.method == method && matching(c))
                    {
                        return call.clone();
                    }
                }
                notified.await;
            }
        })
        .await
    }

    /// The message sent for an ask whose text holds `marker`.
    async fn sent(&self, marker: &str) -> Call {
        self.wait_for("the ask's message", "sendMessage", |c| {
            c.message_id.is_some() && c.body["text"].as_str().is_some_and(|t| t.contains(marker))
        })
        .await
    }

    fn count(&self, method: &str) -> usize {
        self.state
            .lock()
            .calls
            .iter()
            .filter(|c| c.method == method)
            .count()
    }
}

/// The callback data of the button of `message` whose text contains `text`.
fn button(message: &Value, text: &str) -> String {
    message["reply_markup"]["inline_keyboard"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_array)
        .flatten()
        .find(|b| b["text"].as_str().is_some_and(|t| t.contains(text)))
        .and_then(|b| b["callback_data"].as_str())
        .unwrap_or_else(|| panic!("no button {text:?} in {message}"))
        .to_owned()
}

/// A server sending to `fake`, with a quick retry, a secret key, a public URL, and
/// room for questions of 100 options.
async fn server(fake: &FakeTelegram, dir: &TempDir) -> TestServer {
    TestServer::start_with(config(fake, dir)).await
}

/// A node's settings for [`server`].
fn config(fake: &FakeTelegram, dir: &TempDir) -> ServerConfig {
    ServerConfig {
        limits: askgate_server::domain::Limits {
            max_options: 100,
            ..Default::default()
        },
        webhooks: WebhookConfig {
            retry_initial: Duration::from_millis(100),
            retry_max: Duration::from_millis(500),
            ..WebhookConfig::default()
        },
        channels: ChannelConfig {
            telegram_api_url: fake.url.clone(),
            ..test_config().channels
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

/// Telegram's side of a connected bot: where it POSTs updates, with which secret.
struct Bot {
    addr: SocketAddr,
    path: String,
    secret: String,
    next_update: std::sync::atomic::AtomicI64,
}

impl Bot {
    /// POSTs an update (its id added) with `secret`; the status.
    async fn post_with(&self, update: &Value, secret: &str, id: i64) -> u16 {
        self.post_at(self.addr, update, secret, id).await
    }

    /// [`Bot::post_with`] to the node at `addr`.
    async fn post_at(&self, addr: SocketAddr, update: &Value, secret: &str, id: i64) -> u16 {
        let mut update = update.clone();
        update["update_id"] = id.into();
        let request = Request::post(&self.path)
            .header("host", addr.to_string())
            .header("content-type", "application/json")
            .header("x-telegram-bot-api-secret-token", secret)
            .body(Full::new(Bytes::from(update.to_string())))
            .expect("request");
        within("the webhook", async {
            let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
            let (mut sender, connection) =
                hyper::client::conn::http1::handshake(TokioIo::new(stream))
                    .await
                    .expect("handshake");
            tokio::spawn(connection);
            sender
                .send_request(request)
                .await
                .expect("response")
                .status()
                .as_u16()
        })
        .await
    }

    async fn post(&self, update: &Value) -> u16 {
        self.post_to(self.addr, update).await
    }

    /// [`Bot::post`] to the node at `addr`.
    async fn post_to(&self, addr: SocketAddr, update: &Value) -> u16 {
        let id = self
            .next_update
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.post_at(addr, update, &self.secret, id).await
    }
}

fn click(message: &Call, data: &str, user: i64) -> Value {
    json!({ "callback_query": {
        "id": format!("cq-{data}-{user}"),
        "from": { "id": user, "is_bot": false, "first_name": "Ana" },
        "message": { "message_id": message.message_id, "chat": { "id": CHAT, "type": "supergroup" }, "reply_markup": message.body["reply_markup"] },
        "chat_instance": "1",
        "data": data,
    }})
}

fn reply_to(prompt: &Call, text: &str, user: i64) -> Value {
    json!({ "message": {
        "message_id": 9000,
        "from": { "id": user, "is_bot": false, "first_name": "Ana" },
        "chat": { "id": CHAT, "type": "supergroup" },
        "date": 1,
        "text": text,
        "reply_to_message": { "message_id": prompt.message_id, "chat": { "id": CHAT, "type": "supergroup" }, "date": 1 },
    }})
}

/// A fake Telegram, a server sending to it, and a bot connected for `ops/`.
async fn with_bot() -> (FakeTelegram, TempDir, TestServer, Bot) {
    let (fake, dir) = (FakeTelegram::start().await, TempDir::new());
    let server = server(&fake, &dir).await;
    let bot = connect_bot(&mut server.client().await, &fake, server.addr).await;
    (fake, dir, server, bot)
}

/// Connects the bot for `ops/` through `admin` (a wrong token first, refused), and
/// Telegram's side of it, POSTing updates to `addr`.
async fn connect_bot(admin: &mut Client, fake: &FakeTelegram, addr: SocketAddr) -> Bot {
    let connect = ConnectTelegramRequest {
        bot_token: TOKEN.into(),
        chat_id: CHAT.to_string(),
        session_prefix: "ops/".into(),
        ..Default::default()
    };
    let wrong = ConnectTelegramRequest {
        bot_token: "123456:wrong".into(),
        ..connect.clone()
    };
    let refused = admin
        .connect_telegram(wrong)
        .await
        .expect_err("a token Telegram refuses");
    assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
    let bot = admin.connect_telegram(connect).await.expect("connect");
    assert_eq!(
        (bot.bot_user_id, bot.bot_username.as_str()),
        (777, "askgate_test_bot")
    );
    assert_eq!(
        admin.list_telegram_bots().await.expect("list"),
        std::slice::from_ref(&bot)
    );
    let hook = fake.wait_for("setWebhook", "setWebhook", |_| true).await;
    assert_eq!(
        hook.body["url"],
        format!("{PUBLIC}/telegram/webhook/{}", bot.id)
    );
    Bot {
        addr,
        path: format!("/telegram/webhook/{}", bot.id),
        secret: hook.body["secret_token"]
            .as_str()
            .expect("a secret")
            .to_owned(),
        next_update: 1.into(),
    }
}

/// `/link CODE`, as Telegram POSTs a message `from` user `user` in `chat`.
fn link_message(code: &str, user: i64, chat: Value) -> Value {
    json!({ "message": {
        "message_id": 7000 + user,
        "from": { "id": user, "is_bot": false, "first_name": "Ana" },
        "chat": chat,
        "date": 1_700_000_000,
        "text": format!("/link {code}"),
    }})
}

/// docs/approvals.md "People": a person asks for a code and sends `/link CODE` to the
/// bot in a private chat; their Telegram account is theirs from then on, so a click
/// there answers an ask that names their subject. A code works once, and never from
/// a group, where others could take it.
async fn a_telegram_account_is_linked_with_a_one_time_code() {
    let (fake, _dir, server, bot) = with_bot().await;
    let mut client = server.client().await;
    let me = Person {
        id: "ana".into(),
        identities: vec![Identity {
            kind: "subject".into(),
            value: "anonymous".into(),
        }],
        ..Default::default()
    };
    client.put_person(me).await.expect("ana");
    let code = client.start_link().await.expect("a code").code;
    let private = |user: i64| json!({ "id": user, "type": "private", "first_name": "Ana" });

    let group = link_message(&code, 77, json!({ "id": CHAT, "type": "supergroup" }));
    assert_eq!(bot.post(&group).await, 200);
    fake.wait_for("the group's answer", "sendMessage", |c| {
        c.body["chat_id"] == CHAT
            && c.body["text"]
                .as_str()
                .is_some_and(|t| t.contains("private chat"))
    })
    .await;
    assert_eq!(bot.post(&link_message(&code, 77, private(77))).await, 200);
    fake.wait_for("the link's answer", "sendMessage", |c| {
        c.body["chat_id"] == 77
            && c.body["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("Linked"))
    })
    .await;
    let again = link_message(&code, 78, private(78));
    assert_eq!(bot.post(&again).await, 200);
    fake.wait_for("the used code's answer", "sendMessage", |c| {
        c.body["chat_id"] == 78 && c.body["text"].as_str().is_some_and(|t| t.contains("used"))
    })
    .await;
    let people = client.list_people().await.expect("people");
    let identities: Vec<&str> = people[0]
        .identities
        .iter()
        .map(|i| i.value.as_str())
        .collect();
    assert_eq!(identities, ["anonymous", "77"]);

    // An ask for ana's subject: her Telegram account answers it, 78's does not.
    let call = in_background(&client, deploy("ops/linked").approvers(["anonymous"]));
    let sent = fake.sent("session ops/linked").await;
    assert_eq!(
        bot.post(&click(&sent, &button(&sent.body, "no"), 78)).await,
        200
    );
    fake.wait_for("the refusal", "answerCallbackQuery", |c| {
        c.body["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("Only anonymous may answer"))
    })
    .await;
    assert_eq!(
        bot.post(&click(&sent, &button(&sent.body, "yes"), 77))
            .await,
        200
    );
    let answered = within("the ask", call)
        .await
        .expect("join")
        .expect("answered");
    assert_eq!(answered.resolved_by, "telegram:77");
}
on_every_backend!(
    #[tokio::test]
    a_telegram_account_is_linked_with_a_one_time_code
);

fn deploy(session: &str) -> Ask {
    Ask::new(session).question(
        question("q", "Deploy <b>now</b> & then?")
            .choice("yes")
            .choice("no"),
    )
}

async fn a_click_answers_and_the_message_is_edited_forged_updates_are_refused_and_repeats_do_nothing()
 {
    let (fake, _dir, server, bot) = with_bot().await;
    let client = server.client().await;
    let call = in_background(&client, deploy("ops/1"));
    let sent = fake.sent("Deploy &lt;b&gt;now&lt;/b&gt; &amp; then?").await;
    assert_eq!(sent.body["chat_id"], CHAT);
    let yes = click(&sent, &button(&sent.body, "yes"), 42);

    // Forged: no secret, another bot's secret, another tenant's name in it.
    assert_eq!(bot.post_with(&yes, "", 1).await, 401);
    assert_eq!(
        bot.post_with(&yes, &format!("{}x", bot.secret), 2).await,
        401
    );
    assert_eq!(bot.post_with(&yes, &"A".repeat(60), 3).await, 401);
    // The right tenant, the wrong secret: the token is compared whole.
    let mut guessed = bot.secret.clone();
    let last = guessed.pop().expect("a secret");
    guessed.push(if last == 'A' { 'B' } else { 'A' });
    assert_eq!(bot.post_with(&yes, &guessed, 4).await, 401);
    assert_eq!(
        client
            .clone()
            .list_pending("ops/1")
            .await
            .expect("pending")
            .len(),
        1,
        "a forged click answers nothing"
    );

    assert_eq!(bot.post(&yes).await, 200);
    let answered = within("the ask", call)
        .await
        .expect("join")
        .expect("answered");
    assert_eq!(answered.answers[0].selected, ["yes"]);
    assert_eq!(answered.resolved_by, "telegram:42");
    fake.wait_for("the click's acknowledgement", "answerCallbackQuery", |c| {
        c.body["text"] == "Sent: yes"
    })
    .await;
    let edited = fake
        .wait_for("the edit", "editMessageText", |c| {
            c.body["message_id"] == json!(sent.message_id)
        })
        .await;
    let text = edited.body["text"].as_str().expect("text");
    assert!(
        text.contains("Answered by")
            && text.contains("telegram:42")
            && text.contains("→ <b>yes</b>"),
        "{text}"
    );
    assert!(
        edited.body.get("reply_markup").is_none(),
        "the buttons are gone"
    );

    // The same update again (Telegram's id): 200, so that Telegram stops sending it
    // and sends the updates after it (a 4xx made it retry, holding them back), and
    // nothing changes: the click is not acknowledged twice.
    let replayed = bot.next_update.load(std::sync::atomic::Ordering::SeqCst) - 1;
    assert_eq!(bot.post_with(&yes, &bot.secret, replayed).await, 200);
    // A late click is told who won.
    let late = click(&sent, &button(&sent.body, "no"), 43);
    assert_eq!(bot.post(&late).await, 200);
    fake.wait_for("the late click's notice", "answerCallbackQuery", |c| {
        c.body["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("Too late: answered by telegram:42"))
    })
    .await;
    let acknowledged = fake
        .state
        .lock()
        .calls
        .iter()
        .filter(|c| c.method == "answerCallbackQuery")
        .count();
    assert_eq!(
        acknowledged, 2,
        "the click and the late click, not the replay"
    );

    // The bot is no webhook endpoint; disconnected, it is gone and its webhook too.
    let mut webhooks = WebhooksClient::connect(server.url())
        .await
        .expect("connect");
    assert!(
        webhooks
            .list_endpoints(ListEndpointsRequest {})
            .await
            .expect("list")
            .into_inner()
            .endpoints
            .is_empty()
    );
    let mut admin = server.client().await;
    let id = bot.path.rsplit('/').next().expect("id").to_owned();
    admin.disconnect_telegram(&id).await.expect("disconnect");
    fake.wait_for("deleteWebhook", "deleteWebhook", |_| true)
        .await;
    assert_eq!(
        admin
            .disconnect_telegram(&id)
            .await
            .expect_err("gone")
            .reason(),
        Reason::NotFound
    );
    assert_eq!(
        bot.post(&late).await,
        401,
        "a disconnected bot's updates are refused"
    );
}
on_every_backend!(
    #[tokio::test]
    a_click_answers_and_the_message_is_edited_forged_updates_are_refused_and_repeats_do_nothing
);

async fn the_console_wins_and_replies_cancel_and_answer_batches() {
    let (fake, _dir, server, bot) = with_bot().await;
    let mut client = server.client().await;

    // Answered elsewhere first: the message is edited, a click is too late.
    let first = in_background(&client, deploy("ops/a"));
    let sent = fake.sent("ops/a").await;
    let rpc = pending_rpc(&client, "ops/a").await;
    client
        .answer("ops/a", &rpc, vec![answer::select("q", ["no"])])
        .await
        .expect("the console answers");
    assert_eq!(
        within("the ask", first)
            .await
            .expect("join")
            .expect("answered")
            .answers[0]
            .selected,
        ["no"]
    );
    fake.wait_for("the edit", "editMessageText", |c| {
        c.body["message_id"] == json!(sent.message_id)
    })
    .await;
    assert_eq!(
        bot.post(&click(&sent, &button(&sent.body, "yes"), 42))
            .await,
        200
    );
    fake.wait_for("the late notice", "answerCallbackQuery", |c| {
        c.body["text"]
            .as_str()
            .is_some_and(|t| t.contains("Too late"))
    })
    .await;

    // Cancel…: a prompt for a reason, and the reply cancels.
    let second = in_background(&client, deploy("ops/b"));
    let sent = fake.sent("ops/b").await;
    assert_eq!(
        bot.post(&click(&sent, &button(&sent.body, "Cancel"), 42))
            .await,
        200
    );
    let prompt = fake
        .wait_for("the prompt", "sendMessage", |c| {
            c.body["reply_markup"]["force_reply"] == true
        })
        .await;
    assert_eq!(bot.post(&reply_to(&prompt, "not <today>", 42)).await, 200);
    let cancelled = within("the ask", second)
        .await
        .expect("join")
        .expect_err("cancelled");
    assert_eq!(cancelled.reason(), Reason::AskCancelled);
    assert!(cancelled.to_string().contains("not <today>"), "{cancelled}");

    // A batch with many options: Answer…, and one line per question.
    let batch = Ask::new("ops/c")
        .question((0..30).fold(question("pick", "Which region?"), |q, i| {
            q.choice(&format!("region-{i}"))
        }))
        .question(question("why", "Why?"));
    let third = in_background(&client, batch);
    let sent = fake.sent("ops/c").await;
    assert_eq!(
        bot.post(&click(&sent, &button(&sent.body, "Answer"), 7))
            .await,
        200
    );
    let prompts = fake.count("sendMessage");
    let prompt = fake
        .wait_for("the prompt", "sendMessage", |c| {
            c.body["reply_markup"]["force_reply"] == true
                && c.body["reply_parameters"]["message_id"] == json!(sent.message_id)
        })
        .await;
    // A wrong reply is answered with why, and changes nothing.
    assert_eq!(bot.post(&reply_to(&prompt, "1\n2\n3", 7)).await, 200);
    fake.wait_for("the refusal", "sendMessage", |c| {
        c.body["text"]
            .as_str()
            .is_some_and(|t| t.contains("one line per question"))
    })
    .await;
    assert!(fake.count("sendMessage") > prompts);
    assert_eq!(bot.post(&reply_to(&prompt, "30\nlatency", 7)).await, 200);
    let answered = within("the ask", third)
        .await
        .expect("join")
        .expect("answered");
    assert_eq!(answered.answers[0].selected, ["region-29"]);
    assert_eq!(answered.answers[1].custom.as_deref(), Some("latency"));
    assert_eq!(answered.resolved_by, "telegram:7");
}
on_every_backend!(
    #[tokio::test]
    the_console_wins_and_replies_cancel_and_answer_batches
);

async fn multi_select_toggles_and_asks_telegram_may_not_answer_link_the_console() {
    let (fake, _dir, server, bot) = with_bot().await;
    let client = server.client().await;
    let several = Ask::new("ops/m").question(
        question("q", "Which?")
            .choice("a")
            .choice("b")
            .choice("c")
            .multi_select(),
    );
    let call = in_background(&client, several);
    let sent = fake.sent("ops/m").await;
    assert_eq!(
        bot.post(&click(&sent, &button(&sent.body, "☐ 2. b"), 5))
            .await,
        200
    );
    let toggled = fake
        .wait_for("the marks", "editMessageReplyMarkup", |_| true)
        .await;
    let mut now = sent.clone();
    now.body["reply_markup"] = toggled.body["reply_markup"].clone();
    assert!(button(&now.body, "☑ 2. b").starts_with("t:"));
    assert_eq!(
        bot.post(&click(&now, &button(&now.body, "Send"), 5)).await,
        200
    );
    assert_eq!(
        within("the ask", call)
            .await
            .expect("join")
            .expect("answered")
            .answers[0]
            .selected,
        ["b"]
    );

    // Only the console may answer: no answering buttons, a link to the console.
    let console_only = deploy("ops/n").allowed_channels(["console"]);
    let _waiting = in_background(&client, console_only);
    let sent = fake.sent("ops/n").await;
    let rows = sent.body["reply_markup"]["inline_keyboard"].to_string();
    assert!(
        rows.contains(&format!("{PUBLIC}/console/#/inbox")) && !rows.contains("callback_data"),
        "{rows}"
    );
    assert!(
        sent.body["text"]
            .as_str()
            .expect("text")
            .contains("cannot be answered from Telegram")
    );
}
on_every_backend!(
    #[tokio::test]
    multi_select_toggles_and_asks_telegram_may_not_answer_link_the_console
);

/// Text with every character HTML or Telegram treats specially, emoji and a long tail.
const MARKUP: &str = "<b>bold</b> & <a href=\"x\">link</a> &amp; \"quoted\" @all 🚀𝄞 <pre>";

/// Every shape of ask is sent, answered or cancelled from the console, and edited, and
/// the fake takes each message and edit: none breaks the Bot API's rules.
#[tokio::test]
async fn every_shape_of_ask_is_sent_and_edited_within_telegrams_rules() {
    let (fake, _dir, server, _bot) = with_bot().await;
    let mut client = server.client().await;
    let long = MARKUP.repeat(52);
    let many = |q: askgate_client::QuestionBuilder, n: usize| {
        (0..n).fold(q, |q, i| q.option(&format!("{MARKUP} {i}"), &long))
    };
    let mut shapes: Vec<Ask> = Vec::new();
    for n in [2, 10, 20, 21, 100] {
        shapes.push(Ask::new("ops/s").question(many(question("q", &long), n)));
        shapes.push(Ask::new("ops/s").question(many(question("q", &long), n).multi_select()));
    }
    shapes.push(Ask::new("ops/s").question(question("q", &long).header(&MARKUP.repeat(3))));
    shapes.push(
        Ask::new("ops/s")
            .question(
                question("q", "Ship this plan?")
                    .detail(&long.repeat(4))
                    .choice("Approve")
                    .choice("Reject")
                    .plan_review("Approve"),
            )
            .action("deploy <prod>", &format!("{{\"cmd\": {long:?}}}")),
    );
    shapes.push((0..20).fold(Ask::new("ops/s"), |ask, i| {
        ask.question(many(question(&format!("q{i}"), &long), i % 4 * 3))
    }));
    for (i, shape) in shapes.into_iter().enumerate() {
        let session = format!("ops/shape-{i}");
        let mut ask = shape;
        ask.request_mut().session_id = session.clone();
        let questions = ask.request_mut().questions.clone();
        let mut call = in_background(&client, ask);
        let marker = format!("session {session}");
        let sent = tokio::select! {
            sent = fake.sent(&marker) => sent,
            ended = &mut call => panic!("shape {i} ended before it was sent: {ended:?}"),
        };
        let rpc = pending_rpc(&client, &session).await;
        match i % 2 {
            0 => {
                let answers = questions
                    .iter()
                    .map(|q| match q.options.first() {
                        Some(option) => answer::select(&q.id, [option.label.as_str()]),
                        None => answer::custom(&q.id, &long),
                    })
                    .collect();
                client
                    .answer(&session, &rpc, answers)
                    .await
                    .expect("answered");
            }
            _ => client
                .cancel(&session, &rpc, &MARKUP.repeat(4))
                .await
                .expect("cancelled"),
        }
        let _ = within("the ask", call).await.expect("join");
        fake.wait_for("the edit", "editMessageText", |c| {
            c.body["message_id"] == json!(sent.message_id)
        })
        .await;
    }
}

/// A fake Telegram and the bot connected to it, as the conformance suite drives them.
struct Telegram {
    fake: FakeTelegram,
    bot: Option<Bot>,
}

impl Telegram {
    fn bot(&self) -> &Bot {
        self.bot.as_ref().expect("the bot is connected")
    }
}

impl Telegram {
    /// A click on the option's button of `sent` by user 42, as Telegram POSTs it (an
    /// update of its own): the notice its acknowledgement shows.
    async fn click_notice(&self, node: SocketAddr, sent: &Call, option: &str) -> String {
        static CLICKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let mut update = click(sent, &button(&sent.body, option), 42);
        let id = format!(
            "cq-conformance-{}",
            CLICKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        update["callback_query"]["id"] = id.clone().into();
        assert_eq!(self.bot().post_to(node, &update).await, 200);
        let acknowledged = self
            .fake
            .wait_for("the click's acknowledgement", "answerCallbackQuery", |c| {
                c.body["callback_query_id"] == id.as_str()
            })
            .await;
        acknowledged.body["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
}

impl crate::conformance::Conformant for Telegram {
    const NAME: &'static str = "telegram";
    type Message = Call;

    async fn start(hold: usize) -> Self {
        let fake = FakeTelegram::start().await;
        fake.state.lock().hang_sends = hold;
        Self { fake, bot: None }
    }

    fn config(&self, dir: &TempDir) -> ServerConfig {
        config(&self.fake, dir)
    }

    fn flags(&self, dir: &TempDir) -> Vec<String> {
        let key = dir.file("secret.key", SECRET_KEY);
        [
            "--telegram-api-url",
            &self.fake.url,
            "--secret-key-file",
            key.to_str().expect("path"),
            "--public-url",
            PUBLIC,
            "--webhook-timeout",
            "2s",
        ]
        .map(str::to_owned)
        .into()
    }

    async fn connect(&mut self, admin: &mut Client, node: SocketAddr) {
        self.bot = Some(connect_bot(admin, &self.fake, node).await);
    }

    async fn holding(&self) {
        self.fake
            .wait_for("the held send", "sendMessage", |c| c.hung)
            .await;
    }

    async fn asked(&self, session: &str) -> Call {
        // The context line: the session, then the agent or labels, or its end.
        let marker = format!("session {session}");
        self.fake
            .wait_for("the ask's message", "sendMessage", |c| {
                c.message_id.is_some()
                    && c.body["text"].as_str().is_some_and(|t| {
                        t.match_indices(&marker).any(|(at, _)| {
                            !t[at + marker.len()..]
                                .starts_with(|c: char| c.is_alphanumeric() || c == '-')
                        })
                    })
            })
            .await
    }

    /// A click on the option's button, as Telegram POSTs it (an update of its own);
    /// its acknowledgement says whether it was taken.
    async fn answer(&self, node: SocketAddr, sent: &Call, option: &str) -> Option<bool> {
        let notice = self.click_notice(node, sent, option).await;
        match notice.as_str() {
            _ if notice.starts_with("Sent: ") => Some(true),
            _ if notice.starts_with("Too late: ") || notice.contains("resolved already") => {
                Some(false)
            }
            other => panic!("a click was told {other:?}"),
        }
    }

    fn person(&self) -> Option<String> {
        Some("telegram:42".into())
    }

    fn other(&self) -> String {
        "telegram:4242".into()
    }

    /// The person's click on the option: what its acknowledgement shows them.
    async fn refused(&self, node: SocketAddr, session: &str, option: &str) -> Option<String> {
        let sent = self.asked(session).await;
        Some(self.click_notice(node, &sent, option).await)
    }

    async fn outcome(&self, sent: &Call) -> String {
        self.fake
            .wait_for("the edit", "editMessageText", |c| {
                c.body["message_id"] == json!(sent.message_id)
            })
            .await
            .body
            .to_string()
    }

    fn taken(&self, sent: &Call) -> (usize, usize) {
        let state = self.fake.state.lock();
        let count = |method: &str, matching: &dyn Fn(&Call) -> bool| {
            state
                .calls
                .iter()
                .filter(|c| c.method == method && matching(c))
                .count()
        };
        (
            count("sendMessage", &|c| {
                c.message_id.is_some() && c.body["text"] == sent.body["text"]
            }),
            count("editMessageText", &|c| {
                c.body["message_id"] == json!(sent.message_id)
            }),
        )
    }
}

channel_conformance!(Telegram);
