//! The channel conformance suite: what every channel people answer through (Slack,
//! Telegram, email, ntfy, and each new one) must do, stamped for a channel by one line
//! beside its fake service, `channel_conformance!(FakeService);`, where the fake
//! implements [`Conformant`] and refuses what the real service refuses:
//! - **answered once, then updated**: a person's answer through the channel resolves
//!   the ask as that person, the message then shows the outcome, and answering again
//!   changes nothing;
//! - **the first answer wins against the console**, both ways round, and the loser is
//!   told so (NOT_PENDING naming the channel's person, or the channel's "too late");
//! - **only approvers answer**: an ask whose approvers name another person of the
//!   channel is refused to this one, who is told "only … may answer this" (or is not
//!   sent it, or offered no control, where the channel does so), and to a console
//!   that is no approver (NOT_AN_APPROVER), with nothing changed; an ask naming the
//!   channel's person is answered by them;
//! - **every ask shape within the limits** (the default ones, at their edges) is sent
//!   and its outcome shown, and the fake takes each;
//! - **a killed node loses nothing and sends nothing twice**: on Redis, the node
//!   sending a message dies (-9) while the service holds it; a survivor sends it once
//!   the attempt's lease is over, an answer through another node resolves it, and no
//!   message or outcome of it, or of the asks after it, is taken twice.
//!
//! The first three run on every engine; the kill runs on Redis, where nodes share
//! deliveries (the sqlite engine's restart is the webhook tests' and the durability
//! suite's). Plain webhooks are a channel nobody answers through: their at-least-once
//! contract (the same `webhook-id` again) is tests/integration/webhooks.rs's.

use std::{net::SocketAddr, time::Duration};

use askgate_client::{Ask, Client, QuestionBuilder, Reason, answer, question};
use askgate_proto::v1::AskResponse;
use askgate_server::{ServerConfig, domain::validate::MAX_CANCEL_REASON_BYTES};
use tokio::task::JoinHandle;

use crate::support::{
    ServeProcess, TempDir, TestServer, in_background, pending_rpc, until_synced, within,
};

/// A channel's fake service, as the suite drives it. Each fake keeps what askgate
/// sent it and fails the test at once on anything the real service would refuse.
pub(crate) trait Conformant: Sized {
    /// The channel's name: answers through it are resolved by `NAME:<who>`.
    const NAME: &'static str;

    /// One ask's message as the service took it (a post, a mail, a push).
    type Message: Clone + std::fmt::Debug;

    /// The fake, holding the first `hold` messages askgate sends without taking them
    /// (their senders never hear back).
    async fn start(hold: usize) -> Self;

    /// A node's settings that send to the fake (`dir` holds the files they name).
    fn config(&self, dir: &TempDir) -> ServerConfig;

    /// The same as flags of `askgate serve`, with its `--webhook-timeout`.
    fn flags(&self, dir: &TempDir) -> Vec<String>;

    /// Connects the channel for the sessions under `ops/` through `admin`, a client of
    /// the node at `node`, which the service calls back (its inbound endpoint).
    async fn connect(&mut self, admin: &mut Client, node: SocketAddr);

    /// Waits until the fake holds a message.
    async fn holding(&self);

    /// The message of the ask in `session`, once the fake took it.
    async fn asked(&self, session: &str) -> Self::Message;

    /// A person answers question `q` of `message` with `option` through the channel,
    /// reaching the node at `node`: whether the channel told them it took the answer
    /// (`Some(true)`), that it came too late (`Some(false)`), or nothing (`None`).
    async fn answer(&self, node: SocketAddr, message: &Self::Message, option: &str)
    -> Option<bool>;

    /// The outcome the channel shows for `message` (the message updated, replaced or
    /// followed up), once the fake took it.
    async fn outcome(&self, message: &Self::Message) -> String;

    /// How many times the fake took `message`, and its outcome.
    fn taken(&self, message: &Self::Message) -> (usize, usize);

