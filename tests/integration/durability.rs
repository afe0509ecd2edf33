//! The sqlite engine under kill -9: agents ask with request_ids, a human answers, an
//! operator adds webhook endpoints, and the node is killed at a random moment, again
//! and again. After each restart every answer the server acknowledged is there (a
//! retried Ask by request_id gets it, the same answer, never a second one) and every
//! endpoint it acknowledged is listed.

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use askgate_client::{Ask, Client, Event, question};
use askgate_proto::v1::{CreateEndpointRequest, QuestionAnswer};
use parking_lot::Mutex;
use tokio_stream::StreamExt;

use crate::support::{ServeProcess, TempDir, eventually, within};

/// Agents asking at once, each in a session of its own.
const AGENTS: usize = 6;
/// Kills, each at a random moment of a round of load.
const ROUNDS: usize = 4;

/// What the server acknowledged: answers by (session, request_id), endpoints by id.
#[derive(Default)]
struct Acknowledged {
    answers: Mutex<HashMap<(String, String), String>>,
    /// Endpoints by id: whether the last acknowledged change added or removed it.
    endpoints: Mutex<HashMap<String, bool>>,
    /// Asks the server let the human answer a second time.
    twice: Mutex<Vec<(String, String)>>,
}

/// A small PRNG (xorshift), seeded from the clock and printed, so a failing run can
/// be repeated with ASKGATE_CRASH_SEED.
struct Rng(u64);

impl Rng {
    fn seeded() -> Self {
        let seed = std::env::var("ASKGATE_CRASH_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
            });
        eprintln!("crash test seed: ASKGATE_CRASH_SEED={seed}");
        Self(seed | 1)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound
    }
}

async fn start(data: &str) -> ServeProcess {
    ServeProcess::start_with(&[
        "--backend",
        "sqlite",
        "--data-dir",
        data,
        "--ask-rate",
        "1000000",
        "--ask-burst",
        "1000000",
        "--webhook-allow-private",
    ])
    .await
}

fn session(agent: usize) -> String {
    format!("crash-{agent}")
}

/// An ask that waits at most `timeout` for its answer.
fn ask(session: &str, request_id: &str, timeout: Duration) -> Ask {
    Ask::new(session)
        .question(question("deploy", "Deploy?").choice("yes").choice("no"))
        .request_id(request_id)
        // What the human needs to note the answer under the request_id.
        .label("request", request_id)
        .reattach_grace(Duration::from_secs(600))
        .hold_unattended()
        .no_retry()
        .timeout(timeout)
}

/// Asks one question after another until the node dies.
async fn agent(url: String, index: usize, round: usize, stop: Arc<AtomicBool>) {
    let Ok(mut client) = Client::connect_lazy(url) else {
        return;
    };
    let session = session(index);
    for n in 0.. {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let request_id = format!("round-{round}-ask-{n}");
        let asked = ask(&session, &request_id, Duration::from_secs(120));
        if client.ask(asked).await.is_err() {
            return;
        }
    }
}

/// Answers every ask it sees, "yes" or "no" by the rpc_id, and notes each answer the
/// server acknowledged with the ask's request_id.
async fn human(url: String, acknowledged: Arc<Acknowledged>) {
    let Ok(mut client) = Client::connect(url).await else {
        return;
    };
    let Ok(mut events) = client.subscribe_all().await else {
        return;
    };
    let mut answering = client.clone();
    while let Some(Ok(event)) = events.next().await {
        let Event::Requested { requested, .. } = event else {
            continue;
        };
        let Some(request_id) = requested.labels.get("request") else {
            continue;
        };
        let label = match requested.rpc_id.bytes().last().unwrap_or(0) % 2 {
            0 => "yes",
            _ => "no",
        };
        let answers = vec![QuestionAnswer {
            id: "deploy".into(),
            selected: vec![label.into()],
            custom: None,
        }];
        if answering
            .answer(&requested.session_id, &requested.rpc_id, answers)
            .await
            .is_ok()
        {
            let key = (requested.session_id.clone(), request_id.clone());
            if acknowledged
                .answers
                .lock()
                .insert(key.clone(), label.to_owned())
                .is_some()
            {
                acknowledged.twice.lock().push(key);
            }
        }
    }
}

