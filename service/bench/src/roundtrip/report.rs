//! What `askgate-bench roundtrip` prints: the table of figures, their ratios, Redis's
//! commands per ask, and the figures recorded for `scripts/bench-compare.sh`.

use std::time::Duration;

use super::Figures;
use crate::{BenchBackend, nodes::backend_name};

/// Redis commands per ask, the busiest first (the ones below 0.05 per ask left out).
fn print_redis_commands(results: &[Figures]) {
    for f in results {
        let Some(commands) = &f.redis_commands else {
            continue;
        };
        let total: f64 = commands.values().sum();
        let mut busiest: Vec<_> = commands.iter().filter(|(_, n)| **n >= 0.05).collect();
        busiest.sort_by(|a, b| b.1.total_cmp(a.1));
        let listed: Vec<String> = busiest
            .iter()
            .map(|(name, n)| format!("{name} {n:.2}"))
            .collect();
        println!(
            "Redis commands per ask, {} with {} nodes at concurrency {} (INFO commandstats): {total:.1} ({})",
            backend_name(f.backend),
            f.nodes,
            f.concurrency,
            listed.join(", ")
        );
        if let Some(cpu) = f.redis_cpu {
            let busiest = match cpu.servers {
                1 => String::new(),
                n => format!(
                    " over {n} servers, the busiest {:.0} µs",
                    cpu.busiest.as_secs_f64() * 1e6
                ),
            };
            println!(
                "Redis CPU per ask, {} with {} nodes at concurrency {} (INFO cpu): {:.0} µs{busiest}",
                backend_name(f.backend),
                f.nodes,
                f.concurrency,
                cpu.total.as_secs_f64() * 1e6
            );
        }
    }
}

pub(super) fn print_table(results: &[Figures]) {
    let ms = |d: Duration| format!("{:.2}", d.as_secs_f64() * 1000.0);
    println!(
        "{:<12} {:>5} {:>4} {:>9} {:>8} {:>8} {:>9} {:>8} {:>8} {:>9} {:>9}",
        "backend",
        "nodes",
        "conc",
        "asks/s",
        "p50 ms",
        "p99 ms",
        "checks/s",
        "p50 ms",
        "p99 ms",
        "rate/chk",
        "p50/chk"
    );
    for f in results {
        println!(
            "{:<12} {:>5} {:>4} {:>9.0} {:>8} {:>8} {:>9.0} {:>8} {:>8} {:>8.2}x {:>8.2}x",
            backend_name(f.backend),
            f.nodes,
            f.concurrency,
            f.asks.per_sec,
            ms(f.asks.p(0.50)),
            ms(f.asks.p(0.99)),
            f.checks.per_sec,
            ms(f.checks.p(0.50)),
            ms(f.checks.p(0.99)),
            f.asks.per_sec / f.checks.per_sec,
            f.asks.p(0.50).as_secs_f64() / f.checks.p(0.50).as_secs_f64(),
        );
    }
    println!(
        "CPU per call (µs), servers and this load generator (askers and bot):\n{:<12} {:>5} {:>4} {:>11} {:>11} {:>9} {:>11} {:>11} {:>9}",
        "backend",
        "nodes",
        "conc",
        "server/ask",
        "server/chk",
        "ratio",
        "client/ask",
        "client/chk",
        "ratio"
    );
    for f in results {
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        let ratio = |a: Duration, b: Duration| us(a) / us(b).max(f64::MIN_POSITIVE);
        let (ask, check) = (f.asks.cpu, f.checks.cpu);
        println!(
            "{:<12} {:>5} {:>4} {:>11.0} {:>11.0} {:>8.2}x {:>11.0} {:>11.0} {:>8.2}x",
            backend_name(f.backend),
            f.nodes,
            f.concurrency,
            us(ask.server),
            us(check.server),
            ratio(ask.server, check.server),
            us(ask.client),
            us(check.client),
            ratio(ask.client, check.client),
        );
    }
    record_figures(results);
    print_ratios(results);
    print_redis_commands(results);
}

/// Each run's figures for `--figures` (scripts/bench-compare.sh).
fn record_figures(results: &[Figures]) {
    use crate::figures::{Better::*, record};
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    for f in results {
        let at = format!("{} c={}", backend_name(f.backend), f.concurrency);
        record(&format!("{at} asks/s"), f.asks.per_sec, "/s", Higher);
        record(&format!("{at} p50"), ms(f.asks.p(0.50)), "ms", Lower);
        record(&format!("{at} p99"), ms(f.asks.p(0.99)), "ms", Lower);
        record(
            &format!("{at} server CPU per ask"),
            us(f.asks.cpu.server),
            "µs",
            Lower,
        );
        record(
            &format!("{at} health Checks/s"),
            f.checks.per_sec,
            "/s",
            Higher,
        );
        record(
            &format!("{at} asks/s over Checks/s"),
            f.asks.per_sec / f.checks.per_sec,
            "x",
            Higher,
        );
        record(
            &format!("{at} server CPU per ask over a Check's"),
            us(f.asks.cpu.server) / us(f.checks.cpu.server).max(f64::MIN_POSITIVE),
            "x",
            Lower,
        );
        if let Some(commands) = &f.redis_commands {
            let total: f64 = commands.values().sum();
            record(&format!("{at} Redis commands per ask"), total, "", Lower);
        }
        if let Some(cpu) = f.redis_cpu {
            record(
                &format!("{at} Redis CPU per ask"),
                us(cpu.total),
                "µs",
                Lower,
            );
        }
    }
}

/// Each backend but memory against memory, at each concurrency, with its targets
/// (recorded for `--figures` too).
fn print_ratios(results: &[Figures]) {
    use crate::figures::{Better::*, record};
    let p50 = |f: &Figures| f.asks.p(0.50).as_secs_f64();
    for shared in results.iter().filter(|f| f.backend != BenchBackend::Memory) {
        let Some(memory) = results
            .iter()
            .find(|f| f.backend == BenchBackend::Memory && f.concurrency == shared.concurrency)
        else {
            continue;
        };
        let name = backend_name(shared.backend);
        let throughput = shared.asks.per_sec / memory.asks.per_sec;
        let at = shared.concurrency;
        record(
            &format!("{name}/memory c={at} throughput"),
            throughput,
            "x",
            Higher,
        );
        let slower_ms = (p50(shared) - p50(memory)) * 1000.0;
        record(&format!("{name}-memory c={at} p50"), slower_ms, "ms", Lower);
        match shared.backend {
            // One node on disk: under load at least half of memory's rate; one call at a
            // time at most 2 ms slower (a sync of the log per answer).
            BenchBackend::Sqlite => println!(
                "{name}/memory at concurrency {}: throughput {throughput:.2}x (target at 64: >= 0.50x), p50 {:+.2} ms (target at 1: <= +2.00 ms)",
                shared.concurrency, slower_ms,
            ),
            _ => println!(
                "{name}/memory at concurrency {}: throughput {throughput:.2}x (target >= 0.40x), p50 {:.2}x (target <= 3.00x)",
                shared.concurrency,
                p50(shared) / p50(memory),
            ),
        }
    }
}