    /// Who [`Conformant::answer`] answers as, as an ask's approvers name them
    /// (`slack:T1/U1`); None for a channel that cannot tell who answers (an ntfy
    /// topic).
    fn person(&self) -> Option<String>;

    /// Another person of the channel, as approvers name them.
    fn other(&self) -> String;

    /// The ask in `session` names only [`Conformant::other`] as its approver; the
    /// channel's person tries to answer it with `option` through the node at `node`:
    /// the refusal the channel showed them, or None when it gave them nothing to
    /// answer with (not sent to them, or sent without controls; the fake checks which).
    async fn refused(&self, node: SocketAddr, session: &str, option: &str) -> Option<String>;
}

/// Stamps the suite for a channel whose fake is `$fake` (in scope where it is used).
macro_rules! channel_conformance {
    ($fake:ty) => {
        mod conformance {
            use super::*;

            async fn answered_once_then_updated() {
                crate::conformance::answered_once_then_updated::<$fake>().await
            }
            on_every_backend!(
                #[tokio::test]
                answered_once_then_updated
            );

            async fn the_first_answer_wins_against_the_console() {
                crate::conformance::the_first_answer_wins_against_the_console::<$fake>().await
            }
            on_every_backend!(
                #[tokio::test]
                the_first_answer_wins_against_the_console
            );

            async fn only_approvers_answer() {
                crate::conformance::only_approvers_answer::<$fake>().await
            }
            on_every_backend!(
                #[tokio::test]
                only_approvers_answer
            );

            #[tokio::test]
            async fn every_ask_shape_within_the_limits() {
                crate::conformance::every_ask_shape_within_the_limits::<$fake>().await
            }

            #[tokio::test]
            async fn on_redis_a_killed_node_loses_nothing_and_sends_nothing_twice() {
                crate::conformance::a_killed_node_loses_nothing_and_sends_nothing_twice::<$fake>()
                    .await
            }
        }
    };
}

/// The channel the terminal overlay answers from.
const TERMINAL: &str = "tui";
const SHIP: &str = "ship it";
const HOLD: &str = "hold off";

fn deploy(session: &str) -> Ask {
    Ask::new(session).question(
        question("q", "Deploy to production?")
            .choice(SHIP)
            .choice(HOLD),
    )
}

/// The ask's outcome, once `call` ends.
async fn ended(
    call: JoinHandle<Result<AskResponse, askgate_client::Error>>,
) -> Result<AskResponse, askgate_client::Error> {
    within("the ask to end", call).await.expect("join")
}

/// A console following `session` (a node remembers how the asks of a followed session
/// ended, for a late answer's NOT_PENDING to say who won).
async fn following(client: &Client, session: &str) -> askgate_client::Events {
    let mut events = client
        .clone()
        .subscribe_session(session)
        .await
        .expect("subscribe");
    until_synced(&mut events).await;
    events
}

/// The message of the ask `call` makes in `session`; fails if the ask ends first.
async fn asked<C: Conformant>(
    fake: &C,
    session: &str,
    call: &mut JoinHandle<Result<AskResponse, askgate_client::Error>>,
) -> C::Message {
    tokio::select! {
        message = fake.asked(session) => message,
        ended = call => panic!("{}: the ask in {session} ended before it was sent: {ended:?}", C::NAME),
    }
}

/// The retries the suite's nodes make: quick, so a held attempt's lease is the wait.
fn quick_retries(config: &mut ServerConfig) {
    config.webhooks.retry_initial = Duration::from_millis(100);
    config.webhooks.retry_max = Duration::from_millis(500);
}

/// A server sending to a fresh fake, the channel connected through it, a client.
struct Rig<C> {
    fake: C,
    server: TestServer,
    client: Client,
    _dir: TempDir,
}

