//! `askgate-bench roundtrip`: the Ask round trip on one memory node and on several
//! Redis nodes (see the crate's documentation).

use std::{
    collections::BTreeMap,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use askgate_client::{Ask, Client, Event, answer, question};
use askgate_testing::ServeProcess;
use clap::Args;
use hdrhistogram::Histogram;
use tokio_stream::StreamExt;
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

mod report;

use crate::{
    BenchBackend,
    nodes::{
        WAIT_ARGS, commandstats, new_histogram, redis_cpu, redis_nodes, start_node, start_redis,
        start_redis_check,
    },
};

#[derive(Debug, Args)]
pub struct RoundtripArgs {
    /// Round trips measured per backend (after a warm-up of a tenth as many).
    #[arg(long, default_value_t = 5000)]
    pub asks: usize,
    /// Asks in flight at once: one run per value.
    #[arg(long, value_delimiter = ',', default_value = "1,64")]
    pub concurrency: Vec<usize>,
    /// Backends to measure, in this order (`cluster` too); each other backend's ratio
    /// line compares it with memory.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "memory,sqlite,redis"
    )]
    pub backends: Vec<BenchBackend>,
    /// `askgate serve` nodes sharing Redis in the redis run.
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Redis to use (it should be empty); default: a `redis-server` of this machine
    /// started on a free port for the run.
    #[arg(long)]
    pub redis_url: Option<String>,
    /// Tracing on: every node exports every span (`--otlp-endpoint`, 100% sampled) to
    /// an OTLP sink in this process (docs/performance.md, "Traces").
    #[arg(long)]
    pub traces: bool,
    /// Every ask carries an action (`deploy`, with its arguments), which a tenant's
    /// policy judges (docs/policy.md); with `--policies`, the tenant has that many.
    #[arg(long)]
    pub action: bool,
    /// The tenant's policy set: this many asking permits, each reading the action's
    /// arguments, spread over `--policy-actions` actions; of the asked action's, the
    /// last matches every ask (so each ask is judged by all of them, then asked).
    /// Implies `--action`.
    #[arg(long, default_value_t = 0)]
    pub policies: usize,
    /// The actions the policies name, one of them the asked one: 1 puts every policy
    /// on the asked action (the worst case: a node judges an ask by the policies of
    /// its action only).
    #[arg(long, default_value_t = 10)]
    pub policy_actions: usize,
}

/// A set of `count` asking permits that each read the action's arguments, spread over
/// `actions` actions (`deploy`, the bench's, and `tool-1`, `tool-2`, ...); the last
/// `deploy` one matches the bench's asks.
fn policy_set(count: usize, actions: usize) -> String {
    let actions = actions.max(1);
    let last_deploy = (count.saturating_sub(1) / actions) * actions;
    (0..count)
        .map(|i| {
            let action = match i % actions {
                0 => "deploy".to_owned(),
                n => format!("tool-{n}"),
            };
            let service = match i == last_deploy {
                true => "api".to_owned(),
                false => format!("svc-{i}"),
            };
            format!(
                "@id(\"p{i}\") @decision(\"ask\")\npermit(principal, action == Action::\"{action}\", \
                 resource)\nwhen {{ context.arguments has service && \
                 context.arguments.service == \"{service}\" }};\n"
            )
        })
        .collect()
}

/// What one load measured: calls per second and the latency of each call.
struct Load {
    per_sec: f64,
    latency: Histogram<u64>,
    /// CPU time per call: the servers' and this process's (the load generator's).
    cpu: Cpu,
}

#[derive(Default, Clone, Copy)]
struct Cpu {
    server: Duration,
    client: Duration,
}

impl Cpu {
    /// The CPU the nodes and this process have used so far.
    fn now(nodes: &[ServeProcess]) -> anyhow::Result<Self> {
        let mut server = Duration::ZERO;
        for node in nodes {
            server += node.cpu()?;
        }
        let client = askgate_testing::process_cpu(std::process::id())?;
        Ok(Self { server, client })
    }

