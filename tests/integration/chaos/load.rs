//! The load of the chaos tests, and what they count: agents ask with request_ids
//! (retrying the same request_id whenever a call fails, as a worker's tool call
//! would), one human per node answers every ask it sees (each human its own answer,
//! so a second resolution shows), and each side notes what the server acknowledged.
//! The check afterwards asks again by every acknowledged request_id: a recorded
//! outcome comes back at once, unchanged; a lost one would leave the retry waiting.
//! A webhook endpoint takes every `ask.resolved`: each kept answer's event must reach
//! it, once.

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use askgate_client::{Client, Event};
use askgate_proto::v1::QuestionAnswer;
use parking_lot::Mutex;
use tokio_stream::StreamExt;

use crate::{durability::ask, support::within, webhooks::Receiver};

/// Agents asking at once, each in a session of its own.
pub const AGENTS: usize = 6;

/// (session, request_id)
type Key = (String, String);

/// What the server acknowledged, and what the agents got.
#[derive(Default)]
pub struct Ledger {
    /// Answers a human was told were taken, and the rpc_id of their ask.
    pub answered: Mutex<HashMap<Key, String>>,
    pub rpc_ids: Mutex<HashMap<Key, String>>,
    /// Asks whose answer was acknowledged twice (to either human).
    pub twice: Mutex<Vec<Key>>,
    /// What each agent's Ask returned.
    pub got: Mutex<HashMap<Key, String>>,
    stop: AtomicBool,
}

/// What a run lost, counted by [`Load::check`].
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub acknowledged: usize,
    /// Acknowledged answers a retry by request_id did not get back.
    pub lost: usize,
    /// Asks resolved twice.
    pub twice: usize,
    /// Asks whose agent got another answer than the acknowledged one.
    pub different: usize,
    /// Acknowledged answers (kept) whose `ask.resolved` never reached the webhook.
    pub deliveries_lost: usize,
    /// Asks whose `ask.resolved` reached the webhook as more than one delivery.
    pub deliveries_doubled: usize,
}

impl Report {
    pub fn is_clean(&self) -> bool {
        self.lost == 0
            && self.twice == 0
            && self.different == 0
            && self.deliveries_lost == 0
            && self.deliveries_doubled == 0
    }
}

/// Agents and humans at work on some nodes, until [`Load::stop`].
pub struct Load {
    pub ledger: Arc<Ledger>,
    agents: Vec<tokio::task::JoinHandle<()>>,
    humans: Vec<tokio::task::JoinHandle<()>>,
}

fn session(agent: usize) -> String {
    format!("chaos-{agent}")
}

/// What human `index` answers: its own label.
fn label(index: usize) -> &'static str {
    ["yes", "no"][index % 2]
}

/// A webhook receiver taking every `ask.resolved` of the tenant, registered through
/// the node at `url` (started with `--webhook-allow-private`).
pub async fn webhook(url: &str) -> Receiver {
    let receiver = Receiver::start().await;
    let mut admin = Client::connect(url.to_owned()).await.expect("connect");
    let created = admin
        .create_endpoint(askgate_proto::v1::CreateEndpointRequest {
            url: receiver.url("/chaos"),
            events: vec!["ask.resolved".into()],
            ..Default::default()
        })
        .await
        .expect("create the endpoint");
    receiver.configure("/chaos", &created.secret, &[]).await;
    receiver
}

impl Load {
    /// Agent `i` asks through `urls[i % len]`; human `j` answers through `urls[j]`.
    pub fn start(urls: &[String]) -> Self {
        let ledger = Arc::new(Ledger::default());
        let agents = (0..AGENTS)
            .map(|i| tokio::spawn(agent(urls[i % urls.len()].clone(), i, ledger.clone())))
            .collect();
        let humans = urls
            .iter()
            .enumerate()
            .map(|(j, url)| tokio::spawn(human(url.clone(), label(j), ledger.clone())))
            .collect();
        Self {
            ledger,
            agents,
            humans,
        }
    }

    /// Answers acknowledged so far.
    pub fn answered(&self) -> usize {
        self.ledger.answered.lock().len()
    }

    /// Answers acknowledged so far in `session` (agent `i` asks in `chaos-<i>`).
    pub fn answered_in(&self, session: &str) -> usize {
        let answered = self.ledger.answered.lock();
        answered.keys().filter(|(s, _)| s == session).count()
    }

    /// Waits until `more` answers beyond `from` were acknowledged.
    pub async fn flowing(&self, what: &str, from: usize, more: usize) {
        self.until(what, || self.answered() >= from + more).await;
    }

    /// Waits until `more` answers beyond `from` were acknowledged in `session`.
    pub async fn flowing_in(&self, what: &str, session: &str, from: usize, more: usize) {
        self.until(what, || self.answered_in(session) >= from + more)
            .await;
    }

    async fn until(&self, what: &str, done: impl Fn() -> bool) {
        crate::support::eventually(what, || {
            let done = done();
            async move { done.then_some(()) }
        })
        .await;
    }