impl<C: Conformant> Rig<C> {
    async fn start() -> Self {
        let dir = TempDir::new();
        let mut fake = C::start(0).await;
        let mut config = fake.config(&dir);
        quick_retries(&mut config);
        let server = TestServer::start_with(config).await;
        let mut client = server.client().await;
        fake.connect(&mut client, server.addr).await;
        Self {
            fake,
            server,
            client,
            _dir: dir,
        }
    }
}

pub(crate) async fn answered_once_then_updated<C: Conformant>() {
    let rig = Rig::<C>::start().await;
    let (fake, node, name) = (&rig.fake, rig.server.addr, C::NAME);
    let _following = following(&rig.client, "ops/once").await;
    let mut call = in_background(&rig.client, deploy("ops/once"));
    let message = asked(fake, "ops/once", &mut call).await;
    let rpc = pending_rpc(&rig.client, "ops/once").await;

    let said = fake.answer(node, &message, HOLD).await;
    assert_ne!(said, Some(false), "{name}: the first answer is taken");
    let answered = ended(call).await.expect("answered");
    assert_eq!(answered.answers[0].selected, [HOLD], "{name}");
    assert!(
        answered.resolved_by.starts_with(&format!("{name}:")),
        "{name}: resolved by the channel's person, not {:?}",
        answered.resolved_by
    );
    let outcome = fake.outcome(&message).await;
    assert!(
        outcome.contains(HOLD),
        "{name}: the outcome shows the answer: {outcome}"
    );

    // Again, the other option and the same one: too late, and nothing changes.
    for option in [SHIP, HOLD] {
        let said = fake.answer(node, &message, option).await;
        assert_ne!(
            said,
            Some(true),
            "{name}: a second answer ({option}) is not taken"
        );
    }
    let late = rig
        .client
        .clone()
        .answer("ops/once", &rpc, vec![answer::select("q", [SHIP])])
        .await
        .expect_err("resolved already");
    assert_eq!(late.reason(), Reason::NotPending, "{name}");
    assert_eq!(
        late.metadata("resolved_by"),
        Some(answered.resolved_by.as_str()),
        "{name}"
    );
    assert_eq!(
        fake.taken(&message),
        (1, 1),
        "{name}: the ask and its outcome, once each"
    );
}

pub(crate) async fn the_first_answer_wins_against_the_console<C: Conformant>() {
    let rig = Rig::<C>::start().await;
    let (fake, node, name) = (&rig.fake, rig.server.addr, C::NAME);
    let mut console = rig.client.clone();

    // The console first: the channel's answer after it is too late.
    let mut call = in_background(&console, deploy("ops/console-first"));
    let message = asked(fake, "ops/console-first", &mut call).await;
    let rpc = pending_rpc(&console, "ops/console-first").await;
    console
        .answer("ops/console-first", &rpc, vec![answer::select("q", [SHIP])])
        .await
        .expect("the console answers");
    let answered = ended(call).await.expect("answered");
    assert_eq!(answered.answers[0].selected, [SHIP], "{name}");
    assert!(
        !answered.resolved_by.starts_with(&format!("{name}:")),
        "{name}"
    );
    let outcome = fake.outcome(&message).await;
    assert!(
        outcome.contains(SHIP),
        "{name}: the outcome shows the answer: {outcome}"
    );
    let said = fake.answer(node, &message, HOLD).await;
    assert_ne!(
        said,
        Some(true),
        "{name}: an answer after the console's is not taken"
    );
    assert_eq!(fake.taken(&message), (1, 1), "{name}");

    // The channel first: the console (following the session, so the node remembers
    // how its asks ended) is told who won.
    let _following = following(&console, "ops/channel-first").await;
    let mut call = in_background(&console, deploy("ops/channel-first"));
    let message = asked(fake, "ops/channel-first", &mut call).await;
    let rpc = pending_rpc(&console, "ops/channel-first").await;
    let said = fake.answer(node, &message, HOLD).await;
    assert_ne!(said, Some(false), "{name}: the first answer is taken");
    let answered = ended(call).await.expect("answered");
    assert_eq!(answered.answers[0].selected, [HOLD], "{name}");
    let late = console
        .answer("ops/channel-first", &rpc, vec![answer::select("q", [SHIP])])
        .await
        .expect_err("too late");
    assert_eq!(late.reason(), Reason::NotPending, "{name}");
    assert_eq!(
        late.metadata("resolved_by"),
        Some(answered.resolved_by.as_str()),
        "{name}"
    );
    assert!(
        answered.resolved_by.starts_with(&format!("{name}:")),
        "{name}"
    );
    let outcome = fake.outcome(&message).await;
    assert!(
        outcome.contains(HOLD),
        "{name}: the outcome shows the answer: {outcome}"
    );
    assert_eq!(fake.taken(&message), (1, 1), "{name}");
}