/// Adds an endpoint and removes the one before it, again and again, until the node
/// dies.
async fn operator(url: String, round: usize, acknowledged: Arc<Acknowledged>) {
    let Ok(mut client) = Client::connect(url).await else {
        return;
    };
    let mut previous: Option<String> = None;
    for n in 0.. {
        let created = client
            .create_endpoint(CreateEndpointRequest {
                url: format!("http://127.0.0.1:9/round-{round}/{n}"),
                events: vec!["ask.resolved".into()],
                ..Default::default()
            })
            .await;
        let Ok(endpoint) = created else {
            return;
        };
        acknowledged
            .endpoints
            .lock()
            .insert(endpoint.id.clone(), true);
        if let Some(old) = previous.replace(endpoint.id) {
            if client.delete_endpoint(&old).await.is_err() {
                return;
            }
            acknowledged.endpoints.lock().insert(old, false);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Every acknowledged answer comes back to a retry by its request_id, unchanged; every
/// acknowledged endpoint is listed.
async fn check(node: &ServeProcess, acknowledged: &Acknowledged) {
    let twice = acknowledged.twice.lock().clone();
    assert!(twice.is_empty(), "asks answered twice: {twice:?}");
    let mut client = node.client().await;
    let answers = acknowledged.answers.lock().clone();
    for ((session, request_id), label) in &answers {
        // A recorded outcome comes back at once; a lost one would leave the retry
        // waiting for a human.
        let retry = ask(session, request_id, Duration::from_secs(5));
        let response = client
            .ask(retry)
            .await
            .unwrap_or_else(|e| panic!("{session}/{request_id} lost its answer: {e}"));
        let selected = &response.answers[0].selected;
        assert_eq!(
            selected,
            &vec![label.clone()],
            "{session}/{request_id}: the acknowledged answer, not another one"
        );
    }
    let listed: Vec<String> = client
        .list_endpoints()
        .await
        .expect("list endpoints")
        .into_iter()
        .map(|e| e.id)
        .collect();
    let endpoints = acknowledged.endpoints.lock().clone();
    for (id, present) in &endpoints {
        match present {
            true => assert!(
                listed.contains(id),
                "endpoint {id} was acknowledged and is gone"
            ),
            false => assert!(
                !listed.contains(id),
                "endpoint {id} was removed and is back"
            ),
        }
    }
    eprintln!(
        "after a kill -9: {} acknowledged answers and {} endpoint changes, none lost",
        answers.len(),
        endpoints.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_under_load_loses_no_acknowledged_answer_or_endpoint() {
    let dir = TempDir::new();
    let data = dir.0.join("data");
    let data = data.to_str().expect("a UTF-8 path");
    let acknowledged = Arc::new(Acknowledged::default());
    let mut rng = Rng::seeded();
    for round in 0..ROUNDS {
        let node = start(data).await;
        check(&node, &acknowledged).await;
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        tasks.push(tokio::spawn(human(node.url.clone(), acknowledged.clone())));
        tasks.push(tokio::spawn(operator(
            node.url.clone(),
            round,
            acknowledged.clone(),
        )));
        for index in 0..AGENTS {
            tasks.push(tokio::spawn(agent(
                node.url.clone(),
                index,
                round,
                stop.clone(),
            )));
        }
        let answered_before = acknowledged.answers.lock().len();
        eventually("some asks answered in this round", || {
            let answered = acknowledged.answers.lock().len();
            async move { (answered > answered_before).then_some(()) }
        })
        .await;
        tokio::time::sleep(Duration::from_millis(50 + rng.below(700))).await;
        node.signal("KILL");
        stop.store(true, Ordering::SeqCst);
        for task in tasks {
            within("a client to notice the kill", task)
                .await
                .expect("client task");
        }
        drop(node);
    }
    let node = start(data).await;
    check(&node, &acknowledged).await;
}
