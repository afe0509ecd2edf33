//! `askgate-bench soak`: a steady load for minutes, to see that a node's memory and
//! task count stay flat. `--waiting` askers each keep one ask pending (HOLD, over
//! `--sessions`); an answerer following every session answers `--answer-rate` of them
//! a second, and the others expire after a random wait, so asks keep resolving and
//! arriving; `--subscribers` session subscribers drop their stream every
//! `--reconnect-every` and resume from their last cursor. Every `--every` it prints
//! the node's RSS, its runtime's task count and the load's progress, and at the end how
//! far the RSS and the tasks moved after the warm-up.

use std::{
    collections::{BTreeMap, VecDeque},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::bail;
use askgate_client::{Ask, Client, Event, answer, question};
use askgate_proto::v1::SubscribeRequest;
use clap::Args;
use parking_lot::Mutex;
use tokio_stream::StreamExt;

use askgate_testing::{RedisServer, ServeProcess};

use crate::{
    BenchBackend, backend_name,
    capacity::gauge,
    measured_node,
    nodes::{DataDir, metrics_addr},
    start_one,
};

#[derive(Debug, Args)]
pub struct SoakArgs {
    /// How long the load runs.
    #[arg(long, default_value = "10m", value_parser = crate::parse_duration)]
    pub duration: Duration,
    /// Asks kept waiting at all times (one asker each).
    #[arg(long, default_value_t = 10_000)]
    pub waiting: usize,
    /// Sessions the asks are spread over.
    #[arg(long, default_value_t = 1000)]
    pub sessions: usize,
    /// Asks answered per second, the newest first (the others expire, after 30 to 90 s).
    #[arg(long, default_value_t = 50)]
    pub answer_rate: u32,
    /// Session subscribers, each dropping its stream and resuming from its cursor.
    #[arg(long, default_value_t = 1000)]
    pub subscribers: usize,
    /// How often each subscriber reconnects (spread over the interval).
    #[arg(long, default_value = "30s", value_parser = crate::parse_duration)]
    pub reconnect_every: Duration,
    /// How often the figures are printed.
    #[arg(long, default_value = "30s", value_parser = crate::parse_duration)]
    pub every: Duration,
    /// The figures before this are the warm-up, left out of the drift: long enough for
    /// the retention windows below to fill (and for Redis to expire what they let go).
    #[arg(long, default_value = "3m", value_parser = crate::parse_duration)]
    pub warm_up: Duration,
    /// Connections the calls share.
    #[arg(long, default_value_t = 50)]
    pub connections: usize,
    /// The node's `--request-retention`: how long it keeps a finished ask's outcome.
    /// Shorter than the server's default (10m), so that what the node keeps of
    /// finished asks reaches its steady size within the warm-up.
    #[arg(long, default_value = "90s", value_parser = crate::parse_duration)]
    pub request_retention: Duration,
    /// The node's `--history-len`: events kept per session for resuming. Smaller than
    /// the server's default (1000) for the same reason: at the default load a session
    /// gets about 27 events a minute.
    #[arg(long, default_value_t = 40)]
    pub history_len: usize,
    #[arg(long, value_enum, default_value = "memory")]
    pub backend: BenchBackend,
}

/// What the load did so far.
#[derive(Default)]
struct Progress {
    asked: AtomicU64,
    answered: AtomicU64,
    expired: AtomicU64,
    failed: AtomicU64,
    /// The first failure of each kind (code and reason), with how many there were.
    failures: Mutex<BTreeMap<String, (u64, String)>>,
    resumed: AtomicU64,
    reset: AtomicU64,
}

const MIB: f64 = 1024.0 * 1024.0;

/// A wait of 30 to 90 s, spread by `seed` (no random source needed).
fn expiry(seed: u64) -> Duration {
    Duration::from_millis(30_000 + seed.wrapping_mul(2_654_435_761) % 60_000)
}

pub async fn run(args: SoakArgs) -> anyhow::Result<()> {
    if args.sessions == 0 || args.connections == 0 || args.waiting == 0 {
        bail!("--waiting, --sessions and --connections must be at least 1");
    }
    let per_session = (args.waiting / args.sessions + 1).to_string();
    let per_tenant = (args.waiting + args.sessions).to_string();
    let retention = format!("{}ms", args.request_retention.as_millis());
    let history_len = args.history_len.to_string();
    let mut node_args = measured_node(&per_session, &per_tenant);
    node_args.extend([
        "--request-retention",
        &retention,
        "--history-len",
        &history_len,
    ]);
    let (node, held) = start_one(args.backend, &node_args).await?;
    let metrics = metrics_addr(&node)?;
    let outside = match (
        held.downcast_ref::<RedisServer>(),
        held.downcast_ref::<DataDir>(),
    ) {
        (Some(redis), _) => Some(Outside::Redis(&redis.url)),
        (_, Some(dir)) => Some(Outside::Store(dir)),
        _ => None,
    };
    let mut clients = Vec::new();
    for _ in 0..args.connections {
        clients.push(Client::connect(node.url.clone()).await?);
    }
    let progress = Arc::new(Progress::default());
    let mut load = tokio::task::JoinSet::new();
    spawn_askers(&mut load, &clients, &args, &progress);
    spawn_answerer(&mut load, &clients, &args);
    spawn_subscribers(&mut load, &clients, &args, &progress);
    print_header(&args, outside.as_ref());
    let after_warm_up = sample(&args, &node, &metrics, &progress, outside.as_ref()).await?;
    load.abort_all();
    summarize(&progress, &after_warm_up, outside.as_ref());
    Ok(())
}

type Load = tokio::task::JoinSet<()>;

/// Askers: each keeps one ask waiting, asking again as soon as it resolves.
fn spawn_askers(load: &mut Load, clients: &[Client], args: &SoakArgs, progress: &Arc<Progress>) {
    for i in 0..args.waiting {
        let mut client = clients[i % clients.len()].clone();
        let session = format!("soak-{}", i % args.sessions);
        let progress = progress.clone();
        load.spawn(async move {
            for round in 0u64.. {
                let ask = Ask::new(&session)
                    .question(question("q", "Still there?").choice("yes"))
                    .hold_unattended()
                    .timeout(expiry(i as u64 * 7919 + round))
                    .no_retry();
                progress.asked.fetch_add(1, Ordering::Relaxed);
                let counter = match client.ask(ask).await {
                    Ok(_) => &progress.answered,
                    Err(e) if e.reason() == askgate_client::Reason::AskExpired => &progress.expired,
                    Err(e) => {
                        let kind = format!("{:?} {:?}", e.code(), e.reason());
                        progress
                            .failures
                            .lock()
                            .entry(kind)
                            .or_insert_with(|| (0, e.to_string()))
                            .0 += 1;
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        &progress.failed
                    }
                };
                counter.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
}

/// The answerer: follows every session and answers the oldest asks it saw, at a
/// steady rate.
fn spawn_answerer(load: &mut Load, clients: &[Client], args: &SoakArgs) {
    let seen: Arc<Mutex<VecDeque<(String, String)>>> = Arc::default();
    {
        let mut client = clients[0].clone();
        let (seen, waiting) = (seen.clone(), args.waiting);
        load.spawn(async move {
            let Ok(mut events) = client.subscribe_all().await else {
                return;
            };
            while let Some(Ok(event)) = events.next().await {
                if let Event::Requested { requested, .. } = event {
                    let mut seen = seen.lock();
                    // The newest asks, at most as many as are waiting: older ones
                    // have expired or been answered by now.
                    if seen.len() >= waiting {
                        seen.pop_front();
                    }
                    seen.push_back((requested.session_id, requested.rpc_id));
                }
            }
        });
    }
    if args.answer_rate > 0 {
        let mut client = clients[1 % clients.len()].clone();
        let (seen, rate) = (seen.clone(), args.answer_rate);
        load.spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1) / rate);
            loop {
                tick.tick().await;
                let next = seen.lock().pop_back();
                if let Some((session, rpc)) = next {
                    // Expired or answered meanwhile: NOT_PENDING, nothing to do.
                    let _ = client
                        .answer(&session, &rpc, vec![answer::select("q", ["yes"])])
                        .await;
                }
            }
        });
    }
}

/// Subscribers: each follows a session, drops its stream every interval (spread over
/// it) and resumes from its last cursor.
fn spawn_subscribers(
    load: &mut Load,
    clients: &[Client],
    args: &SoakArgs,
    progress: &Arc<Progress>,
) {
    for i in 0..args.subscribers {
        let mut client = clients[i % clients.len()].clone();
        let session = format!("soak-{}", i % args.sessions);
        let progress = progress.clone();
        let every = args.reconnect_every;
        let offset = every.mul_f64(i as f64 / args.subscribers.max(1) as f64);
        load.spawn(async move {
            tokio::time::sleep(offset).await;
            let mut after = String::new();
            loop {
                let request = SubscribeRequest {
                    session_id: session.clone(),
                    after: after.clone(),
                    ..Default::default()
                };
                let Ok(mut events) = client.subscribe(request).await else {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                };
                let until = tokio::time::sleep(every);
                tokio::pin!(until);
                loop {
                    tokio::select! {
                        () = &mut until => break,
                        event = events.next() => match event {
                            Some(Ok(Event::Synced { cursor, resumed })) => {
                                let counter = if resumed { &progress.resumed } else { &progress.reset };
                                counter.fetch_add(1, Ordering::Relaxed);
                                after = cursor;
                            }
                            Some(Ok(Event::Requested { cursor, .. } | Event::Resolved { cursor, .. })) => {
                                after = cursor;
                            }
                            Some(Ok(_)) => {}
                            Some(Err(_)) | None => break,
                        },
                    }
                }
            }
        });
    }
}

fn print_header(args: &SoakArgs, outside: Option<&Outside<'_>>) {
    println!(
        "askgate-bench soak ({} backend): {} waiting asks over {} sessions, {} answered/s, \
         {} subscribers reconnecting every {:?}, for {:?}; the node keeps outcomes for {:?} \
         and {} events per session",
        backend_name(args.backend),
        args.waiting,
        args.sessions,
        args.answer_rate,
        args.subscribers,
        args.reconnect_every,
        args.duration,
        args.request_retention,
        args.history_len,
    );
    println!(
        "  time   RSS MiB   tasks   pending      asked   answered    expired   resumed   reset   failed{}",
        outside.map_or(String::new(), |o| format!(" {:>10}", o.heading()))
    );
}

/// Samples the node every interval until the run is over; the samples after the
/// warm-up: RSS, tasks and Redis's memory.
async fn sample(
    args: &SoakArgs,
    node: &ServeProcess,
    metrics: &str,
    progress: &Progress,
    outside: Option<&Outside<'_>>,
) -> anyhow::Result<Vec<(f64, u64, Option<f64>)>> {
    let started = Instant::now();
    let mut after_warm_up: Vec<(f64, u64, Option<f64>)> = Vec::new();
    let mut tick = tokio::time::interval(args.every);
    tick.tick().await;
    while started.elapsed() < args.duration {
        tick.tick().await;
        let rss = node.rss()? as f64 / MIB;
        let tasks = gauge(metrics, "askgate_runtime_tasks").await?;
        let pending = gauge(metrics, "askgate_pending_asks").await?;
        let redis_memory = match outside {
            Some(outside) => Some(outside.mib().await?),
            None => None,
        };
        let count = |c: &AtomicU64| c.load(Ordering::Relaxed);
        println!(
            "{:>5.0}s {:>9.1} {:>7} {:>9} {:>10} {:>10} {:>10} {:>9} {:>7} {:>8}{}",
            started.elapsed().as_secs_f64(),
            rss,
            tasks,
            pending,
            count(&progress.asked),
            count(&progress.answered),
            count(&progress.expired),
            count(&progress.resumed),
            count(&progress.reset),
            count(&progress.failed),
            redis_memory.map_or_else(String::new, |m| format!(" {m:>10.1}")),
        );
        if started.elapsed() >= args.warm_up {
            after_warm_up.push((rss, tasks, redis_memory));
        }
    }
    Ok(after_warm_up)
}

/// The failures by kind, and how far memory and tasks moved after the warm-up.
fn summarize(
    progress: &Progress,
    after_warm_up: &[(f64, u64, Option<f64>)],
    outside: Option<&Outside<'_>>,
) {
    for (kind, (count, first)) in progress.failures.lock().iter() {
        println!("failed: {count} x {kind}, the first: {first}");
    }
    if let (Some(first), Some(last)) = (after_warm_up.first(), after_warm_up.last()) {
        let (low, high) = after_warm_up
            .iter()
            .fold((f64::MAX, 0f64), |(lo, hi), (rss, _, _)| {
                (lo.min(*rss), hi.max(*rss))
            });
        println!(
            "after the warm-up: RSS {:.1} to {:.1} MiB ({:+.1}% first to last, {:.1}% spread); \
             tasks {} to {}",
            first.0,
            last.0,
            (last.0 / first.0 - 1.0) * 100.0,
            (high / low - 1.0) * 100.0,
            first.1,
            last.1
        );
        if let (Some(first), Some(last), Some(outside)) = (first.2, last.2, outside) {
            println!(
                "{} after the warm-up: {first:.1} to {last:.1} MiB ({:+.1}%)",
                outside.name(),
                (last / first - 1.0) * 100.0
            );
        }
    } else {
        println!("no figures after the warm-up: run longer than --warm-up");
    }
}

/// What holds a node's state outside it, sized at every sample: Redis's memory, or the
/// sqlite store's files.
enum Outside<'a> {
    Redis(&'a str),
    Store(&'a DataDir),
}

impl Outside<'_> {
    fn name(&self) -> &'static str {
        match self {
            Self::Redis(_) => "Redis",
            Self::Store(_) => "The store (database and log)",
        }
    }

    fn heading(&self) -> &'static str {
        match self {
            Self::Redis(_) => "Redis MiB",
            Self::Store(_) => "store MiB",
        }
    }

    async fn mib(&self) -> anyhow::Result<f64> {
        Ok(match self {
            Self::Redis(url) => crate::redis_used_memory(url).await? as f64 / MIB,
            Self::Store(dir) => dir.store_bytes() as f64 / MIB,
        })
    }
}