pub(crate) async fn only_approvers_answer<C: Conformant>() {
    let rig = Rig::<C>::start().await;
    let (fake, node, name) = (&rig.fake, rig.server.addr, C::NAME);
    let mut console = rig.client.clone();
    let other = fake.other();

    // Another person's ask: refused to this one and to the console, nothing changed.
    let theirs = deploy("ops/theirs").approvers([other.as_str()]);
    let mut call = in_background(&console, theirs);
    let refusal = tokio::select! {
        refusal = fake.refused(node, "ops/theirs", SHIP) => refusal,
        ended = &mut call => panic!("{name}: the ask ended before it was refused: {ended:?}"),
    };
    if let Some(refusal) = refusal {
        assert!(
            refusal.contains("nly") && refusal.contains(&other),
            "{name}: the refusal names who may answer: {refusal}"
        );
    }
    let rpc = pending_rpc(&console, "ops/theirs").await;
    let refused = console
        .answer("ops/theirs", &rpc, vec![answer::select("q", [SHIP])])
        .await
        .expect_err("the console is no approver");
    assert_eq!(refused.reason(), Reason::NotAnApprover, "{name}");
    assert!(
        refused
            .metadata("approvers")
            .is_some_and(|a| a.contains(&other)),
        "{name}: {refused:?}"
    );
    // Still pending: cancelling stays open to whoever may answer the session.
    console
        .cancel("ops/theirs", &rpc, "not mine to answer")
        .await
        .expect("anyone may cancel");
    let cancelled = ended(call).await.expect_err("cancelled");
    assert_eq!(cancelled.reason(), Reason::AskCancelled, "{name}");

    // The person's own ask: answered by them.
    let Some(person) = fake.person() else {
        return;
    };
    let mine = deploy("ops/mine").approvers([other.as_str(), person.as_str()]);
    let mut call = in_background(&console, mine);
    let message = asked(fake, "ops/mine", &mut call).await;
    let said = fake.answer(node, &message, HOLD).await;
    assert_ne!(said, Some(false), "{name}: an approver's answer is taken");
    let answered = ended(call).await.expect("answered");
    assert_eq!(answered.answers[0].selected, [HOLD], "{name}");
    assert!(
        askgate_server::domain::approval::same_person(&answered.resolved_by, &person),
        "{name}: answered by {person}, not {}",
        answered.resolved_by
    );
    assert!(fake.outcome(&message).await.contains(HOLD), "{name}");
}

/// Text with what HTML, mrkdwn, Telegram, mail headers or a push could read as markup
/// or as a header of their own: tags, entities, mentions, links, emoji, line breaks.
const MARKUP: &str = "<b>bold</b> & <a href=\"x\">link</a> &amp; \"quoted\" =?utf-8?q?x?= \
     \r\nBcc: eve@example.com <!channel> <@U0123> <https://evil.example|click> *b* _i_ ~s~ \
     `c` :tada: @all 🚀𝄞 <pre>";