    /// The CPU used since `earlier`, per one of `calls`.
    fn per_call_since(&self, earlier: &Cpu, calls: usize) -> Cpu {
        let calls = calls.max(1) as u32;
        Cpu {
            server: self.server.saturating_sub(earlier.server) / calls,
            client: self.client.saturating_sub(earlier.client) / calls,
        }
    }
}

impl Load {
    fn p(&self, quantile: f64) -> Duration {
        Duration::from_micros(self.latency.value_at_quantile(quantile))
    }
}

/// What one backend measured at one concurrency: the round trips, and health Checks
/// against the same nodes with the same settings (the transport's baseline).
struct Figures {
    backend: BenchBackend,
    nodes: usize,
    concurrency: usize,
    asks: Load,
    checks: Load,
    /// On Redis (a cluster's shards together): the commands it ran per ask during the
    /// measured asks, by name.
    redis_commands: Option<BTreeMap<String, f64>>,
    /// On Redis: the CPU it used per ask then.
    redis_cpu: Option<RedisCpu>,
}

/// Redis's CPU per ask: its servers' together, and the busiest one's (on a cluster the
/// shard with the tenant's keys does a part of every ask of the tenant).
#[derive(Clone, Copy)]
struct RedisCpu {
    total: Duration,
    busiest: Duration,
    servers: usize,
}

pub async fn run(args: RoundtripArgs) -> anyhow::Result<()> {
    if args.asks == 0 || args.nodes == 0 || args.concurrency.contains(&0) {
        bail!("--asks, --concurrency and --nodes must be at least 1");
    }
    println!(
        "askgate-bench roundtrip: {} asks per backend and concurrency (+{} warm-up), then as many health Checks",
        args.asks,
        warmup(args.asks)
    );
    let sink = match args.traces {
        true => Some(crate::traces::Sink::start().await?),
        false => None,
    };
    let traced = sink.as_ref().map(|s| s.node_args()).unwrap_or_default();
    let traced: Vec<&str> = traced.iter().map(String::as_str).collect();
    let mut results = Vec::new();
    for backend in &args.backends {
        let _own_redis: Box<dyn std::any::Any>;
        let _data_dir: crate::nodes::DataDir;
        // The Redis servers whose commands and CPU are counted (a cluster's shards).
        let mut redis_urls: Vec<String> = Vec::new();
        let nodes = match backend {
            BenchBackend::Memory => vec![start_node(&traced).await?],
            BenchBackend::Sqlite => {
                let dir = crate::nodes::DataDir::new()?;
                let args = dir.args();
                let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
                args.extend(&traced);
                let node = start_node(&args).await?;
                _data_dir = dir;
                vec![node]
            }
            BenchBackend::Redis => {
                let url = match &args.redis_url {
                    Some(url) => url.clone(),
                    None => {
                        let redis = start_redis().await?;
                        let url = redis.url.clone();
                        _own_redis = Box::new(redis);
                        url
                    }
                };
                redis_urls = vec![url.clone()];
                redis_nodes(&url, false, args.nodes, &traced).await?
            }
            BenchBackend::RedisWait => {
                start_redis_check().await?;
                let redis = askgate_testing::RedisFailover::start(1).await;
                let url = redis.servers[0].url.clone();
                redis_urls = vec![url.clone()];
                let wait: Vec<&str> = WAIT_ARGS.iter().chain(&traced).copied().collect();
                let nodes = redis_nodes(&url, false, args.nodes, &wait).await?;
                _own_redis = Box::new(redis);
                nodes
            }
            BenchBackend::Cluster => {
                start_redis_check().await?;
                let cluster = askgate_testing::RedisCluster::start(3).await;
                redis_urls = crate::nodes::redis_urls(&cluster);
                let nodes = redis_nodes(&cluster.url, true, args.nodes, &traced).await?;
                _own_redis = Box::new(cluster);
                nodes
            }
            BenchBackend::ClusterWait => {
                start_redis_check().await?;
                let cluster = crate::nodes::replicated_cluster().await;
                let wait: Vec<&str> = WAIT_ARGS.iter().chain(&traced).copied().collect();
                let nodes = redis_nodes(&cluster.url, true, args.nodes, &wait).await?;
                _own_redis = Box::new(cluster);
                nodes
            }
        };
        let action = args.action || args.policies > 0;
        if args.policies > 0 {
            let mut admin = Client::connect(nodes[0].url.clone()).await?;
            admin
                .put_policies(askgate_client::proto::PutPoliciesRequest {
                    text: policy_set(args.policies, args.policy_actions),
                    ..Default::default()
                })
                .await
                .context("putting the bench's policy set failed")?;
        }
        for &concurrency in &args.concurrency {
            let redis = &redis_urls;
            let run = Run {
                backend: *backend,
                asks: args.asks,
                concurrency,
                action,
            };
            results.push(measure(run, &nodes, redis).await?);
        }
    }
    report::print_table(&results);
    if let Some(sink) = sink {
        // What is still batched in the nodes went with them: a lower bound.
        println!("traces: {} spans received by the OTLP sink", sink.spans());
    }
    Ok(())
}

