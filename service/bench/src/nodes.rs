//! The processes a scenario measures: `askgate serve` nodes, and the Redis they use.

use std::{collections::BTreeMap, path::PathBuf, process::Stdio, sync::OnceLock};

use anyhow::{Context, bail};
use askgate_testing::{RedisServer, ServeProcess};
use hdrhistogram::Histogram;

use crate::BenchBackend;

/// The `askgate` binary the nodes run.
static ASKGATE: OnceLock<PathBuf> = OnceLock::new();

/// Sets the `askgate` binary: `chosen`, else the one beside this binary.
pub fn use_askgate(chosen: Option<PathBuf>) -> anyhow::Result<()> {
    let path = match chosen {
        Some(path) => path,
        None => std::env::current_exe()
            .context("locating askgate-bench")?
            .with_file_name(format!("askgate{}", std::env::consts::EXE_SUFFIX)),
    };
    if !path.is_file() {
        bail!(
            "no askgate binary at {}: build it (cargo build --release -p askgate-service) or pass --askgate",
            path.display()
        );
    }
    let _ = ASKGATE.set(path);
    Ok(())
}

/// A redis-server for the run, with a clear error when the machine has none.
pub async fn start_redis() -> anyhow::Result<RedisServer> {
    start_redis_check().await?;
    Ok(RedisServer::start().await)
}

/// Whether this machine has `redis-server` and `redis-cli` (which creates clusters).
pub async fn start_redis_check() -> anyhow::Result<()> {
    for tool in ["redis-server", "redis-cli"] {
        let found = tokio::process::Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .await;
        if !found.is_ok_and(|s| s.success()) {
            bail!(
                "{tool} is not installed: install it (apt-get install redis-server) or pass --redis-url"
            );
        }
    }
    Ok(())
}

/// The askgate binary the bench drives.
pub fn askgate() -> anyhow::Result<&'static std::path::Path> {
    Ok(ASKGATE.get().context("the askgate binary was not chosen")?)
}

/// `askgate serve` from the chosen binary, with the per-tenant Ask rate lifted (the
/// bench's askers share one tenant) and `extra` flags.
pub async fn start_node(extra: &[&str]) -> anyhow::Result<ServeProcess> {
    start_node_within(extra, std::time::Duration::from_secs(10)).await
}

/// [`start_node`], waiting at most `within` for it to listen.
pub async fn start_node_within(
    extra: &[&str],
    within: std::time::Duration,
) -> anyhow::Result<ServeProcess> {
    let askgate = askgate()?;
    let mut args = vec!["--ask-rate", "1000000000", "--ask-burst", "1000000000"];
    args.extend(extra);
    ServeProcess::spawn_within(askgate, &args, within).await
}

/// The flags of a node the bench watches: its metrics listener on a port of its own
/// choosing (RSS aside, the figures come from there; [`metrics_addr`] says where) and
/// pending caps the scenario's load fits in.
pub fn measured_node<'a>(per_session: &'a str, per_tenant: &'a str) -> Vec<&'a str> {
    vec![
        "--metrics",
        "127.0.0.1:0",
        "--max-pending-per-session",
        per_session,
        "--max-pending-per-tenant",
        per_tenant,
    ]
}

/// Where the metrics listener of a node started with [`measured_node`] listens, read
/// from its log (a port chosen here and passed in could be taken by another process
/// before the node binds it).
pub fn metrics_addr(node: &ServeProcess) -> anyhow::Result<String> {
    node.logged_field("metrics listening", "addr")
        .context("the node did not log its metrics address")
}