/// `text` repeated (whole characters) up to exactly `bytes` bytes, or as near as
/// characters allow.
fn fill(text: &str, bytes: usize) -> String {
    let mut filled = String::with_capacity(bytes);
    for c in text.chars().cycle() {
        if filled.len() + c.len_utf8() > bytes {
            break;
        }
        filled.push(c);
    }
    filled
}

/// Every shape of ask the default limits take, at their edges: 32 questions, 32
/// options, 256-byte labels and headers, 4 KiB texts, a 64 KiB detail, 32 labels.
fn shapes() -> Vec<(String, Ask)> {
    let limits = askgate_server::domain::Limits::default();
    let text = fill(MARKUP, limits.max_text_bytes);
    let options = |q: QuestionBuilder, count: usize, described: bool| {
        (0..count).fold(q, |q, i| {
            let label = fill(&format!("{i} {MARKUP}"), limits.max_label_bytes);
            match described {
                true => q.option(&label, &text),
                false => q.choice(&label),
            }
        })
    };
    let mut shapes = Vec::new();
    for count in [2, 3, 4, 10, 11, 20, 21, limits.max_options] {
        for multi in [false, true] {
            let q = options(question("q", &text), count, true);
            let q = if multi { q.multi_select() } else { q };
            let name = format!("{count} options{}", if multi { ", several" } else { "" });
            shapes.push((name, Ask::new("ops/shape").question(q)));
        }
    }
    shapes.push((
        "a free text with the longest detail and header".into(),
        Ask::new("ops/shape").question(
            question("q", &text)
                .header(&fill(MARKUP, limits.max_label_bytes))
                .detail(&fill(MARKUP, limits.max_detail_bytes)),
        ),
    ));
    let arguments = serde_json::json!({ "notes": text, "markup": MARKUP }).to_string();
    shapes.push((
        "a plan review approving an action, with default answers".into(),
        Ask::new("ops/shape")
            .question(
                question("plan", "Ship this release plan?")
                    .header("Release plan")
                    .detail(&fill(&format!("{MARKUP}\n"), limits.max_detail_bytes))
                    .option("Approve \r\n now", MARKUP)
                    .option("Revise", MARKUP)
                    .plan_review("Approve \r\n now"),
            )
            .action("deploy <prod>", &arguments)
            .default_answers(vec![answer::select("plan", ["Revise"])]),
    ));
    let batch = (0..limits.max_questions).fold(Ask::new("ops/shape"), |ask, i| {
        let q = question(&format!("q{i}"), &text);
        ask.question(match i % 4 {
            0 => options(q, limits.max_options, false),
            1 => options(q, 3, true).multi_select(),
            2 => q.detail(&fill(MARKUP, 2048)),
            _ => options(q, 2, false),
        })
    });
    shapes.push(("a batch of the most questions".into(), batch));
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
    let labelled = (0..limits.max_labels).fold(deploy("ops/shape"), |ask, i| {
        ask.label(&format!("k{i}"), &fill(MARKUP, 200))
    });
    shapes.push(("the most labels".into(), labelled));
    shapes.push((
        "only the console and the terminal may answer".into(),
        deploy("ops/shape").allowed_channels(["console", TERMINAL]),
    ));
    shapes
}

