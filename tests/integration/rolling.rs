//! A rolling restart as Kubernetes does one (deploy/kubernetes): three nodes over
//! Redis behind a balancer standing in for the Service. One node at a time leaves the
//! ready set (its readiness probe fails, preStop), gets SIGTERM, drains, and a new
//! node takes its place, while agents keep asking with request_ids and a bot keeps
//! answering. Every ask completes with the bot's answer; none fails.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use askgate_client::{Ask, Client, question};
use askgate_testing::RedisServer;

use crate::support::{Balancer, ServeProcess, askgate, eventually, within};

/// Agents asking at once, each in its own session.
const AGENTS: usize = 8;
/// Asks that must complete after each restart before the next one starts.
const ASKS_BETWEEN_RESTARTS: usize = 2 * AGENTS;

/// What the agents share with the test.
#[derive(Default)]
struct Progress {
    stop: AtomicBool,
    /// Asks answered by the bot, over all agents.
    answered: AtomicUsize,
    /// The first ask that was not.
    failure: std::sync::Mutex<Option<String>>,
}

impl Progress {
    /// Whether `at_least` asks were answered; fails the test at once when an ask was
    /// not.
    fn reached(&self, at_least: usize) -> Option<()> {
        let failure = self.failure.lock().expect("lock").clone();
        if let Some(failure) = failure {
            panic!("{failure}");
        }
        (self.answered.load(Ordering::SeqCst) >= at_least).then_some(())
    }

    fn fail(&self, why: String) {
        self.failure.lock().expect("lock").get_or_insert(why);
    }
}

/// Asks until told to stop, one ask at a time, like an agent worker whose tool calls
/// reattach with their request_id; the number of asks answered.
async fn agent(url: String, index: usize, progress: Arc<Progress>) -> usize {
    let mut client = match Client::connect_lazy(url) {
        Ok(client) => client,
        Err(error) => {
            progress.fail(format!("agent {index}: {error}"));
            return 0;
        }
    };
    let mut asked = 0;
    while !progress.stop.load(Ordering::SeqCst) {
        let ask = Ask::new(&format!("rolling-{index}"))
            .question(question("deploy", "Deploy?").choice("yes").choice("no"))
            .request_id(&format!("agent-{index}-ask-{asked}"))
            .reattach_grace(Duration::from_secs(30))
            .hold_unattended()
            .timeout(Duration::from_secs(60));
        match client.ask(ask).await {
            Ok(response)
                if response
                    .answers
                    .first()
                    .is_some_and(|a| a.selected == ["yes"]) => {}
            Ok(response) => {
                progress.fail(format!(
                    "agent {index}, ask {asked}: not the bot's answer: {response:?}"
                ));
                return asked;
            }
            Err(error) => {
                progress.fail(format!("agent {index}, ask {asked} failed: {error}"));
                return asked;
            }
        }
        asked += 1;
        progress.answered.fetch_add(1, Ordering::SeqCst);
    }
    asked
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rolling_restart_of_three_nodes_fails_no_ask() {
    let redis = RedisServer::start().await;
    let extra = ["--drain-timeout", "10s"];
    let mut nodes = ServeProcess::redis_nodes(&redis.url, false, 3, &extra).await;
    let balancer = Balancer::start(nodes.iter().map(|n| n.addr()).collect()).await;
    let url = balancer.url();
    // The bot answers a moment after each question appears, so that every node holds
    // waiting asks when it is told to stop.
    let _bot = askgate(&[
        "bot",
        "--addr",
        &url,
        "--all-sessions",
        "--policy",
        "first",
        "--delay",
        "200ms",
    ]);

    let progress = Arc::new(Progress::default());
    let agents: Vec<_> = (0..AGENTS)
        .map(|index| tokio::spawn(agent(url.clone(), index, progress.clone())))
        .collect();
    let answered = |at_least: usize| std::future::ready(progress.reached(at_least));
    eventually("asks to flow before the first restart", || {
        answered(ASKS_BETWEEN_RESTARTS)
    })
    .await;

    for round in 0..3 {
        let mut old = nodes.remove(0);
        balancer.remove(old.addr());
        old.signal("TERM");
        assert_eq!(
            old.exit_code().await,
            Some(0),
            "node {round} drains cleanly"
        );
        let new = ServeProcess::redis_nodes(&redis.url, false, 1, &extra)
            .await
            .pop()
            .expect("a node");
        balancer.add(new.addr());
        nodes.push(new);
        let target = progress.answered.load(Ordering::SeqCst) + ASKS_BETWEEN_RESTARTS;
        eventually("asks to flow after the restart", || answered(target)).await;
    }

    progress.stop.store(true, Ordering::SeqCst);
    for agent in agents {
        let asked = within("an agent to finish its last ask", agent)
            .await
            .expect("join");
        assert!(asked > 0, "every agent got answers");
    }
    progress.reached(0);
}
