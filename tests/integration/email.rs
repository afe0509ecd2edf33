//! Answering by email through real servers and a real SMTP server (aiosmtpd's,
//! tests/email/smtp_sink.py, which parses every mail with Python's email parser and
//! reports its defects). The tests follow the mails' links as a person would: GET the
//! page (which answers nothing: a scanner that prefetches links changes nothing), then
//! POST its form.

use std::{sync::Arc, time::Duration};

use askgate_client::{Ask, Client, Reason, answer, question};
use askgate_proto::v1::ConnectEmailRequest;
use askgate_server::server::{ApprovalConfig, ChannelConfig, HttpConfig};
use askgate_server::{ServerConfig, channels::delivery::WebhookConfig, origin::PublicUrl};
use parking_lot::Mutex;
use serde_json::Value;
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    sync::Notify,
    task::JoinHandle,
};
use tonic::Code;

use crate::support::{
    TempDir, TestServer, helper_command, identities_of, identity, in_background, pending_rpc,
    put_anonymous_ana, test_config, within,
};

const PUBLIC: &str = "https://askgate.example.com";
const SECRET_KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

/// The SMTP server, and every mail it took.
struct Smtp {
    port: u16,
    mails: Arc<Mutex<Vec<Value>>>,
    /// Mails held unanswered so far.
    held: Arc<Mutex<usize>>,
    arrived: Arc<Notify>,
    _child: tokio::process::Child,
    _reader: JoinHandle<()>,
}

impl Smtp {
    async fn start() -> Self {
        Self::holding(0).await
    }

    /// An SMTP server that holds its first `hold` mails unanswered.
    async fn holding(hold: usize) -> Self {
        let mut child = helper_command("email/smtp_sink.py")
            .args(["--hold", &hold.to_string()])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("spawn the SMTP server (tests/email/smtp_sink.py)");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let port = within("the SMTP server's port", lines.next_line())
            .await
            .expect("read")
            .expect("a port")
            .trim()
            .parse()
            .expect("a port number");
        let (mails, arrived) = (Arc::new(Mutex::new(Vec::new())), Arc::new(Notify::new()));
        let held = Arc::new(Mutex::new(0));
        let (m, a, h) = (mails.clone(), arrived.clone(), held.clone());
        let reader = tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                let mail: Value = serde_json::from_str(&line).expect("a mail as JSON");
                if mail["held"] == true {
                    *h.lock() += 1;
                    a.notify_waiters();
                    continue;
                }
                m.lock().push(mail);
                a.notify_waiters();
            }
        });
        Self {
            port,
            mails,
            held,
            arrived,
            _child: child,
            _reader: reader,
        }
    }

    /// The first mail matching `matching`; fails at once on a mail with defects.
    async fn wait_for(&self, what: &str, matching: impl Fn(&Value) -> bool) -> Value {
        within(what, async {
            loop {
                let notified = self.arrived.notified();
                {
                    let mails = self.mails.lock();
                    if let Some(bad) = mails.iter().find(|m| m["defects"] != Value::Array(vec![])) {
                        panic!("a malformed mail: {bad}");
                    }
                    if let Some(mail) = mails.iter().find(|m| matching(m)) {
                        return mail.clone();
                    }
                }
                notified.await;
            }
        })
        .await
    }

    /// The ask's mail to `to` whose text holds `marker`.
    async fn asked(&self, to: &str, marker: &str) -> Value {
        self.wait_for("the ask's mail", |m| {
            m["rcpt_tos"][0] == to
                && m["in_reply_to"] == ""
                && m["text"].as_str().is_some_and(|t| t.contains(marker))
        })
        .await
    }

    /// Waits until a mail is held unanswered.
    async fn holding_one(&self) {
        within("a held mail", async {
            loop {
                let notified = self.arrived.notified();
                if *self.held.lock() > 0 {
                    return;
                }
                notified.await;
            }
        })
        .await
    }

    fn count(&self, matching: impl Fn(&Value) -> bool) -> usize {
        self.mails.lock().iter().filter(|m| matching(m)).count()
    }
}

