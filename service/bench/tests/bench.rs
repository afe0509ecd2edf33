//! The scenarios run end to end against real nodes, small, and print their figures:
//! these tests check that each runs and prints what docs/performance.md reads, never a
//! timing (CI machines are shared and noisy).
//!
//! The nodes run the `askgate` binary beside `askgate-bench` in the target directory:
//! `cargo test --workspace` builds both before running any test.

use std::time::Duration;

/// Upper bound of a bench run: it starts its own Redis and nodes, and bounds each of
/// its steps itself (30 s), so a stall ends with the bench's own message rather than
/// this one.
const BENCH_WAIT: Duration = Duration::from_secs(120);

/// `askgate-bench ARGS`, with piped output, killed when dropped.
fn bench(args: &[&str]) -> tokio::process::Child {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_askgate-bench"))
        .args(args)
        .env("ASKGATE_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn askgate-bench")
}

/// Waits (at most [`BENCH_WAIT`]) for a run; its exit code, stdout and stderr.
async fn finish(child: tokio::process::Child) -> (i32, String, String) {
    let out = tokio::time::timeout(BENCH_WAIT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("timed out after {BENCH_WAIT:?} waiting for askgate-bench"))
        .expect("wait");
    (
        out.status.code().expect("exit code"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn bench_roundtrip_measures_memory_sqlite_and_three_redis_nodes_beside_health_checks() {
    let bench = bench(&["roundtrip", "--asks", "200", "--concurrency", "8"]);
    let (code, stdout, stderr) = finish(bench).await;
    assert_eq!(code, 0, "{stderr}");
    let row = |backend: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(backend))
            .unwrap_or_else(|| panic!("no {backend} row in:\n{stdout}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let (memory, sqlite, redis) = (row("memory"), row("sqlite"), row("redis"));
    let nodes = [&memory, &sqlite, &redis].map(|row| row[1].as_str());
    assert_eq!(nodes, ["1", "1", "3"], "nodes");
    for figures in [&memory, &sqlite, &redis] {
        assert_eq!(figures[2], "8", "concurrency: {stdout}");
        let asks_per_sec: f64 = figures[3].parse().expect("asks/s");
        let checks_per_sec: f64 = figures[6].parse().expect("checks/s");
        assert!(asks_per_sec > 0.0 && checks_per_sec > 0.0, "{stdout}");
    }
    for ratio in [
        "redis/memory at concurrency 8: throughput",
        "sqlite/memory at concurrency 8: throughput",
        "Redis commands per ask, redis with 3 nodes at concurrency 8",
        "Redis CPU per ask, redis with 3 nodes at concurrency 8",
    ] {
        assert!(stdout.contains(ratio), "no {ratio:?} in:\n{stdout}");
    }
}

#[tokio::test]
async fn bench_capacity_and_fanout_run_and_print_their_figures() {
    let capacity = bench(&[
        "capacity",
        "--pending",
        "300",
        "--sessions",
        "10",
        "--big",
        "50",
        "--connections",
        "4",
        "--settle",
        "1s",
    ]);
    let (code, stdout, stderr) = finish(capacity).await;
    assert_eq!(code, 0, "{stderr}");
    for line in [
        "idle RSS",
        "350 pending asks over 10 sessions",
        "synced after 50 replayed",
        "after the asks resolved",
        "after the clients' connections closed too",
    ] {
        assert!(stdout.contains(line), "no {line:?} in:\n{stdout}");
    }
    // On sqlite (a data directory of its own), with a node started on a backup; and
    // on Redis (a redis-server of its own). The fanout below too.
    for (backend, lines) in [
        (
            "sqlite",
            [
                "the store with 120 pending asks",
                "a node started on the copy: SERVING in",
                "after the asks resolved",
            ],
        ),
        (
            "redis",
            [
                "synced after 20 replayed",
                "Redis used_memory (its primaries together)",
                "after the asks resolved",
            ],
        ),
    ] {
        let small = bench(&[
            "capacity",
            "--backend",
            backend,
            "--pending",
            "100",
            "--sessions",
            "5",
            "--big",
            "20",
            "--connections",
            "2",
            "--settle",
            "1s",
        ]);
        let (code, stdout, stderr) = finish(small).await;
        assert_eq!(code, 0, "{stderr}");
        let header = format!("({backend} backend");
        for line in [header.as_str(), "120 pending asks over 5 sessions"]
            .into_iter()
            .chain(lines)
        {
            assert!(stdout.contains(line), "no {line:?} in:\n{stdout}");
        }
    }
    let fanout = bench(&[
        "fanout",
        "--subscribers",
        "20",
        "--events",
        "40",
        "--connections",
        "2",
    ]);
    let (code, stdout, stderr) = finish(fanout).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("40 events to 20 subscribers"), "{stdout}");
    assert!(stdout.contains("800 deliveries"), "{stdout}");
    assert!(stdout.contains("per delivered event"), "{stdout}");
    let on_redis = bench(&[
        "fanout",
        "--backend",
        "redis",
        "--subscribers",
        "10",
        "--events",
        "20",
        "--connections",
        "2",
    ]);
    let (code, stdout, stderr) = finish(on_redis).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("(redis backend)"), "{stdout}");
    assert!(stdout.contains("200 deliveries"), "{stdout}");
}

#[tokio::test]
async fn without_an_askgate_binary_it_says_how_to_get_one() {
    let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_askgate-bench"))
        .args(["--askgate", "/nonexistent/askgate", "fanout"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn askgate-bench");
    let (code, _, stderr) = finish(run).await;
    assert_eq!(code, 64, "{stderr}");
    assert!(
        stderr.contains("no askgate binary at /nonexistent/askgate")
            && stderr.contains("--askgate"),
        "{stderr}"
    );
}

/// `--figures` records what a run prints, and `compare` sets two directories of runs
/// side by side: here the same build twice, two runs on one side and one on the other.
#[tokio::test]
async fn recorded_figures_compare_side_by_side() {
    let dir = std::env::temp_dir().join(format!("askgate-bench-figures-{}", std::process::id()));
    let (base, head) = (dir.join("base"), dir.join("head"));
    std::fs::create_dir_all(&base).expect("base dir");
    std::fs::create_dir_all(&head).expect("head dir");
    for file in [
        base.join("run-1.tsv"),
        base.join("run-2.tsv"),
        head.join("run-1.tsv"),
    ] {
        let figures = file.to_str().expect("utf-8 path");
        let run = bench(&[
            "--figures",
            figures,
            "roundtrip",
            "--backends",
            "memory",
            "--concurrency",
            "1",
            "--asks",
            "40",
        ]);
        let (code, out, err) = finish(run).await;
        assert_eq!(code, 0, "roundtrip failed:\n{out}\n{err}");
        let text = std::fs::read_to_string(&file).expect("the figures file");
        assert!(
            text.lines().any(|l| l.starts_with("memory c=1 asks/s\t")),
            "no asks/s figure in {text}"
        );
    }
    let compared = bench(&[
        "compare",
        base.to_str().expect("utf-8"),
        head.to_str().expect("utf-8"),
        "--base-name",
        "before",
        "--head-name",
        "after",
    ]);
    let (code, out, err) = finish(compared).await;
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(code, 0, "compare failed:\n{out}\n{err}");
    assert!(
        out.starts_with("| figure | before | after | after/before | |"),
        "{out}"
    );
    let asks = out
        .lines()
        .find(|l| l.starts_with("| memory c=1 asks/s (/s) |"))
        .unwrap_or_else(|| panic!("no asks/s row in:\n{out}"));
    assert!(
        asks.contains(", 2 runs) |") && asks.contains("(1 run) |"),
        "{asks}"
    );
}

/// The script refuses what it cannot compare before it builds anything.
#[tokio::test]
async fn bench_compare_refuses_a_revision_that_is_no_commit() {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scripts/bench-compare.sh"
    );
    let run = |args: &[&str]| {
        tokio::process::Command::new("bash")
            .arg(script)
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
    };
    let out = run(&[]).await.expect("run the script");
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("usage:"));
    let out = run(&["no-such-revision"]).await.expect("run the script");
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no-such-revision is not a commit"), "{err}");
}
