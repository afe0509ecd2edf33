//! `askgate-bench`: measured scenarios against real `askgate serve` processes, printing
//! their figures (docs/performance.md). Benchmarks print; they assert no timing (CI
//! machines are shared and noisy). The nodes are started from the `askgate` binary
//! beside this one (or `--askgate`), with their Redis (a redis-server or a Redis
//! Cluster of this machine) where the scenario needs one.
//!
//! `roundtrip`: the Ask round trip of a real deployment. Askers block in `Ask`, a bot
//! follows all sessions and answers each batch as it appears, the asker's call returns.
//! It runs on one memory node and on N nodes over Redis in the same run (askers spread
//! over every node, the bot subscribed on one node and answering through another, so
//! each round trip crosses nodes), and prints throughput, p50/p99 and their ratio.

mod capacity;
mod fanout;
mod figures;
mod nodes;
mod roundtrip;
mod soak;
mod traces;

use std::{path::PathBuf, process::ExitCode, time::Duration};

use clap::{Parser, Subcommand, ValueEnum};

use nodes::{backend_name, measured_node, new_histogram, redis_used_memory, start_one};

/// Measured scenarios against real `askgate serve` processes.
#[derive(Debug, Parser)]
#[command(name = "askgate-bench", version)]
struct Cli {
    /// The `askgate` binary whose `serve` is measured [default: the `askgate` beside
    /// this binary].
    #[arg(long, global = true, env = "ASKGATE_BIN")]
    askgate: Option<PathBuf>,
    /// Append every figure printed to FILE as well, one `name<TAB>value<TAB>unit<TAB>better`
    /// line each (for `compare` and scripts/bench-compare.sh).
    #[arg(long, global = true, value_name = "FILE")]
    figures: Option<PathBuf>,
    #[command(subcommand)]
    scenario: Scenario,
}

#[derive(Debug, Subcommand)]
enum Scenario {
    /// Ask round trips (asker, bot subscriber, answer) on one memory node and on
    /// several Redis nodes, in one run: asks/s, p50 and p99, and their ratios.
    Roundtrip(roundtrip::RoundtripArgs),
    /// What one node holds: idle RSS, start to SERVING, RSS per pending ask, a new
    /// subscriber's replay of a busy session, and the RSS once the asks resolved.
    Capacity(capacity::CapacityArgs),
    /// One session with many subscribers: delivery latency of each event and the
    /// server's CPU time per delivered event.
    Fanout(fanout::FanoutArgs),
    /// A steady load for minutes: asks waiting with churn and subscribers that
    /// reconnect and resume; the node's RSS and task count every interval.
    Soak(soak::SoakArgs),
    /// Two builds side by side: the median of each figure over the runs recorded with
    /// `--figures` in one directory per build, both ranges and their ratio.
    Compare(figures::CompareArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BenchBackend {
    Memory,
    /// One node writing through to a SQLite store in a data directory of the run's.
    Sqlite,
    Redis,
    /// A Redis primary with one replica started for the run, every acknowledging write
    /// waiting for the replica (`--redis-wait-replicas 1`).
    RedisWait,
    /// A Redis Cluster of three shards started for the run (`redis-cli` creates it).
    Cluster,
    /// A Redis Cluster of three shards, each a primary with one replica, every
    /// acknowledging write waiting for its shard's replica (`--redis-wait-replicas 1`).
    ClusterWait,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    // Every scenario but `compare` drives askgate nodes.
    if !matches!(cli.scenario, Scenario::Compare(_)) {
        let chosen = nodes::use_askgate(cli.askgate)
            .and_then(|()| cli.figures.as_deref().map_or(Ok(()), figures::record_to));
        if let Err(e) = chosen {
            eprintln!("askgate-bench: {e:#}");
            return ExitCode::from(64);
        }
    }
    let outcome = match cli.scenario {
        Scenario::Roundtrip(args) => roundtrip::run(args).await,
        Scenario::Capacity(args) => capacity::run(args).await,
        Scenario::Fanout(args) => fanout::run(args).await,
        Scenario::Soak(args) => soak::run(args).await,
        Scenario::Compare(args) => figures::compare(args),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("askgate-bench: bench failed: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// A duration flag (`30s`, `10m`).
fn parse_duration(value: &str) -> Result<Duration, String> {
    humantime::parse_duration(value).map_err(|e| e.to_string())
}