fn warmup(asks: usize) -> usize {
    (asks / 10).max(1)
}

/// One measured run's settings.
#[derive(Clone, Copy)]
struct Run {
    backend: BenchBackend,
    asks: usize,
    concurrency: usize,
    /// Each ask carries an action.
    action: bool,
}

/// Warm-up, then `asks` round trips over `nodes`, then as many health Checks.
async fn measure(run: Run, nodes: &[ServeProcess], redis: &[String]) -> anyhow::Result<Figures> {
    let Run {
        backend,
        asks,
        concurrency,
        action,
    } = run;
    let mut clients = Vec::new();
    let mut health = Vec::new();
    for node in nodes {
        // Two connections per node, as a pool of agent workers would have.
        for _ in 0..2 {
            clients.push(Client::connect(node.url.clone()).await?);
            let channel = tonic::transport::Endpoint::from_shared(node.url.clone())?
                .connect()
                .await?;
            health.push(HealthClient::new(channel));
        }
    }
    // The bot follows every session on one node and answers through another.
    let watcher = clients[2 % clients.len()].clone();
    let answerer = clients[(2 * nodes.len().min(2)) % clients.len()].clone();
    let bot = Bot::start(watcher, answerer).await?;
    let clients = Arc::new(clients);
    let ask = move |worker: usize| {
        let mut client = clients[worker % clients.len()].clone();
        async move {
            let mut ask = Ask::new(&format!("bench-{worker}"))
                .question(question("q", "Proceed?").choice("yes").choice("no"));
            if action {
                ask = ask.action(
                    "deploy",
                    r#"{"service":"api","env":"prod","version":"1.4.2"}"#,
                );
            }
            client.ask(ask).await.context("an ask failed")?;
            anyhow::Ok(())
        }
    };
    let ask = Arc::new(ask);
    run_load(warmup(asks), concurrency, ask.clone()).await?;
    let redis_before = redis_usage(redis).await?;
    let before = Cpu::now(nodes)?;
    let mut asks = run_load(asks, concurrency, ask).await?;
    asks.cpu = Cpu::now(nodes)?.per_call_since(&before, asks.latency.len() as usize);
    let (redis_commands, redis_cpu) = match redis_before {
        Some(before) => {
            let after = redis_usage(redis).await?.unwrap_or_default();
            let (commands, cpu) = after.per_ask_since(&before, asks.latency.len());
            (Some(commands), Some(cpu))
        }
        None => (None, None),
    };
    bot.stop();
    let health = Arc::new(health);
    let check = move |worker: usize| {
        let mut health = health[worker % health.len()].clone();
        async move {
            let request = HealthCheckRequest {
                service: String::new(),
            };
            health
                .check(request)
                .await
                .context("a health check failed")?;
            anyhow::Ok(())
        }
    };
    let before = Cpu::now(nodes)?;
    let mut checks = run_load(asks.latency.len() as usize, concurrency, Arc::new(check)).await?;
    checks.cpu = Cpu::now(nodes)?.per_call_since(&before, checks.latency.len() as usize);
    Ok(Figures {
        backend,
        nodes: nodes.len(),
        concurrency,
        asks,
        checks,
        redis_commands,
        redis_cpu,
    })
}

