//! `askgate-bench fanout`: one session, M subscribers, E events. Each event's delivery
//! latency (from the server's timestamp on the event to its arrival at a subscriber,
//! on the same machine's clock), and the server's CPU time per delivered event.

use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};
use askgate_client::{Ask, Client, Event, Reason, question};
use clap::Args;
use hdrhistogram::Histogram;
use tokio_stream::StreamExt;

use crate::{BenchBackend, backend_name, new_histogram, start_one};

#[derive(Debug, Args)]
pub struct FanoutArgs {
    /// Subscribers of the session.
    #[arg(long, default_value_t = 1000)]
    pub subscribers: usize,
    /// Events sent to them: asks made and then cancelled, `requested` and `resolved`
    /// each.
    #[arg(long, default_value_t = 1000)]
    pub events: usize,
    /// Connections the subscribers share.
    #[arg(long, default_value_t = 10)]
    pub connections: usize,
    /// Where the node keeps its state (redis and cluster start their own Redis).
    #[arg(long, value_enum, default_value = "memory")]
    pub backend: BenchBackend,
}

const SESSION: &str = "fanout";
/// How long one step (an ask being requested, ending after its cancel, the last
/// events reaching every subscriber) may take before the run stops and says which.
const STEP: Duration = Duration::from_secs(30);

pub async fn run(args: FanoutArgs) -> anyhow::Result<()> {
    if args.subscribers == 0 || args.connections == 0 || args.events < 2 {
        bail!("--subscribers and --connections must be at least 1, --events at least 2");
    }
    // One more: the driver watches the session too.
    let subscribers = (args.subscribers + 1).to_string();
    let (node, _redis) = start_one(
        args.backend,
        &["--max-subscribers-per-session", &subscribers],
    )
    .await?;
    let mut clients = Vec::new();
    for _ in 0..args.connections {
        clients.push(Client::connect(node.url.clone()).await?);
    }
    let asks = args.events / 2;
    let expected = 2 * asks;
    let readers = subscribe(&clients, args.subscribers, expected).await?;
    let cpu_before = node.cpu()?;
    let started = Instant::now();
    drive(&clients, asks).await?;
    let latency = merged(readers).await?;
    let elapsed = started.elapsed();
    let cpu = node.cpu()?.saturating_sub(cpu_before);
    let delivered = (expected * args.subscribers) as f64;
    let ms = |q: f64| Duration::from_micros(latency.value_at_quantile(q)).as_secs_f64() * 1000.0;
    println!(
        "askgate-bench fanout ({} backend)",
        backend_name(args.backend)
    );
    println!(
        "{expected} events to {} subscribers of one session in {:.2} s: {delivered:.0} deliveries, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        args.subscribers,
        elapsed.as_secs_f64(),
        ms(0.50),
        ms(0.99),
        ms(1.0),
    );
    println!(
        "server CPU {:.2} s: {:.2} µs per delivered event",
        cpu.as_secs_f64(),
        cpu.as_secs_f64() * 1e6 / delivered
    );
    Ok(())
}

type Readers = tokio::task::JoinSet<anyhow::Result<Histogram<u64>>>;

/// `subscribers` subscriptions to the session, each synced before the next opens,
/// each reading `expected` events and recording their latency.
async fn subscribe(
    clients: &[Client],
    subscribers: usize,
    expected: usize,
) -> anyhow::Result<Readers> {
    let mut readers = tokio::task::JoinSet::new();
    for i in 0..subscribers {
        let connection = i % clients.len();
        let mut client = clients[connection].clone();
        let synced = async {
            let mut events = client.subscribe_session(SESSION).await?;
            loop {
                match events.next().await {
                    Some(Ok(Event::Synced { .. })) => return Ok(events),
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return Err(anyhow::Error::from(e)),
                    None => bail!("a subscription ended before synced"),
                }
            }
        };
        let mut events = tokio::time::timeout(STEP, synced)
            .await
            .with_context(|| format!("subscriber {i} was not synced within {STEP:?}"))?
            .with_context(|| format!("subscriber {i}"))?;
        readers.spawn(async move {
            let mut latency = new_histogram();
            let mut seen = 0;
            while seen < expected {
                let event = match events.next().await {
                    Some(Ok(event)) => event,
                    Some(Err(e)) => return Err(anyhow::Error::from(e)),
                    None => bail!("a subscription ended after {seen} events"),
                };
                let stamped = match &event {
                    Event::Requested { requested, .. } => requested.requested_at,
                    Event::Resolved { resolved, .. } => resolved.resolved_at,
                    Event::Reset => bail!("a subscriber fell behind and was reset"),
                    _ => continue,
                };
                let sent = stamped
                    .and_then(|t| SystemTime::try_from(t).ok())
                    .context("an event without its timestamp")?;
                let delay = SystemTime::now().duration_since(sent).unwrap_or_default();
                latency.saturating_record(delay.as_micros() as u64);
                seen += 1;
            }
            anyhow::Ok(latency)
        });
    }

    Ok(readers)
}

/// `asks` asks made one after the other, each cancelled once it is requested.
async fn drive(clients: &[Client], asks: usize) -> anyhow::Result<()> {
    let asker = clients[0].clone();
    let mut canceller = clients[1 % clients.len()].clone();
    let mut watch = canceller.subscribe_session(SESSION).await?;
    for n in 1..=asks {
        // The client's retry rule carries the ask over a moment of unavailability.
        let ask = Ask::new(SESSION).question(question("q", "Go?").choice("yes"));
        let mut asker = asker.clone();
        let mut call = tokio::spawn(async move { asker.ask(ask).await });
        let requested = async {
            loop {
                tokio::select! {
                    event = watch.next() => match event {
                        Some(Ok(Event::Requested { requested, .. })) => return Ok(requested.rpc_id),
                        Some(Ok(_)) => {}
                        Some(Err(e)) => return Err(anyhow::Error::from(e)),
                        None => bail!("the driver's subscription ended"),
                    },
                    ended = &mut call => bail!("ask {n} ended before it was requested: {ended:?}"),
                }
            }
        };
        let rpc_id = tokio::time::timeout(STEP, requested)
            .await
            .with_context(|| format!("ask {n} was not requested within {STEP:?}"))??;
        canceller.cancel(SESSION, &rpc_id, "").await?;
        tokio::time::timeout(STEP, call)
            .await
            .with_context(|| format!("ask {n} did not end within {STEP:?} of its cancel"))?
            .context("the asking task")?
            .err()
            .filter(|e| e.reason() == Reason::AskCancelled)
            .with_context(|| format!("ask {n} did not end ASK_CANCELLED"))?;
    }
    Ok(())
}

/// The subscribers' latencies, merged once each has every event.
async fn merged(mut readers: Readers) -> anyhow::Result<Histogram<u64>> {
    let mut latency: Histogram<u64> = new_histogram();
    let merged = async {
        while let Some(reader) = readers.join_next().await {
            latency
                .add(reader??)
                .context("merging latency histograms")?;
        }
        anyhow::Ok(())
    };
    tokio::time::timeout(STEP, merged).await.with_context(|| {
        format!("subscribers still lacked events {STEP:?} after the last one was sent")
    })??;
    Ok(latency)
}