    /// Lets every agent finish its ask (the humans keep answering), then stops.
    pub async fn stop(self) -> Arc<Ledger> {
        self.ledger.stop.store(true, Ordering::SeqCst);
        for agent in self.agents {
            within("an agent to finish its last ask", agent)
                .await
                .expect("agent task");
        }
        for human in self.humans {
            human.abort();
        }
        self.ledger
    }
}

/// Asks one question after another until told to stop, each until it is answered.
async fn agent(url: String, index: usize, ledger: Arc<Ledger>) {
    let Ok(mut client) = Client::connect_lazy(url) else {
        return;
    };
    let session = session(index);
    for n in 0.. {
        if ledger.stop.load(Ordering::SeqCst) {
            return;
        }
        let request_id = format!("ask-{n}");
        loop {
            match client
                .ask(ask(&session, &request_id, Duration::from_secs(60)))
                .await
            {
                Ok(response) => {
                    let got = response.answers[0].selected.join(",");
                    ledger
                        .got
                        .lock()
                        .insert((session.clone(), request_id.clone()), got);
                    break;
                }
                Err(_) if ledger.stop.load(Ordering::SeqCst) => return,
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }
}

/// Answers every ask it sees with `label`, retrying a failed answer while the ask may
/// still be pending; notes each answer the server acknowledged.
async fn human(url: String, label: &'static str, ledger: Arc<Ledger>) {
    let Ok(mut client) = Client::connect_lazy(url) else {
        return;
    };
    loop {
        let Ok(mut events) = client.subscribe_all().await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        while let Some(Ok(event)) = events.next().await {
            let Event::Requested { requested, .. } = event else {
                continue;
            };
            let Some(request_id) = requested.labels.get("request") else {
                continue;
            };
            let key = (requested.session_id.clone(), request_id.clone());
            let answers = vec![QuestionAnswer {
                id: "deploy".into(),
                selected: vec![label.into()],
                custom: None,
            }];
            for _attempt in 0..50 {
                let answered = client
                    .answer(&requested.session_id, &requested.rpc_id, answers.clone())
                    .await;
                match answered {
                    Ok(_) => {
                        ledger
                            .rpc_ids
                            .lock()
                            .insert(key.clone(), requested.rpc_id.clone());
                        let previous = ledger.answered.lock().insert(key.clone(), label.into());
                        if previous.is_some() {
                            ledger.twice.lock().push(key.clone());
                        }
                        break;
                    }
                    Err(e) if e.reason() == askgate_client::Reason::BackendUnavailable => {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    Err(_) => break,
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Counts what the run lost, asking through `client` (all at once: a lost answer
/// costs its retry a timeout), and what the webhook `receiver` got.
pub async fn check(client: &Client, ledger: &Ledger, receiver: &Receiver) -> Report {
    let answered = ledger.answered.lock().clone();
    let got = ledger.got.lock().clone();
    let mut report = Report {
        acknowledged: answered.len(),
        twice: ledger.twice.lock().len(),
        ..Report::default()
    };
    let mut retries = tokio::task::JoinSet::new();
    for (key, label) in answered {
        if got.get(&key).is_some_and(|g| *g != label) {
            report.different += 1;
        }
        let mut client = client.clone();
        retries.spawn(async move {
            let (session, request_id) = key;
            // Retried while the node says "retry", as a client would.
            for _ in 0..50 {
                let retry = ask(&session, &request_id, Duration::from_secs(3));
                match client.ask(retry).await {
                    Ok(response) if response.answers[0].selected == [label.clone()] => {
                        return Ok((session, request_id));
                    }
                    Ok(_) => return Err(true),
                    Err(e) if e.reason() == askgate_client::Reason::BackendUnavailable => {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    Err(_) => return Err(false),
                }
            }
            Err(false)
        });
    }
    let mut kept = Vec::new();
    while let Some(retried) = retries.join_next().await {
        match retried.expect("a retry") {
            Ok(key) => kept.push(key),
            Err(true) => report.different += 1,
            Err(false) => report.lost += 1,
        }
    }
    let rpc_ids = ledger.rpc_ids.lock().clone();
    let kept: Vec<String> = kept
        .iter()
        .filter_map(|k| rpc_ids.get(k).cloned())
        .collect();
    let (lost, doubled) = deliveries(receiver, &kept).await;
    report.deliveries_lost = lost;
    report.deliveries_doubled = doubled;
    report
}

/// Of the asks `rpc_ids`, those whose `ask.resolved` the receiver never got (waiting
/// up to 20 s for the last), and those it got as more than one delivery.
async fn deliveries(receiver: &Receiver, rpc_ids: &[String]) -> (usize, usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let mut by_ask: HashMap<String, std::collections::HashSet<String>> = HashMap::new();
        for r in receiver.received().await {
            if r.verified && r.event_type() == "ask.resolved" {
                by_ask
                    .entry(r.rpc_id().to_owned())
                    .or_default()
                    .insert(r.id.clone());
            }
        }
        let lost = rpc_ids
            .iter()
            .filter(|id| !by_ask.contains_key(*id))
            .count();
        let doubled = rpc_ids
            .iter()
            .filter(|id| by_ask.get(*id).is_some_and(|d| d.len() > 1))
            .count();
        if lost == 0 || std::time::Instant::now() > deadline {
            return (lost, doubled);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
