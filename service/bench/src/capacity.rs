//! `askgate-bench capacity`: how much a node holds. Idle RSS and start to SERVING; then
//! P asks held pending (`if_unattended` HOLD) over S sessions, the RSS at that peak and
//! per pending ask; a new subscriber on a session holding K pending, until `synced`; and
//! the RSS while the asks, now resolved, are freed.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use askgate_client::{Ask, Client, Event, question};
use clap::Args;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_stream::StreamExt;
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};

use crate::{
    BenchBackend, backend_name,
    figures::{Better::Lower, record},
    measured_node,
    nodes::{
        DataDir, metrics_addr, redis_is_primary, redis_urls, redis_used_memory, start_node_within,
    },
    start_one,
};
use askgate_testing::ServeProcess;

#[derive(Debug, Args)]
pub struct CapacityArgs {
    /// Asks held pending, spread over --sessions.
    #[arg(long, default_value_t = 100_000)]
    pub pending: usize,
    /// Sessions the pending asks are spread over.
    #[arg(long, default_value_t = 1000)]
    pub sessions: usize,
    /// Pending asks of one more session, which a new subscriber then replays.
    #[arg(long, default_value_t = 10_000)]
    pub big: usize,
    /// Connections the asking calls share. (Above about 10,000 calls on one connection
    /// the calls fail with a transport error today: issue 6 raises the HTTP/2 limits.)
    #[arg(long, default_value_t = 100)]
    pub connections: usize,
    /// How long to watch the RSS fall after the asks are resolved.
    #[arg(long, default_value = "60s", value_parser = crate::parse_duration)]
    pub settle: Duration,
    /// Where the node keeps its state (redis and cluster start their own Redis).
    #[arg(long, value_enum, default_value = "memory")]
    pub backend: BenchBackend,
    /// A flag for the node, as `askgate serve` takes it (repeatable), for example
    /// `--node-arg=--history-len=0` to see what the resolved asks' history holds.
    #[arg(long = "node-arg", allow_hyphen_values = true)]
    pub node_args: Vec<String>,
}

const MIB: f64 = 1024.0 * 1024.0;

/// The asks the bench makes in `session`: `--big` in cap-big, `--pending` spread
/// round-robin over cap-0.. cap-(sessions-1).
fn expected_in(session: &str, args: &CapacityArgs) -> usize {
    match session
        .strip_prefix("cap-")
        .and_then(|i| i.parse::<usize>().ok())
    {
        Some(i) => args.pending / args.sessions + usize::from(i < args.pending % args.sessions),
        None => args.big,
    }
}