pub(crate) async fn every_ask_shape_within_the_limits<C: Conformant>() {
    let rig = Rig::<C>::start().await;
    let (fake, name) = (&rig.fake, C::NAME);
    // A person at the terminal overlay answers or cancels (an ask only the console and
    // the terminal may answer is a shape too).
    let mut console = rig
        .client
        .clone()
        .with_channel(TERMINAL)
        .expect("a channel");
    for (n, (shape, mut ask)) in shapes().into_iter().enumerate() {
        let session = format!("ops/shape-{n:02}");
        ask.request_mut().session_id = session.clone();
        let questions = ask.request_mut().questions.clone();
        let mut call = in_background(&console, ask);
        let message = asked(fake, &session, &mut call).await;
        let rpc = pending_rpc(&console, &session).await;
        // Half answered from the console (its first option, or the longest text), half
        // cancelled with the longest reason.
        match n % 2 {
            0 => {
                let answers = questions
                    .iter()
                    .map(|q| match q.options.first() {
                        Some(option) => answer::select(&q.id, [option.label.as_str()]),
                        None => answer::custom(&q.id, &fill(MARKUP, 16 * 1024)),
                    })
                    .collect();
                console
                    .answer(&session, &rpc, answers)
                    .await
                    .unwrap_or_else(|e| panic!("{name}, {shape}: answering: {e:?}"));
                ended(call)
                    .await
                    .unwrap_or_else(|e| panic!("{name}, {shape}: {e:?}"));
            }
            _ => {
                console
                    .cancel(&session, &rpc, &fill(MARKUP, MAX_CANCEL_REASON_BYTES))
                    .await
                    .unwrap_or_else(|e| panic!("{name}, {shape}: cancelling: {e:?}"));
                let cancelled = ended(call).await.expect_err("cancelled");
                assert_eq!(cancelled.reason(), Reason::AskCancelled, "{name}, {shape}");
            }
        }
        fake.outcome(&message).await;
        assert_eq!(fake.taken(&message), (1, 1), "{name}, {shape}");
    }
}

pub(crate) async fn a_killed_node_loses_nothing_and_sends_nothing_twice<C: Conformant>() {
    let name = C::NAME;
    let (redis, dir) = (askgate_testing::RedisServer::start().await, TempDir::new());
    let mut fake = C::start(1).await;
    let mut flags = fake.flags(&dir);
    flags.extend(
        [
            "--webhook-retry-initial",
            "200ms",
            "--webhook-retry-max",
            "1s",
            "--redis-lease",
            "2s",
        ]
        .map(str::to_owned),
    );
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let nodes = |count| ServeProcess::redis_nodes(&redis.url, false, count, &flags);
    let first = nodes(1).await.remove(0);
    fake.connect(&mut first.client().await, first.addr()).await;
    let call = in_background(
        &first.client().await,
        deploy("ops/kill").reattach_grace(Duration::from_secs(60)),
    );
    fake.holding().await;
    let survivors = nodes(2).await;
    first.signal("KILL");
    drop(call);

    // A survivor sends it once the held attempt's lease is over; an answer through the
    // other survivor resolves it.
    let message = fake.asked("ops/kill").await;
    let said = fake.answer(survivors[1].addr(), &message, SHIP).await;
    assert_ne!(said, Some(false), "{name}");
    let outcome = fake.outcome(&message).await;
    assert!(outcome.contains(SHIP), "{name}: {outcome}");
    let pending = survivors[0].client().await.list_pending("ops/kill").await;
    assert!(
        pending.expect("pending").is_empty(),
        "{name}: nothing left pending"
    );

    // Asks through both survivors, each answered through the channel at the other.
    let mut calls = Vec::new();
    for i in 0..6 {
        let client = survivors[i % 2].client().await;
        calls.push(in_background(&client, deploy(&format!("ops/many-{i}"))));
    }
    let mut messages = vec![message];
    for (i, call) in calls.iter_mut().enumerate() {
        let message = asked(&fake, &format!("ops/many-{i}"), call).await;
        let said = fake
            .answer(survivors[(i + 1) % 2].addr(), &message, SHIP)
            .await;
        assert_ne!(said, Some(false), "{name}, ops/many-{i}");
        fake.outcome(&message).await;
        messages.push(message);
    }
    for call in calls {
        let answered = ended(call).await.expect("answered");
        assert_eq!(answered.answers[0].selected, [SHIP], "{name}");
    }
    for message in &messages {
        assert_eq!(
            fake.taken(message),
            (1, 1),
            "{name}: sent once each: {message:?}"
        );
    }
}