/// The links of a mail's plain-text part under `label:` (the form's) or `choose:`
/// (the options'), in order.
fn links(mail: &Value, label: &str) -> Vec<String> {
    let text = mail["text"].as_str().expect("a plain-text part");
    text.lines()
        .filter_map(|l| l.trim().strip_prefix(label))
        .map(|l| l.trim().to_owned())
        .collect()
}

/// The path of a link to the server (its public origin taken off).
fn path(link: &str) -> String {
    link.strip_prefix(PUBLIC)
        .expect("a link to the public URL")
        .to_owned()
}

/// A request to the server, a form's body if any: the status and the page.
async fn http(server: &TestServer, method: &str, path: &str, form: &str) -> (u16, String) {
    let form_type = [("content-type", "application/x-www-form-urlencoded")];
    crate::support::request_to(server.addr, method, path, &form_type, form).await
}

fn encode(value: &str) -> String {
    form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

async fn server(smtp: &Smtp, dir: &TempDir) -> TestServer {
    TestServer::start_with(config(smtp, dir)).await
}

/// A node mailing through `smtp`, with a quick retry, a secret key and a public URL.
fn config(smtp: &Smtp, dir: &TempDir) -> ServerConfig {
    ServerConfig {
        webhooks: WebhookConfig {
            retry_initial: Duration::from_millis(100),
            retry_max: Duration::from_millis(500),
            ..WebhookConfig::default()
        },
        channels: ChannelConfig {
            smtp_url: Some(format!("smtp://127.0.0.1:{}", smtp.port)),
            email_from: Some("askgate <askgate@example.com>".into()),
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

/// An SMTP server, an askgate mailing through it, and a route for `ops/` to two people.
async fn with_route() -> (Smtp, TempDir, TestServer, String) {
    let (smtp, dir) = (Smtp::start().await, TempDir::new());
    let server = server(&smtp, &dir).await;
    let mut admin = server.client().await;
    let bad = ConnectEmailRequest {
        to: vec!["not an address".into()],
        ..Default::default()
    };
    let refused = admin.connect_email(bad).await.expect_err("not an address");
    assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
    let route = admin
        .connect_email(ConnectEmailRequest {
            to: vec!["ana@example.com".into(), "Bo <bo@example.com>".into()],
            session_prefix: "ops/".into(),
            ..Default::default()
        })
        .await
        .expect("connect");
    assert_eq!(route.to, ["ana@example.com", "Bo <bo@example.com>"]);
    assert_eq!(
        admin.list_email_routes().await.expect("list"),
        std::slice::from_ref(&route)
    );
    (smtp, dir, server, route.id)
}

fn deploy(session: &str) -> Ask {
    Ask::new(session).question(
        question("q", "Deploy <b>now</b> & then?")
            .choice("yes")
            .choice("no"),
    )
}

async fn a_link_answers_once_after_its_form_is_sent_and_a_follow_up_says_who() {
    let (smtp, _dir, server, _route) = with_route().await;
    let client = server.client().await;
    let call = in_background(&client, deploy("ops/1"));
    let ana = smtp.asked("ana@example.com", "ops/1").await;
    let bo = smtp.asked("bo@example.com", "ops/1").await;
    assert_eq!(ana["from"], "askgate <askgate@example.com>");
    assert!(
        ana["subject"]
            .as_str()
            .is_some_and(|s| s.starts_with("[askgate] "))
    );
    assert_eq!(ana["content_type"], "multipart/alternative");
    let html = ana["html"].as_str().expect("an HTML part");
    assert!(html.contains("Deploy &lt;b&gt;now&lt;/b&gt; &amp; then?") && !html.contains("<b>now"));
    let (yes, no) = match links(&ana, "choose:").as_slice() {
        [yes, no] => (path(yes), path(no)),
        other => panic!("two option links, not {other:?}"),
    };
    assert_ne!(
        links(&bo, "choose:")[0],
        links(&ana, "choose:")[0],
        "each person has links of their own"
    );

    // Opening a link (a scanner prefetching it) answers nothing; it shows the form
    // with its option chosen.
    let (status, page) = http(&server, "GET", &no, "").await;
    assert_eq!(status, 200);
    assert!(page.contains("value=\"no\" checked"), "{page}");
    assert!(page.contains("Deploy &lt;b&gt;now"), "{page}");
    assert!(
        page.contains("you answer as email:ana@example.com"),
        "says whom Ana answers as: {page}"
    );
    assert!(page.contains("--accent:"), "the console's style: {page}");
    let (status, _) = http(&server, "GET", &yes, "").await;
    assert_eq!(status, 200);
    assert_eq!(
        client
            .clone()
            .list_pending("ops/1")
            .await
            .expect("pending")
            .len(),
        1
    );

    // Forged: another MAC, another payload, garbage.
    let (payload, mac) = no.rsplit_once('.').expect("a signed link");
    let flipped = format!("{payload}.{}", mac.replace('a', "b").replace('0', "1"));
    for forged in [
        flipped,
        format!("{}x.{mac}", payload),
        "/answer/nothing".into(),
    ] {
        let (status, _) = http(&server, "POST", &forged, "").await;
        assert_eq!(status, 403, "{forged}");
    }

    // The form sent: Ana's answer, as Ana.
    let (status, page) = http(&server, "POST", &no, "q.q=no").await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Your answer is sent:"), "{page}");
    assert!(
        page.contains("then? → no</li>"),
        "repeats the answer: {page}"
    );
    assert!(
        page.contains("Sent as <b>email:ana@example.com</b>"),
        "{page}"
    );
    let answered = within("the ask", call)
        .await
        .expect("join")
        .expect("answered");
    assert_eq!(answered.answers[0].selected, ["no"]);
    assert_eq!(answered.resolved_by, "email:ana@example.com");

    // Used: the same link again, and Bo's, are refused and change nothing.
    let (status, _) = http(&server, "POST", &no, "q.q=yes").await;
    assert_eq!(status, 410);
    let bo_yes = path(&links(&bo, "choose:")[0]);
    let (status, page) = http(&server, "POST", &bo_yes, "").await;
    assert_eq!(status, 409, "{page}");
    assert!(
        page.contains("Too late: answered by email:ana@example.com.")
            && page.contains("then? → no"),
        "says who won, and how: {page}"
    );

    // Each person gets the follow-up, in the ask's thread.
    for (to, asked) in [("ana@example.com", &ana), ("bo@example.com", &bo)] {
        let follow_up = smtp
            .wait_for("the follow-up", |m| {
                m["rcpt_tos"][0] == to && m["in_reply_to"] != ""
            })
            .await;
        assert_eq!(follow_up["in_reply_to"], asked["message_id"]);
        let text = follow_up["text"].as_str().expect("text");
        assert!(
            text.contains("Answered by email:ana@example.com") && text.contains("→ no"),
            "{text}"
        );
    }
}
on_every_backend!(
    #[tokio::test]
    a_link_answers_once_after_its_form_is_sent_and_a_follow_up_says_who
);

/// docs/approvals.md "People": a person links an address by mail; the page of the
/// link changes nothing until confirmed, then adds the address once.
async fn a_mailed_link_adds_the_address_to_the_person_who_asked() {
    let (smtp, dir) = (Smtp::start().await, TempDir::new());
    let server = server(&smtp, &dir).await;
    let mut client = server.client().await;
    // The caller (anonymous: no authentication) is Ana.
    put_anonymous_ana(&mut client).await;
    let refused = client
        .start_link_by_mail("not an address")
        .await
        .expect_err("not an address");
    assert_eq!(refused.reason(), Reason::BadRequest, "{refused:?}");
    let mailed = client
        .start_link_by_mail("Ana <ana@example.com>")
        .await
        .expect("mailed");
    assert_eq!(mailed.code, "", "the code travels in the mail only");
    let mail = smtp
        .wait_for("the link's mail", |m| {
            m["rcpt_tos"][0] == "ana@example.com"
                && m["subject"] == "Link this address to your askgate answers"
        })
        .await;
    let text = mail["text"].as_str().expect("text");
    assert!(
        text.contains("Ana Lima asked to link this address"),
        "{text}"
    );
    let link = path(&links(&mail, "link:")[0]);
    assert!(link.starts_with("/link/"), "{link}");
    // Opening it (a scanner prefetching it) changes nothing.
    let (status, page) = http(&server, "GET", &link, "").await;
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("Link ana@example.com to your askgate answers?"),
        "{page}"
    );
    let anonymous = identity("subject", "anonymous");
    assert_eq!(
        identities_of(&mut client, "ana").await,
        std::slice::from_ref(&anonymous)
    );

    // Forged, or an answer's link under this path: refused.
    let (payload, mac) = link.rsplit_once('.').expect("a signed link");
    let flipped = format!("{payload}.{}", mac.replace('a', "b").replace('0', "1"));
    for forged in [flipped, format!("{payload}x.{mac}"), "/link/nothing".into()] {
        let (status, _) = http(&server, "POST", &forged, "").await;
        assert_eq!(status, 403, "{forged}");
    }

    // Confirmed: the address is Ana's; the link is spent.
    let (status, page) = http(&server, "POST", &link, "").await;
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("Linked: answers from ana@example.com count as Ana Lima's."),
        "{page}"
    );
    assert_eq!(
        identities_of(&mut client, "ana").await,
        [anonymous, identity("email", "ana@example.com")]
    );
    let (status, page) = http(&server, "POST", &link, "").await;
    assert_eq!(status, 400, "used: {page}");
}
on_every_backend!(
    #[tokio::test]
    a_mailed_link_adds_the_address_to_the_person_who_asked
);

async fn batches_cancel_first_wins_and_allowed_channels_by_email() {
    let (smtp, _dir, server, route) = with_route().await;
    let mut client = server.client().await;

    // A batch, answered through the form link.
    let batch = Ask::new("ops/b")
        .question(question("env", "Where?").choice("staging").choice("prod"))
        .question(question("why", "Why?"));
    let call = in_background(&client, batch);
    let mail = smtp.asked("ana@example.com", "ops/b").await;
    assert!(
        links(&mail, "choose:").is_empty(),
        "a batch has no option links"
    );
    let form = path(&links(&mail, "Answer or cancel:")[0]);
    let (status, page) = http(&server, "GET", &form, "").await;
    assert_eq!(status, 200);
    assert!(
        page.contains("name=\"q.env\"") && page.contains("name=\"custom.why\""),
        "{page}"
    );
    // A wrong answer shows the form again, with why, and leaves the link usable.
    let (status, page) = http(&server, "POST", &form, "q.env=mars").await;
    assert_eq!(status, 400, "{page}");
    assert!(page.contains("Not sent"), "{page}");
    let body = format!("q.env=prod&custom.why={}", encode("a fix & <more>"));
    assert_eq!(http(&server, "POST", &form, &body).await.0, 200);
    let answered = within("the batch", call)
        .await
        .expect("join")
        .expect("answered");
    assert_eq!(answered.answers[0].selected, ["prod"]);
    assert_eq!(
        answered.answers[1].custom.as_deref(),
        Some("a fix & <more>")
    );

    // Cancel through the form, with a reason.
    let call = in_background(&client, deploy("ops/c"));
    let mail = smtp.asked("bo@example.com", "ops/c").await;
    let form = path(&links(&mail, "Answer or cancel:")[0]);
    let body = format!("cancel=1&reason={}", encode("not today"));
    assert_eq!(http(&server, "POST", &form, &body).await.0, 200);
    let cancelled = within("the ask", call)
        .await
        .expect("join")
        .expect_err("cancelled");
    assert_eq!(cancelled.reason(), Reason::AskCancelled);
    assert!(cancelled.to_string().contains("not today"), "{cancelled}");

    // The console first: the follow-up says so, and a link is too late.
    let call = in_background(&client, deploy("ops/d"));
    let mail = smtp.asked("ana@example.com", "ops/d").await;
    let rpc = pending_rpc(&client, "ops/d").await;
    client
        .answer("ops/d", &rpc, vec![answer::select("q", ["yes"])])
        .await
        .expect("the console answers");
    within("the ask", call)
        .await
        .expect("join")
        .expect("answered");
    let (status, page) = http(&server, "POST", &path(&links(&mail, "choose:")[1]), "").await;
    assert_eq!(status, 409, "{page}");

    // Only the console may answer: no answering link, a pointer to the console.
    let _waiting = in_background(&client, deploy("ops/e").allowed_channels(["console"]));
    let mail = smtp.asked("ana@example.com", "ops/e").await;
    assert!(links(&mail, "choose:").is_empty() && links(&mail, "Answer or cancel:").is_empty());
    assert!(
        mail["text"]
            .as_str()
            .expect("text")
            .contains("cannot be answered by email")
    );

    // Disconnected: its links answer nothing.
    let _pending = in_background(&client, deploy("ops/f"));
    let mail = smtp.asked("ana@example.com", "ops/f").await;
    client.disconnect_email(&route).await.expect("disconnect");
    let (status, _) = http(&server, "POST", &path(&links(&mail, "choose:")[0]), "").await;
    assert_eq!(status, 410);
    assert_eq!(
        client
            .disconnect_email(&route)
            .await
            .expect_err("gone")
            .reason(),
        Reason::NotFound
    );
    // Every mail went once to each person.
    for session in ["ops/b", "ops/c", "ops/d"] {
        let count = smtp.count(|m| {
            m["rcpt_tos"][0] == "ana@example.com"
                && m["in_reply_to"] == ""
                && m["text"].as_str().is_some_and(|t| {
                    t.lines().any(|l| {
                        let l = l.trim();
                        l == format!("session {session}")
                            || l.starts_with(&format!("session {session} "))
                    })
                })
        });
        assert_eq!(count, 1, "{session}");
    }
}
on_every_backend!(
    #[tokio::test]
    batches_cancel_first_wins_and_allowed_channels_by_email
);

/// Whom the conformance suite's route mails: the person who answers, and another.
const ANA: &str = "ana@example.com";
const BO: &str = "bo@example.com";

/// An ask's mail, and the session it asks in.
#[derive(Debug, Clone)]
struct Mailed {
    session: String,
    mail: Value,
}

/// Whether `mail` (an ask, not a follow-up) asks in `session`: a line of its text
/// names the session, alone or before the agent and labels.
fn asks_in(mail: &Value, session: &str) -> bool {
    asks_whom_in(mail, ANA, session)
}

/// Whether `mail` asks `whom` in `session` ([`asks_in`]).
fn asks_whom_in(mail: &Value, whom: &str, session: &str) -> bool {
    let line = format!("session {session}");
    mail["rcpt_tos"][0] == whom
        && mail["in_reply_to"] == ""
        && mail["text"].as_str().is_some_and(|t| {
            t.lines()
                .map(str::trim)
                .any(|l| l == line || l.starts_with(&format!("{line} ")))
        })
}

impl crate::conformance::Conformant for Smtp {
    const NAME: &'static str = "email";
    type Message = Mailed;

    async fn start(hold: usize) -> Self {
        Smtp::holding(hold).await
    }

    fn config(&self, dir: &TempDir) -> ServerConfig {
        config(self, dir)
    }

    fn flags(&self, dir: &TempDir) -> Vec<String> {
        let key = dir.file("secret.key", SECRET_KEY);
        [
            "--smtp-url",
            &format!("smtp://127.0.0.1:{}", self.port),
            "--email-from",
            "askgate@example.com",
            "--secret-key-file",
            key.to_str().expect("path"),
            "--public-url",
            PUBLIC,
            "--webhook-timeout",
            "10s",
        ]
        .map(str::to_owned)
        .into()
    }

    async fn connect(&mut self, admin: &mut Client, _node: std::net::SocketAddr) {
        admin
            .connect_email(ConnectEmailRequest {
                to: vec![ANA.into(), BO.into()],
                session_prefix: "ops/".into(),
                ..Default::default()
            })
            .await
            .expect("connect the route");
    }

    async fn holding(&self) {
        self.holding_one().await;
    }

    /// The ask's mail, well-formed: Python's parser finds no defect (else
    /// [`Smtp::wait_for`] fails), its subject is one line, nothing in it added a
    /// recipient, and its HTML part is escaped.
    async fn asked(&self, session: &str) -> Mailed {
        let mail = self
            .wait_for("the ask's mail", |m| asks_in(m, session))
            .await;
        let subject = mail["subject"].as_str().expect("a subject");
        assert!(!subject.contains(['\r', '\n']), "{subject:?}");
        assert_eq!(mail["rcpt_tos"].as_array().map(Vec::len), Some(1), "{mail}");
        let html = mail["html"].as_str().expect("an HTML part");
        assert!(!html.contains("<b>bold"), "unescaped: {html}");
        Mailed {
            session: session.to_owned(),
            mail,
        }
    }

    /// The mail's form link followed as a person does: the form sent with the option.
    async fn answer(
        &self,
        node: std::net::SocketAddr,
        asked: &Mailed,
        option: &str,
    ) -> Option<bool> {
        let form = path(&links(&asked.mail, "Answer or cancel:")[0]);
        let form_type = [("content-type", "application/x-www-form-urlencoded")];
        let body = format!("q.q={}", encode(option));
        let (status, page) =
            crate::support::request_to(node, "POST", &form, &form_type, &body).await;
        match status {
            200 => Some(true),
            409 | 410 => Some(false),
            other => panic!("the form got {other}: {page}"),
        }
    }

    async fn outcome(&self, asked: &Mailed) -> String {
        let follow_up = self
            .wait_for("the follow-up", |m| {
                m["rcpt_tos"][0] == ANA && m["in_reply_to"] == asked.mail["message_id"]
            })
            .await;
        follow_up["text"].as_str().unwrap_or_default().to_owned()
    }

    fn person(&self) -> Option<String> {
        Some(format!("email:{ANA}"))
    }

    fn other(&self) -> String {
        format!("email:{BO}")
    }

    /// An ask for the other person alone is mailed to them alone: the person has no
    /// link to answer with. (The route decides for both recipients in one attempt,
    /// before either mail goes: once the other's mail is here, the person's would be.)
    async fn refused(
        &self,
        _node: std::net::SocketAddr,
        session: &str,
        _option: &str,
    ) -> Option<String> {
        self.wait_for("the other's mail", |m| asks_whom_in(m, BO, session))
            .await;
        assert_eq!(
            self.count(|m| asks_in(m, session)),
            0,
            "an ask for {BO} alone is not mailed to {ANA}"
        );
        None
    }

    fn taken(&self, asked: &Mailed) -> (usize, usize) {
        (
            self.count(|m| asks_in(m, &asked.session)),
            self.count(|m| m["in_reply_to"] == asked.mail["message_id"]),
        )
    }
}

channel_conformance!(Smtp);