pub async fn run(args: CapacityArgs) -> anyhow::Result<()> {
    if args.sessions == 0 || args.connections == 0 {
        bail!("--sessions and --connections must be at least 1");
    }
    let per_session = (args.pending / args.sessions + 1).max(args.big).to_string();
    let per_tenant = (args.pending + args.big + 1).to_string();
    let mut node_args = measured_node(&per_session, &per_tenant);
    node_args.extend(args.node_args.iter().map(String::as_str));
    let (node, _redis) = start_one(args.backend, &node_args).await?;
    let redis = redis_urls(_redis.as_ref());
    let metrics = metrics_addr(&node)?;
    let serving = serving_after(&node).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle = node.rss()?;
    let redis_idle = primaries_memory(&redis).await?;
    println!(
        "askgate-bench capacity ({} backend; RSS is the node's)",
        backend_name(args.backend)
    );
    println!(
        "idle RSS {:.1} MiB; start to SERVING {:.0} ms",
        idle as f64 / MIB,
        serving.as_secs_f64() * 1000.0
    );
    let name = backend_name(args.backend);
    record(&format!("{name} idle RSS"), idle as f64 / MIB, "MiB", Lower);
    let ms = serving.as_secs_f64() * 1000.0;
    record(&format!("{name} start to SERVING"), ms, "ms", Lower);

    let mut clients = Vec::new();
    for _ in 0..args.connections {
        clients.push(Client::connect(node.url.clone()).await?);
    }
    let total = args.pending + args.big;
    let (mut calls, started) = hold_asks(&clients, &args, &metrics).await?;
    let lister = clients[0].clone();
    let stored = wait_stored(lister.clone(), &args, started).await?;
    if stored != total {
        bail!("{stored} asks stored, {total} expected");
    }
    let peak = node.rss()?;
    println!(
        "{total} pending asks over {} sessions (+1 holding {}), stored in {:.1} s: RSS {:.1} MiB, {:.0} bytes per pending ask",
        args.sessions,
        args.big,
        started.elapsed().as_secs_f64(),
        peak as f64 / MIB,
        peak.saturating_sub(idle) as f64 / total as f64
    );
    let per_ask = peak.saturating_sub(idle) as f64 / total as f64;
    record(
        &format!("{name} bytes per pending ask"),
        per_ask,
        "B",
        Lower,
    );
    let held = format!("{name} RSS with {total} pending");
    record(&held, peak as f64 / MIB, "MiB", Lower);
    if let (Some(before), Some(now)) = (redis_idle, primaries_memory(&redis).await?) {
        let per_ask = now.saturating_sub(before) as f64 / total as f64;
        println!(
            "Redis used_memory (its primaries together) {:.1} MiB to {:.1} MiB: {per_ask:.0} bytes per pending ask",
            before as f64 / MIB,
            now as f64 / MIB,
        );
        record(
            &format!("{name} Redis bytes per pending ask"),
            per_ask,
            "B",
            Lower,
        );
    }

    let subscriber = clients[0].clone();
    replay_busy_session(subscriber.clone(), &name, args.big).await?;
    // The store copied while every ask is pending; a node starts on the copy once this
    // one is gone (two nodes of a million asks each would not fit some machines).
    let copy = match _redis.downcast_ref::<DataDir>() {
        Some(dir) => Some(backup(dir, total).await?),
        None => None,
    };

    // Dropping the calls aborts their asks.
    calls.abort_all();
    while calls.join_next().await.is_some() {}
    let started = Instant::now();
    while pending_asks(&metrics).await? > 0 && started.elapsed() < args.settle {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let rss = report_fall(&node, peak, started, args.settle, "after the asks resolved").await?;
    let fell = format!("{name} RSS after the asks resolved, of the peak");
    record(&fell, rss as f64 * 100.0 / peak as f64, "%", Lower);
    // HTTP/2 keeps a connection's stream table at its largest: what the clients'
    // connections held is freed when they close.
    drop((clients, subscriber, lister));
    let when = "after the clients' connections closed too";
    report_fall(&node, peak, Instant::now(), args.settle, when).await?;
    drop(node);
    if let Some(copy) = copy {
        let limits = (per_session.as_str(), per_tenant.as_str());
        start_on_copy(copy, limits, total, &args.node_args).await?;
    }
    Ok(())
}

/// Every ask of the run, held by calls that wait on them, until the node counts them
/// all pending; the calls, and when they started.
async fn hold_asks(
    clients: &[Client],
    args: &CapacityArgs,
    metrics: &str,
) -> anyhow::Result<(Calls, Instant)> {
    let total = args.pending + args.big;
    let hold = |session: String| {
        Ask::new(&session)
            .question(question("q", "Hold on?").choice("yes"))
            .hold_unattended()
            .no_retry()
    };
    let mut calls = tokio::task::JoinSet::new();
    let sessions = (0..args.pending).map(|i| format!("cap-{}", i % args.sessions));
    let big = std::iter::repeat_n("cap-big".to_owned(), args.big);
    // On Redis the asks start in waves: a hundred thousand registrations sent at once
    // queue on the node's connection past its response timeout.
    let wave = match args.backend {
        BenchBackend::Memory | BenchBackend::Sqlite => total,
        _ => REDIS_WAVE,
    };
    let started = Instant::now();
    for (i, session) in sessions.chain(big).enumerate() {
        let mut client = clients[i % clients.len()].clone();
        let ask = hold(session);
        calls.spawn(async move { client.ask(ask).await });
        if (i + 1) % wave == 0 {
            all_pending(&mut calls, metrics, i + 1, started).await?;
        }
    }
    all_pending(&mut calls, metrics, total, started).await?;
    Ok((calls, started))
}

/// Asks started at once on Redis.
const REDIS_WAVE: usize = 5_000;

/// Waits until the node counts `count` asks pending (failing at the first ask that fails).
async fn all_pending(
    calls: &mut Calls,
    metrics: &str,
    count: usize,
    started: Instant,
) -> anyhow::Result<()> {
    while pending_asks(metrics).await? < count as u64 {
        if let Some(Ok(Err(e))) = calls.try_join_next() {
            bail!("an ask failed: {e}");
        }
        if started.elapsed() > Duration::from_secs(600) {
            bail!("the asks were not all pending within 10 minutes");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

type Calls = tokio::task::JoinSet<Result<askgate_proto::v1::AskResponse, askgate_client::Error>>;

/// Waits until every session lists all of its asks (the node counts an ask as soon as
/// its call waits, which on Redis is a moment before the ask is stored); how many.
async fn wait_stored(
    mut lister: Client,
    args: &CapacityArgs,
    started: Instant,
) -> anyhow::Result<usize> {
    let mut sessions: Vec<String> = (0..args.sessions.min(args.pending))
        .map(|i| format!("cap-{i}"))
        .collect();
    sessions.push("cap-big".to_owned());
    let mut stored = 0;
    for session in &sessions {
        loop {
            let listed = lister.list_pending(session).await?.len();
            if listed == expected_in(session, args) {
                stored += listed;
                break;
            }
            if started.elapsed() > Duration::from_secs(300) {
                bail!("the asks of {session} were not all stored within 5 minutes");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(stored)
}

/// `dir`'s store copied by `askgate backup` (with its sealing key, which a restore
/// takes too, as docs/operations.md says), while every ask is pending.
async fn backup(dir: &DataDir, total: usize) -> anyhow::Result<DataDir> {
    let copy = DataDir::new()?;
    let out = copy.path().join("askgate.db");
    let started = Instant::now();
    let status = tokio::process::Command::new(crate::nodes::askgate()?)
        .arg("backup")
        .arg("--data-dir")
        .arg(dir.path())
        .arg("--out")
        .arg(&out)
        .stderr(std::process::Stdio::null())
        .status()
        .await?;
    anyhow::ensure!(status.success(), "askgate backup failed: {status}");
    std::fs::copy(
        dir.path().join("secret.key"),
        copy.path().join("secret.key"),
    )?;
    println!(
        "the store with {total} pending asks: {:.1} MiB; copied by askgate backup in {:.1} s",
        dir.store_bytes() as f64 / MIB,
        started.elapsed().as_secs_f64(),
    );
    let store = format!("sqlite store with {total} pending");
    record(&store, dir.store_bytes() as f64 / MIB, "MiB", Lower);
    Ok(copy)
}

/// A node started on `copy`, a store holding `total` pending asks: its start to SERVING
/// (it loads the store first, about a second per hundred thousand asks).
async fn start_on_copy(
    copy: DataDir,
    (per_session, per_tenant): (&str, &str),
    total: usize,
    node_args: &[String],
) -> anyhow::Result<()> {
    let mut args = copy.args();
    args.extend(
        measured_node(per_session, per_tenant)
            .iter()
            .map(|a| (*a).to_owned()),
    );
    args.extend(node_args.iter().cloned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let within = start_deadline(total);
    let node = start_node_within(&args, within).await?;
    let serving = serving_within(&node, within).await?;
    println!(
        "a node started on the copy: SERVING in {:.0} ms, RSS {:.1} MiB",
        serving.as_secs_f64() * 1000.0,
        node.rss()? as f64 / MIB
    );
    let restart = format!("sqlite start to SERVING with {total} pending");
    record(&restart, serving.as_secs_f64() * 1000.0, "ms", Lower);
    Ok(())
}

/// How long a node on a store of `total` pending asks may take to start: 10 s, and a
/// second more per 20,000 asks.
fn start_deadline(total: usize) -> Duration {
    Duration::from_secs(10 + (total / 20_000) as u64)
}

/// A new subscriber of the session holding `big` asks: how long its replay takes.
async fn replay_busy_session(mut subscriber: Client, name: &str, big: usize) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut events = subscriber.subscribe_session("cap-big").await?;
    let mut replayed = 0;
    loop {
        match events.next().await {
            Some(Ok(Event::Synced { .. })) => break,
            Some(Ok(_)) => replayed += 1,
            Some(Err(e)) => return Err(e.into()),
            None => bail!("the subscription ended before synced"),
        }
    }
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    println!(
        "a new subscriber on the session holding {big}: synced after {replayed} replayed, in {ms:.1} ms"
    );
    record(
        &format!("{name} replay of {big} pending to synced"),
        ms,
        "ms",
        Lower,
    );
    Ok(())
}

/// Waits until the node's RSS is at most a quarter of `peak`, or `settle` has passed
/// since `started`, and prints it; the RSS.
async fn report_fall(
    node: &ServeProcess,
    peak: u64,
    started: Instant,
    settle: Duration,
    when: &str,
) -> anyhow::Result<u64> {
    let mut rss = node.rss()?;
    while rss > peak / 4 && started.elapsed() < settle {
        tokio::time::sleep(Duration::from_millis(500)).await;
        rss = node.rss()?;
    }
    println!(
        "{when}: RSS {:.1} MiB ({:.0}% of the peak) after {:.1} s",
        rss as f64 / MIB,
        rss as f64 * 100.0 / peak as f64,
        started.elapsed().as_secs_f64()
    );
    Ok(rss)
}

/// How long after its start the node answered a health Check with SERVING.
async fn serving_after(node: &ServeProcess) -> anyhow::Result<Duration> {
    serving_within(node, Duration::from_secs(10)).await
}

/// How long after its start `node` reported SERVING (at most `within`).
async fn serving_within(node: &ServeProcess, within: Duration) -> anyhow::Result<Duration> {
    let channel = tonic::transport::Endpoint::from_shared(node.url.clone())?
        .connect()
        .await?;
    let mut health = HealthClient::new(channel);
    loop {
        let status = health
            .check(HealthCheckRequest {
                service: String::new(),
            })
            .await
            .map(|r| r.into_inner().status());
        if status.is_ok_and(|s| s == ServingStatus::Serving) {
            return Ok(node.spawned.elapsed());
        }
        if node.spawned.elapsed() > within {
            bail!("not SERVING within {within:?}");
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// The node's `askgate_pending_asks` gauge, read from its Prometheus endpoint.
async fn pending_asks(metrics: &str) -> anyhow::Result<u64> {
    gauge(metrics, "askgate_pending_asks").await
}

/// One gauge of the node's Prometheus endpoint at `metrics`.
pub(super) async fn gauge(metrics: &str, name: &str) -> anyhow::Result<u64> {
    let mut stream = tokio::net::TcpStream::connect(metrics).await?;
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: bench\r\n\r\n")
        .await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    response
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .with_context(|| format!("no {name} in the metrics"))
}

/// What the primaries among `urls` hold together (`used_memory`); none without Redis.
async fn primaries_memory(urls: &[String]) -> anyhow::Result<Option<u64>> {
    if urls.is_empty() {
        return Ok(None);
    }
    let mut total = 0;
    for url in urls {
        if redis_is_primary(url).await? {
            total += redis_used_memory(url).await?;
        }
    }
    Ok(Some(total))
}
