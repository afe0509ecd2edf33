//! The sqlite engine under kill -9: agents ask with request_ids, a human answers or
//! cancels, an operator adds and removes webhook endpoints, an auditor notes the asks
//! it knows are on disk, and the node is killed at a random moment, again and again.
//! After each restart every answer the server acknowledged is there (a retried Ask by
//! request_id gets it, the same answer, never a second one), every endpoint change it
//! acknowledged holds, every ask known to be on disk is pending or resolved, and the
//! audit log's chain verifies with a record of every acknowledged resolution.

use std::{
    collections::{HashMap, HashSet},
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

use crate::support::{ServeProcess, TempDir, askgate, eventually, finish, within};

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
    /// The rpc_ids of the asks whose resolution was acknowledged: each must have its
    /// record in the audit log.
    resolved: Mutex<HashSet<String>>,
    /// Asks listed pending before an acknowledged write: on disk, since the store
    /// keeps changes in order. By rpc_id: (session, request_id).
    pending: Mutex<HashMap<String, (String, String)>>,
}

/// What the human's record holds for an ask it cancelled.
const CANCELLED: &str = "(cancelled)";

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

/// An ask that waits at most `timeout` for its answer, labelled with its request_id
/// (the chaos tests ask the same way).
pub(crate) fn ask(session: &str, request_id: &str, timeout: Duration) -> Ask {
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

/// Answers every ask it sees but the first agent's, "yes" or "no", or cancels it, by
/// the rpc_id, and notes each resolution the server acknowledged with the ask's
/// request_id.
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
        // The first agent's asks stay pending, across every kill.
        if requested.session_id == session(0) {
            continue;
        }
        let label = match requested.rpc_id.bytes().last().unwrap_or(0) % 3 {
            0 => "yes",
            1 => "no",
            _ => CANCELLED,
        };
        let (session, rpc_id) = (&requested.session_id, &requested.rpc_id);
        let resolved = match label {
            CANCELLED => answering.cancel(session, rpc_id, "not now").await,
            _ => {
                let answers = vec![QuestionAnswer {
                    id: "deploy".into(),
                    selected: vec![label.into()],
                    custom: None,
                }];
                answering.answer(session, rpc_id, answers).await
            }
        };
        if resolved.is_ok() {
            acknowledged
                .resolved
                .lock()
                .insert(requested.rpc_id.clone());
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
            // Sent, it may be gone or not until the server says.
            acknowledged.endpoints.lock().remove(&old);
            if client.delete_endpoint(&old).await.is_err() {
                return;
            }
            acknowledged.endpoints.lock().insert(old, false);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Lists the agents' pending asks, then makes an acknowledged write (an abort by a
/// request id nobody asked with): once it is acknowledged, the asks listed before it
/// are on disk. Until the node dies.
async fn auditor(url: String, acknowledged: Arc<Acknowledged>) {
    let Ok(mut client) = Client::connect(url).await else {
        return;
    };
    for n in 0.. {
        let mut listed = Vec::new();
        for index in 0..AGENTS {
            let Ok(pending) = client.list_pending(&session(index)).await else {
                return;
            };
            listed.extend(pending);
        }
        if client
            .abort("barrier", &format!("barrier-{n}"))
            .await
            .is_err()
        {
            return;
        }
        for requested in listed {
            let request_id = requested.labels.get("request").cloned().unwrap_or_default();
            let noted = (requested.session_id, request_id);
            acknowledged.pending.lock().insert(requested.rpc_id, noted);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every ask known to be on disk is still pending, or resolved with a recorded outcome.
async fn check_pending(client: &mut Client, acknowledged: &Acknowledged) {
    let known = acknowledged.pending.lock().clone();
    let mut listed = std::collections::HashSet::new();
    for index in 0..AGENTS {
        let pending = client.list_pending(&session(index)).await.expect("pending");
        listed.extend(pending.into_iter().map(|r| r.rpc_id));
    }
    for (rpc_id, (session, request_id)) in &known {
        if listed.contains(rpc_id) {
            continue;
        }
        let retry = ask(session, request_id, Duration::from_secs(5));
        match client.ask(retry).await {
            Ok(response) => assert_eq!(&response.rpc_id, rpc_id, "{session}/{request_id}"),
            Err(e) => assert_eq!(
                e.reason(),
                askgate_client::Reason::AskCancelled,
                "the pending ask {rpc_id} ({session}/{request_id}) was lost: {e}"
            ),
        }
    }
    eprintln!(
        "after a kill -9: {} asks that were on disk, {} of them still pending, none lost",
        known.len(),
        known.keys().filter(|id| listed.contains(*id)).count()
    );
}

/// Every acknowledged answer comes back to a retry by its request_id, unchanged; every
/// acknowledged endpoint is listed; every ask known to be on disk is there.
async fn check(node: &ServeProcess, acknowledged: &Acknowledged) {
    let twice = acknowledged.twice.lock().clone();
    assert!(twice.is_empty(), "asks answered twice: {twice:?}");
    let mut client = node.client().await;
    check_pending(&mut client, acknowledged).await;
    let answers = acknowledged.answers.lock().clone();
    for ((session, request_id), label) in &answers {
        // A recorded outcome comes back at once; a lost one would leave the retry
        // waiting for a human.
        let retry = ask(session, request_id, Duration::from_secs(5));
        let response = client.ask(retry).await;
        if label == CANCELLED {
            let error = response.expect_err("a cancelled ask stays cancelled");
            assert_eq!(
                error.reason(),
                askgate_client::Reason::AskCancelled,
                "{session}/{request_id} lost its cancel: {error}"
            );
            continue;
        }
        let response =
            response.unwrap_or_else(|e| panic!("{session}/{request_id} lost its answer: {e}"));
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
    let recorded = check_audit(&mut client, acknowledged).await;
    eprintln!(
        "after a kill -9: {} acknowledged answers and {} endpoint changes, none lost; \
         the audit chain verifies, with {recorded} records",
        answers.len(),
        endpoints.len()
    );
}

/// The audit log's chain verifies and holds a record of every acknowledged
/// resolution; how many records it holds.
async fn check_audit(client: &mut Client, acknowledged: &Acknowledged) -> usize {
    let records = crate::audit::export(client).await;
    if let Err(broken) = askgate_server::backend::audit::verify(&records) {
        panic!("the audit chain breaks after a kill -9: {broken:?}");
    }
    let in_log: HashSet<String> = records
        .iter()
        .filter_map(|r| serde_json::from_str::<serde_json::Value>(&r.body_json).ok())
        .filter(|body| body["kind"] == "ask.resolved")
        .filter_map(|body| body["rpc_id"].as_str().map(str::to_owned))
        .collect();
    let resolved = acknowledged.resolved.lock().clone();
    let missing: Vec<&String> = resolved.difference(&in_log).collect();
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged resolutions have no audit record: {missing:?}",
        missing.len(),
        resolved.len()
    );
    records.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_under_load_loses_no_acknowledged_answer_or_endpoint() {
    let dir = TempDir::new();
    let data = dir.0.join("data");
    let data = data.to_str().expect("a UTF-8 path");
    let acknowledged = Arc::new(Acknowledged::default());
    let mut rng = Rng::seeded();
    for round in 0..ROUNDS {
        let mut node = start(data).await;
        check(&node, &acknowledged).await;
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        tasks.push(tokio::spawn(human(node.url.clone(), acknowledged.clone())));
        tasks.push(tokio::spawn(auditor(
            node.url.clone(),
            acknowledged.clone(),
        )));
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
        // Its data directory is free once it is gone.
        node.exit_code().await;
        for task in tasks {
            within("a client to notice the kill", task)
                .await
                .expect("client task");
        }
    }
    let node = start(data).await;
    check(&node, &acknowledged).await;
}

/// What `askgate serve --backend sqlite --data-dir DIR` says when it cannot start.
async fn refused(data: &str) -> (i32, String) {
    let serve = askgate(&["serve", "--backend", "sqlite", "--data-dir", data]);
    let (code, _, stderr) = finish(serve).await;
    (code, stderr)
}

/// docs/operations.md: one process per data directory; a directory that cannot be
/// used, a store from a newer askgate or a corrupt one is a clear error, never a panic.
#[tokio::test]
async fn bad_data_directories_are_clear_errors() {
    let dir = TempDir::new();
    let data = dir.0.join("data");
    let data = data.to_str().expect("a UTF-8 path");
    let first = start(data).await;
    let (code, stderr) = refused(data).await;
    assert_ne!(code, 0, "{stderr}");
    assert!(
        stderr.contains("in use by another askgate process") && stderr.contains(data),
        "the refusal names the directory: {stderr}"
    );
    let mut client = first.client().await;
    client
        .list_pending("still-serving")
        .await
        .expect("the first keeps serving");
    drop(first);

    let file = dir.file("a-file", "not a directory");
    let file = file.to_str().expect("a UTF-8 path");
    let (code, stderr) = refused(file).await;
    assert_ne!(code, 0, "{stderr}");
    assert!(
        stderr.contains("is not a directory") && stderr.contains(file),
        "{stderr}"
    );

    let under_a_file = format!("{file}/data");
    let (code, stderr) = refused(&under_a_file).await;
    assert_ne!(code, 0, "{stderr}");
    assert!(stderr.contains("cannot use the data directory"), "{stderr}");

    let newer = dir.0.join("newer");
    std::fs::create_dir(&newer).expect("mkdir");
    let conn = rusqlite::Connection::open(newer.join("askgate.db")).expect("a store");
    conn.pragma_update(None, "user_version", 999)
        .expect("a newer schema");
    drop(conn);
    let (code, stderr) = refused(newer.to_str().expect("UTF-8")).await;
    assert_ne!(code, 0, "{stderr}");
    assert!(
        stderr.contains("newer askgate") && stderr.contains("999"),
        "{stderr}"
    );

    let corrupt = dir.0.join("corrupt");
    std::fs::create_dir(&corrupt).expect("mkdir");
    std::fs::write(corrupt.join("askgate.db"), vec![0x5a; 8192]).expect("garbage");
    let (code, stderr) = refused(corrupt.to_str().expect("UTF-8")).await;
    assert_ne!(code, 0, "{stderr}");
    assert!(stderr.contains("not a usable store"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// `askgate backup` copies the store while the node serves; a node started on the copy
/// has the pending asks, the recorded answers and the endpoints.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_while_serving_restores() {
    let dir = TempDir::new();
    let data = dir.0.join("data");
    let data = data.to_str().expect("a UTF-8 path");
    let node = start(data).await;
    let mut client = node.client().await;
    let endpoint = client
        .create_endpoint(CreateEndpointRequest {
            url: "http://127.0.0.1:9/hook".into(),
            events: vec!["ask.resolved".into()],
            ..Default::default()
        })
        .await
        .expect("endpoint");
    let mut human = node.client().await;
    let mut events = human
        .subscribe_session("backed-up")
        .await
        .expect("subscribe");
    let mut asking = node.client().await;
    let answered = tokio::spawn(async move {
        asking
            .ask(ask("backed-up", "answered", Duration::from_secs(60)))
            .await
    });
    let rpc_id = crate::support::next_requested(&mut events).await;
    human
        .answer(
            "backed-up",
            &rpc_id,
            vec![QuestionAnswer {
                id: "deploy".into(),
                selected: vec!["yes".into()],
                custom: None,
            }],
        )
        .await
        .expect("answer");
    within("the answered ask", answered)
        .await
        .expect("join")
        .expect("answered");
    let mut asking = node.client().await;
    let _pending = tokio::spawn(async move {
        asking
            .ask(ask("backed-up", "pending", Duration::from_secs(600)))
            .await
    });
    eventually("the second ask pending", || {
        let mut client = client.clone();
        async move {
            let pending = client.list_pending("backed-up").await.ok()?;
            (pending.len() == 1).then_some(())
        }
    })
    .await;

    let copy = dir.0.join("copy.db");
    let copy = copy.to_str().expect("UTF-8");
    let (code, _, stderr) = finish(askgate(&["backup", "--data-dir", data, "--out", copy])).await;
    assert_eq!(code, 0, "{stderr}");
    let (code, _, stderr) = finish(askgate(&["backup", "--data-dir", data, "--out", copy])).await;
    assert_ne!(code, 0, "an existing copy is not overwritten: {stderr}");

    let restored = dir.0.join("restored");
    std::fs::create_dir(&restored).expect("mkdir");
    std::fs::copy(copy, restored.join("askgate.db")).expect("restore the copy");
    // The key its secrets are sealed with goes with it (docs/operations.md).
    std::fs::copy(
        std::path::Path::new(data).join("secret.key"),
        restored.join("secret.key"),
    )
    .expect("restore the key");
    let node = start(restored.to_str().expect("UTF-8")).await;
    let mut client = node.client().await;
    let pending = client.list_pending("backed-up").await.expect("pending");
    assert_eq!(
        pending.len(),
        1,
        "the pending ask is in the copy: {pending:?}"
    );
    let recorded = client
        .ask(ask("backed-up", "answered", Duration::from_secs(5)))
        .await
        .expect("the recorded answer is in the copy");
    assert_eq!(recorded.answers[0].selected, vec!["yes".to_owned()]);
    let listed = client.list_endpoints().await.expect("endpoints");
    assert!(listed.iter().any(|e| e.id == endpoint.id), "{listed:?}");
}

/// Sessions and asks per session of the torn-write test: enough answers at once that
/// the writer commits them in large groups.
const BURST_SESSIONS: usize = 20;
const BURST_ASKS: usize = 50;

/// A kill -9 in the middle of large group commits: the store is never left torn (the
/// node starts, every ask is either still pending or answered), and every answer the
/// server acknowledged is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_kill_during_large_group_commits_tears_nothing() {
    let dir = TempDir::new();
    let data = dir.0.join("data");
    let data = data.to_str().expect("a UTF-8 path");
    let mut rng = Rng::seeded();
    let mut node = start(data).await;
    let mut asks = Vec::new();
    for s in 0..BURST_SESSIONS {
        for n in 0..BURST_ASKS {
            let mut client = node.client().await;
            let (session, request_id) = (format!("burst-{s}"), format!("ask-{n}"));
            asks.push(tokio::spawn(async move {
                let _ = client
                    .ask(ask(&session, &request_id, Duration::from_secs(600)))
                    .await;
            }));
        }
    }
    let client = node.client().await;
    let mut pending = Vec::new();
    for s in 0..BURST_SESSIONS {
        let session = format!("burst-{s}");
        let listed = eventually("every ask of the session pending", || {
            let (mut client, session) = (client.clone(), session.clone());
            async move {
                let listed = client.list_pending(&session).await.ok()?;
                (listed.len() == BURST_ASKS).then_some(listed)
            }
        })
        .await;
        pending.extend(listed);
    }
    let acknowledged = Arc::new(Acknowledged::default());
    let mut answers = Vec::new();
    for requested in pending {
        let (mut client, acknowledged) = (client.clone(), acknowledged.clone());
        answers.push(tokio::spawn(async move {
            let answer = vec![QuestionAnswer {
                id: "deploy".into(),
                selected: vec!["yes".into()],
                custom: None,
            }];
            if client
                .answer(&requested.session_id, &requested.rpc_id, answer)
                .await
                .is_ok()
            {
                let request_id = requested.labels["request"].clone();
                let key = (requested.session_id.clone(), request_id);
                acknowledged.answers.lock().insert(key, "yes".into());
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(rng.below(40))).await;
    node.signal("KILL");
    node.exit_code().await;
    for task in answers.into_iter().chain(asks) {
        within("a client to notice the kill", task)
            .await
            .expect("client task");
    }

    let node = start(data).await;
    check(&node, &acknowledged).await;
    let mut client = node.client().await;
    let mut settled = 0;
    for s in 0..BURST_SESSIONS {
        let session = format!("burst-{s}");
        let still = client.list_pending(&session).await.expect("pending");
        settled += BURST_ASKS - still.len();
    }
    eprintln!(
        "torn-write test: {} answers acknowledged before the kill, {settled} asks answered \
         after the restart, the rest pending",
        acknowledged.answers.lock().len()
    );
    assert!(settled >= acknowledged.answers.lock().len());
}

/// Rounds of the seen-then-killed test.
const SEEN_ROUNDS: usize = 6;

/// How long each of the store's syncs is held back in the seen-then-killed test: a
/// slow disk, so that a commit is surely in flight when a question is seen.
const SLOW_SYNC: &str = "30ms";

/// `askgate serve` on a slow disk: under `strace`, which holds back every fsync and
/// fdatasync of the process by [`SLOW_SYNC`] (its fault injection), through a wrapper
/// script in `dir`. Returns the node and the pid of askgate itself (strace's child).
async fn start_on_a_slow_disk(dir: &TempDir, data: &str) -> (ServeProcess, u32) {
    let strace = ["/usr/bin/strace", "/bin/strace"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("strace is missing: scripts/test.sh installs it (apt-get install strace)");
    let wrapper = dir.file(
        "slow-disk.sh",
        format!(
            "#!/bin/sh\nexec {strace} -f -qq --seccomp-bpf -o /dev/null -e trace=fsync,fdatasync \
             -e inject=fsync,fdatasync:delay_enter={SLOW_SYNC} {} \"$@\"\n",
            crate::support::ASKGATE
        ),
    );
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    }
    let node = crate::support::ServeProcess::spawn_with(
        &wrapper,
        &[
            "--backend",
            "sqlite",
            "--data-dir",
            data,
            "--ask-rate",
            "1000000",
            "--ask-burst",
            "1000000",
        ],
    )
    .await;
    let children =
        std::fs::read_to_string(format!("/proc/{}/task/{}/children", node.pid, node.pid))
            .expect("strace's children");
    let askgate = children
        .split_whitespace()
        .next()
        .and_then(|pid| pid.parse().ok())
        .expect("askgate under strace");
    (node, askgate)
}

/// On SQLite a subscriber gets an ask's `requested` only once the ask is on disk: on a
/// slow disk, under a load of other asks, the node is killed -9 the moment a human's
/// stream shows a question, and after the restart that question is pending with the
/// same rpc_id. Before, the event went out before its commit, and the question was
/// gone after the restart (3 of 4 runs in the review; every run on a slow disk).
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_question_a_human_saw_survives_a_kill_9() {
    let dir = TempDir::new();
    let data = dir.0.join("data");
    let data = data.to_str().expect("a UTF-8 path");
    let mut seen = Vec::new();
    for round in 0..SEEN_ROUNDS {
        let (mut node, askgate) = start_on_a_slow_disk(&dir, data).await;
        let stop = Arc::new(AtomicBool::new(false));
        // Other agents keep the writer busy, so that commits are in flight.
        let mut load = Vec::new();
        for index in 1..AGENTS {
            load.push(tokio::spawn(agent(
                node.url.clone(),
                index,
                round,
                stop.clone(),
            )));
        }
        let mut human = node.client().await;
        let mut events = human.subscribe_session("seen").await.expect("subscribe");
        let url = node.url.clone();
        let asking = tokio::spawn(async move {
            let Ok(mut client) = Client::connect_lazy(url) else {
                return;
            };
            let _ = client
                .ask(ask(
                    "seen",
                    &format!("seen-{round}"),
                    Duration::from_secs(600),
                ))
                .await;
        });
        let rpc_id = crate::support::next_requested(&mut events).await;
        let killed = std::process::Command::new("kill")
            .args(["-KILL", &askgate.to_string()])
            .status()
            .expect("kill");
        assert!(killed.success());
        stop.store(true, Ordering::SeqCst);
        node.exit_code().await;
        seen.push(rpc_id);
        for task in load {
            within("an agent to notice the kill", task)
                .await
                .expect("agent task");
        }
        within("the asking call to end", asking)
            .await
            .expect("join");
    }
    let node = start(data).await;
    let mut client = node.client().await;
    let pending: Vec<String> = client
        .list_pending("seen")
        .await
        .expect("pending")
        .into_iter()
        .map(|p| p.rpc_id)
        .collect();
    let lost: Vec<&String> = seen.iter().filter(|id| !pending.contains(id)).collect();
    assert!(
        lost.is_empty(),
        "{} of {SEEN_ROUNDS} questions a human saw were gone after kill -9: {lost:?}",
        lost.len()
    );
}

/// The data directory is the node's alone: one another user could have prepared or
/// could change (a world-writable directory, a store others may write, a directory
/// owned by another user) is refused; a SQLite file of another application, or one
/// without askgate's mark that holds something else, is refused and left untouched; a
/// store whose sealing key is missing or another is refused, never re-keyed; and a
/// backup is readable by its owner only. Before, each was used as it was.
#[cfg(unix)]
#[tokio::test]
async fn a_data_directory_the_node_cannot_call_its_own_is_refused() {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    let chmod = |path: &std::path::Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod")
    };
    let mode = |path: &std::path::Path| std::fs::metadata(path).expect("stat").mode() & 0o777;
    let dir = TempDir::new();
    let path = |name: &str| dir.0.join(name);
    let text = |p: &std::path::PathBuf| p.to_str().expect("UTF-8").to_owned();

    // Prepared by "another user": open to everyone, with an empty store in it.
    let open = path("open");
    std::fs::create_dir(&open).expect("mkdir");
    chmod(&open, 0o777);
    let (code, stderr) = refused(&text(&open)).await;
    assert_ne!(code, 0, "{stderr}");
    assert!(
        stderr.contains("must be this user's alone") && stderr.contains("mode 777"),
        "{stderr}"
    );
    chmod(&open, 0o755);
    std::fs::write(open.join("askgate.db"), b"").expect("an empty store");
    chmod(&open.join("askgate.db"), 0o666);
    let (code, stderr) = refused(&text(&open)).await;
    assert_ne!(code, 0, "{stderr}");
    assert!(
        stderr.contains("askgate.db") && stderr.contains("mode 666"),
        "{stderr}"
    );
    // Owned by another user (as root, the tests can make it so).
    if rustix_euid() == 0 {
        let theirs = path("theirs");
        std::fs::create_dir(&theirs).expect("mkdir");
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).expect("chown");
        let (code, stderr) = refused(&text(&theirs)).await;
        assert_ne!(code, 0, "{stderr}");
        assert!(stderr.contains("owned by user 65534"), "{stderr}");
    }

    // Another application's SQLite file, and an unmarked one holding other tables.
    for (name, application_id) in [("foreign", 0x1234_5678), ("unmarked", 0)] {
        let data = path(name);
        std::fs::create_dir(&data).expect("mkdir");
        let store = data.join("askgate.db");
        let conn = rusqlite::Connection::open(&store).expect("a store");
        conn.execute_batch("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total TEXT)")
            .expect("a table");
        conn.pragma_update(None, "application_id", application_id)
            .expect("application_id");
        drop(conn);
        let before = std::fs::read(&store).expect("read");
        let (code, stderr) = refused(&text(&data)).await;
        assert_ne!(code, 0, "{name}: {stderr}");
        assert!(
            stderr.contains("not an askgate store") || stderr.contains("another application"),
            "{name}: {stderr}"
        );
        assert_eq!(
            std::fs::read(&store).expect("read"),
            before,
            "{name}: left untouched"
        );
        assert!(
            !data.join("askgate.db-wal").exists(),
            "{name}: not put in WAL mode"
        );
    }

    // A store used with a key: without its secret.key, or with another, it is refused.
    let keyed = path("keyed");
    let node = start(&text(&keyed)).await;
    drop(node);
    let key = keyed.join("secret.key");
    let original = std::fs::read(&key).expect("the key made at the first start");
    assert_eq!(mode(&keyed), 0o700);
    assert_eq!(mode(&keyed.join("askgate.db")), 0o600);
    std::fs::remove_file(&key).expect("lose the key");
    let (code, stderr) = refused(&text(&keyed)).await;
    assert_ne!(code, 0, "{stderr}");
    assert!(stderr.contains("secret.key is missing"), "{stderr}");
    assert!(!key.exists(), "no new key was made");
    std::fs::write(&key, "ab".repeat(32)).expect("another key");
    chmod(&key, 0o600);
    let (code, stderr) = refused(&text(&keyed)).await;
    assert_ne!(code, 0, "{stderr}");
    assert!(stderr.contains("sealed with another key"), "{stderr}");
    std::fs::write(&key, &original).expect("the key back");
    let node = start(&text(&keyed)).await;
    drop(node);

    // A backup holds every answer: readable by its owner only.
    let copy = path("copy.db");
    let (code, _, stderr) = finish(askgate(&[
        "backup",
        "--data-dir",
        &text(&keyed),
        "--out",
        &text(&copy),
    ]))
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(mode(&copy), 0o600);
}

/// The effective user id of this process (the owner of what it makes).
#[cfg(unix)]
fn rustix_euid() -> u32 {
    use std::os::unix::fs::MetadataExt as _;
    let dir = TempDir::new();
    std::fs::metadata(dir.file("mine", b""))
        .expect("stat")
        .uid()
}