/// One node on `backend` with `extra` flags; for Redis (or a cluster) also the Redis it
/// uses, started here and stopped when the second value drops.
pub async fn start_one(
    backend: BenchBackend,
    extra: &[&str],
) -> anyhow::Result<(ServeProcess, Box<dyn std::any::Any>)> {
    let redis_args = |url: &str, cluster: bool| {
        let mut args = vec!["--backend", "redis", "--redis-url"];
        args.push(url);
        if cluster {
            args.push("--redis-cluster");
        }
        args.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    let (mut args, redis): (Vec<String>, Box<dyn std::any::Any>) = match backend {
        BenchBackend::Memory => (Vec::new(), Box::new(())),
        BenchBackend::Sqlite => {
            let dir = DataDir::new()?;
            (dir.args(), Box::new(dir))
        }
        BenchBackend::Redis => {
            let redis = start_redis().await?;
            (redis_args(&redis.url, false), Box::new(redis))
        }
        BenchBackend::RedisWait => {
            start_redis_check().await?;
            let redis = askgate_testing::RedisFailover::start(1).await;
            let mut args = redis_args(&redis.servers[0].url, false);
            args.extend(WAIT_ARGS.iter().map(|a| (*a).to_owned()));
            (args, Box::new(redis))
        }
        BenchBackend::Cluster => {
            start_redis_check().await?;
            let cluster = askgate_testing::RedisCluster::start(3).await;
            (redis_args(&cluster.url, true), Box::new(cluster))
        }
        BenchBackend::ClusterWait => {
            start_redis_check().await?;
            let cluster = replicated_cluster().await;
            let mut args = redis_args(&cluster.url, true);
            args.extend(WAIT_ARGS.iter().map(|a| (*a).to_owned()));
            (args, Box::new(cluster))
        }
    };
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Ok((start_node(&args).await?, redis))
}

/// A sqlite node's data directory, removed when dropped.
pub struct DataDir(askgate_testing::TempDir);

impl DataDir {
    pub fn new() -> anyhow::Result<Self> {
        Ok(Self(askgate_testing::TempDir::new()))
    }

    pub fn path(&self) -> &std::path::Path {
        &self.0.0
    }

    /// `--backend sqlite --data-dir <it>`.
    pub fn args(&self) -> Vec<String> {
        vec![
            "--backend".into(),
            "sqlite".into(),
            "--data-dir".into(),
            self.path().display().to_string(),
        ]
    }

    /// The store's size: the database and its write-ahead log.
    pub fn store_bytes(&self) -> u64 {
        ["askgate.db", "askgate.db-wal"]
            .iter()
            .filter_map(|name| std::fs::metadata(self.path().join(name)).ok())
            .map(|meta| meta.len())
            .sum()
    }
}

/// The backend's name as the tables print it.
pub fn backend_name(backend: BenchBackend) -> String {
    use clap::ValueEnum;
    backend
        .to_possible_value()
        .map(|v| v.get_name().to_owned())
        .unwrap_or_default()
}

/// The flags of the `redis-wait` and `cluster-wait` nodes.
pub const WAIT_ARGS: [&str; 2] = ["--redis-wait-replicas", "1"];

/// The `cluster-wait` run's cluster: three shards, each a primary with one replica.
pub async fn replicated_cluster() -> askgate_testing::RedisCluster {
    askgate_testing::RedisCluster::start_replicated(3, 1, std::time::Duration::from_secs(5)).await
}

/// `count` nodes on Redis at `url` (a cluster's URL list with `cluster`).
pub async fn redis_nodes(
    url: &str,
    cluster: bool,
    count: usize,
    extra: &[&str],
) -> anyhow::Result<Vec<ServeProcess>> {
    let mut args = vec!["--backend", "redis", "--redis-url", url];
    if cluster {
        args.push("--redis-cluster");
    }
    args.extend(extra);
    let mut nodes = Vec::new();
    for _ in 0..count {
        nodes.push(start_node(&args).await?);
    }
    Ok(nodes)
}

/// Redis's `INFO <section>` at `url`.
pub async fn redis_info(url: &str, section: &str) -> anyhow::Result<String> {
    let client = redis::Client::open(url)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    Ok(redis::cmd("INFO")
        .arg(section)
        .query_async(&mut conn)
        .await?)
}

/// The value of the `name:value` line `name` of an `INFO` reply.
pub fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.trim().strip_prefix(name)?.strip_prefix(':'))
}

/// The CPU Redis has used so far, in seconds (`INFO cpu`: user and system).
pub async fn redis_cpu(url: &str) -> anyhow::Result<f64> {
    let info = redis_info(url, "cpu").await?;
    let field = |name: &str| {
        info_field(&info, name)
            .and_then(|v| v.parse::<f64>().ok())
            .with_context(|| format!("no {name} in INFO cpu"))
    };
    Ok(field("used_cpu_user")? + field("used_cpu_sys")?)
}

/// Whether the Redis at `url` is a primary (`INFO replication`).
pub async fn redis_is_primary(url: &str) -> anyhow::Result<bool> {
    Ok(info_field(&redis_info(url, "replication").await?, "role") == Some("master"))
}

/// How many times Redis ran each command so far (`INFO commandstats`).
pub async fn commandstats(url: &str) -> anyhow::Result<BTreeMap<String, u64>> {
    Ok(parse_commandstats(&redis_info(url, "commandstats").await?))
}

/// `cmdstat_evalsha:calls=12,usec=...` lines, by command name.
fn parse_commandstats(info: &str) -> BTreeMap<String, u64> {
    info.lines()
        .filter_map(|line| {
            let (name, fields) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = fields
                .split(',')
                .find_map(|f| f.strip_prefix("calls="))?
                .parse()
                .ok()?;
            Some((name.to_owned(), calls))
        })
        .collect()
}

/// The bytes Redis holds for its data set (`used_memory` of `INFO memory`).
pub async fn redis_used_memory(url: &str) -> anyhow::Result<u64> {
    info_field(&redis_info(url, "memory").await?, "used_memory")
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("no used_memory in {url}'s INFO memory"))
}

pub fn new_histogram() -> Histogram<u64> {
    // 1 µs to 10 minutes, 3 significant figures.
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid histogram bounds")
}

/// The URLs of every Redis server the run started (none for memory and sqlite).
pub fn redis_urls(started: &dyn std::any::Any) -> Vec<String> {
    if let Some(server) = started.downcast_ref::<askgate_testing::RedisServer>() {
        return vec![server.url.clone()];
    }
    if let Some(failover) = started.downcast_ref::<askgate_testing::RedisFailover>() {
        return failover.servers.iter().map(|s| s.url.clone()).collect();
    }
    if let Some(cluster) = started.downcast_ref::<askgate_testing::RedisCluster>() {
        return cluster.url.split(',').map(str::to_owned).collect();
    }
    Vec::new()
}