/// What the Redis servers of a run have done so far, together.
#[derive(Default)]
struct RedisUsage {
    /// Calls of each command (`INFO commandstats`).
    commands: BTreeMap<String, u64>,
    /// CPU seconds (`INFO cpu`) of each server.
    cpu_each: Vec<f64>,
}

impl RedisUsage {
    /// The commands (by name) and the CPU per ask of `asks` asks, since `before`.
    fn per_ask_since(self, before: &RedisUsage, asks: u64) -> (BTreeMap<String, f64>, RedisCpu) {
        let count = asks.max(1) as f64;
        let commands = self
            .commands
            .into_iter()
            .map(|(name, calls)| {
                let ran = calls - before.commands.get(&name).copied().unwrap_or(0);
                (name, ran as f64 / count)
            })
            .filter(|(_, per_ask)| *per_ask > 0.0)
            .collect();
        let shares: Vec<f64> = self
            .cpu_each
            .iter()
            .zip(&before.cpu_each)
            .map(|(a, b)| (a - b).max(0.0) / count)
            .collect();
        let cpu = RedisCpu {
            total: Duration::from_secs_f64(shares.iter().sum()),
            busiest: Duration::from_secs_f64(shares.iter().copied().fold(0.0, f64::max)),
            servers: shares.len(),
        };
        (commands, cpu)
    }
}

/// The usage of `urls` together; none without Redis.
async fn redis_usage(urls: &[String]) -> anyhow::Result<Option<RedisUsage>> {
    if urls.is_empty() {
        return Ok(None);
    }
    let mut usage = RedisUsage::default();
    for url in urls {
        for (name, calls) in commandstats(url).await? {
            *usage.commands.entry(name).or_default() += calls;
        }
        usage.cpu_each.push(redis_cpu(url).await?);
    }
    Ok(Some(usage))
}

/// `total` calls made by `concurrency` workers (`call(worker)` makes one), each worker
/// waiting for its call to end before the next: calls per second and their latency.
async fn run_load<C, F>(total: usize, concurrency: usize, call: Arc<C>) -> anyhow::Result<Load>
where
    C: Fn(usize) -> F + Send + Sync + 'static,
    F: std::future::Future<Output = anyhow::Result<()>> + Send + 'static,
{
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut workers = Vec::new();
    for worker in 0..concurrency {
        let (next, call) = (next.clone(), call.clone());
        workers.push(tokio::spawn(async move {
            let mut latency = new_histogram();
            while next.fetch_add(1, Ordering::Relaxed) < total {
                let call_started = Instant::now();
                call(worker).await?;
                latency.saturating_record(call_started.elapsed().as_micros() as u64);
            }
            anyhow::Ok(latency)
        }));
    }
    let mut latency = new_histogram();
    for worker in workers {
        latency
            .add(worker.await??)
            .context("merging latency histograms")?;
    }
    Ok(Load {
        per_sec: total as f64 / started.elapsed().as_secs_f64(),
        latency,
        cpu: Cpu::default(),
    })
}

/// Answers every batch of every session with its first options, as `askgate bot`.
struct Bot {
    task: tokio::task::JoinHandle<()>,
}

impl Bot {
    async fn start(mut watcher: Client, answerer: Client) -> anyhow::Result<Self> {
        let mut events = watcher.subscribe_all().await?;
        loop {
            match events.next().await {
                Some(Ok(Event::Synced { .. })) => break,
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e.into()),
                None => bail!("the bot's subscription ended before synced"),
            }
        }
        let task = tokio::spawn(async move {
            while let Some(Ok(event)) = events.next().await {
                let Event::Requested { requested, .. } = event else {
                    continue;
                };
                let mut answerer = answerer.clone();
                tokio::spawn(async move {
                    let answers = requested
                        .questions
                        .iter()
                        .map(|q| match q.options.first() {
                            Some(first) => answer::select(&q.id, [first.label.as_str()]),
                            None => answer::skip(&q.id),
                        })
                        .collect();
                    // A lost race (NOT_PENDING) is not the bench's concern.
                    let _ = answerer
                        .answer(&requested.session_id, &requested.rpc_id, answers)
                        .await;
                });
            }
        });
        Ok(Self { task })
    }

    fn stop(self) {
        self.task.abort();
    }
}
