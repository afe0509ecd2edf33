//! Support for tests and benchmarks: real `redis-server`s, Redis Clusters and Redis
//! primaries with replicas and Sentinels to point a Redis backend at, and `askgate serve` as a child process.

use std::{path::PathBuf, sync::Arc, time::Duration};

mod sentinel;
mod toxiproxy;

pub use sentinel::{MASTER as SENTINEL_MASTER, RedisFailover};
pub use toxiproxy::Toxiproxy;

/// A loopback port free a moment ago.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Sends `SIG<name>` to `pids` (with kill(1): no unsafe code here).
fn signal(name: &str, pids: &[u32]) {
    if pids.is_empty() {
        return;
    }
    let status = std::process::Command::new("kill")
        .arg(format!("-{name}"))
        .args(pids.iter().map(u32::to_string))
        .status()
        .expect("running kill");
    assert!(status.success(), "kill -{name} {pids:?} failed: {status}");
}

/// A real `redis-server` on a free loopback port in a temporary directory; stopped (and
/// its directory removed) when dropped.
pub struct RedisServer {
    child: std::process::Child,
    dir: PathBuf,
    port: u16,
    /// Flags besides the port and the directory, kept for [`RedisServer::start_again`].
    flags: Vec<String>,
    tls: bool,
    /// `redis://127.0.0.1:<port>/`, or `rediss://` when started with TLS.
    pub url: String,
    /// The CA to trust, when started with TLS.
    pub ca_pem: Option<Vec<u8>>,
}

/// A certificate and key (PEM files) for `redis-server --tls-port`, and the CA (PEM)
/// that issued the certificate.
pub struct RedisTls {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca_pem: Vec<u8>,
}

fn flags(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

impl RedisServer {
    /// Starts one and waits (at most 10 s) until it answers PING. Panics with a hint
    /// when `redis-server` is missing: `scripts/test.sh` installs it.
    pub async fn start() -> Self {
        Self::start_with(flags(&["--appendonly", "no"]), None).await
    }

    /// Starts one that accepts `DEBUG` (`DEBUG SLEEP` stops it answering for a while).
    pub async fn start_debuggable() -> Self {
        Self::start_with(
            flags(&["--appendonly", "no", "--enable-debug-command", "yes"]),
            None,
        )
        .await
    }

    /// Starts one that writes every change to its append-only file before it replies
    /// (`appendfsync always`): what it acknowledged survives [`RedisServer::kill`].
    pub async fn start_durable() -> Self {
        Self::start_with(
            flags(&["--appendonly", "yes", "--appendfsync", "always"]),
            None,
        )
        .await
    }

    /// Starts one that accepts only TLS connections, with this certificate.
    pub async fn start_tls(tls: RedisTls) -> Self {
        let mut flags = flags(&["--appendonly", "no", "--tls-auth-clients", "no"]);
        for (flag, path) in [("--tls-cert-file", &tls.cert), ("--tls-key-file", &tls.key)] {
            flags.push(flag.into());
            flags.push(path.display().to_string());
        }
        Self::start_with(flags, Some(tls.ca_pem)).await
    }

    async fn start_with(flags: Vec<String>, ca_pem: Option<Vec<u8>>) -> Self {
        let tls = ca_pem.is_some();
        let scheme = if tls { "rediss" } else { "redis" };
        // A port found free may be taken (by another test's socket) before redis-server
        // binds it, or its cluster bus port (+10000) may be: then the server exits at
        // once, and it is started again on another port.
        for _ in 0..5 {
            let dir = std::env::temp_dir().join(format!("askgate-redis-{}", uuid::Uuid::new_v4()));
            std::fs::create_dir_all(&dir).expect("temp dir");
            let port = free_port();
            let mut server = Self {
                child: spawn(&dir, port, tls, &flags),
                dir,
                port,
                flags: flags.clone(),
                tls,
                url: format!("{scheme}://127.0.0.1:{port}/"),
                ca_pem: ca_pem.clone(),
            };
            if server.wait_ready().await {
                return server;
            }
            // Dropped: its directory goes with it.
        }
        panic!("redis-server exited at once five times: its ports were taken");
    }

    /// Stops the server as a crash would (SIGKILL): its data is lost, unless it was
    /// started durable.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts it again on the same port, after [`RedisServer::kill`].
    pub async fn start_again(&mut self) {
        self.child = spawn(&self.dir, self.port, self.tls, &self.flags);
        assert!(
            self.wait_ready().await,
            "redis-server exited at once on port {}",
            self.port
        );
    }

    /// Waits (at most 10 s) until it answers: true; false when it exited first (its
    /// port was taken).
    async fn wait_ready(&mut self) -> bool {
        let client = match &self.ca_pem {
            Some(ca) => redis::Client::build_with_tls(
                self.url.as_str(),
                redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(ca.clone()),
                },
            ),
            None => redis::Client::open(self.url.as_str()),
        }
        .expect("url");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(mut conn) = client.get_multiplexed_async_connection().await {
                let pong: redis::RedisResult<String> =
                    redis::cmd("PING").query_async(&mut conn).await;
                if pong.is_ok() {
                    return true;
                }
            }
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "redis-server did not answer on port {} within 10 s",
                self.port
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn spawn(dir: &std::path::Path, port: u16, tls: bool, flags: &[String]) -> std::process::Child {
    let port = port.to_string();
    let ports = match tls {
        true => ["--port", "0", "--tls-port", &port],
        false => ["--port", &port, "--tls-port", "0"],
    };
    std::process::Command::new("redis-server")
        .args(ports)
        .args(["--bind", "127.0.0.1", "--save", ""])
        .args(flags)
        .arg("--dir")
        .arg(dir)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("redis-server must be installed (scripts/test.sh installs it)")
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A real Redis Cluster: `redis-server` processes in cluster mode on free loopback
/// ports, their slots assigned by `redis-cli --cluster create`, each shard a primary
/// with as many replicas as asked. Stopped (and their directories removed) when
/// dropped.
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
    /// The nodes' URLs, comma-separated: `--redis-url` with `--redis-cluster`.
    pub url: String,
}

/// A shard whose replicas [`RedisCluster::cut_off_replicas_of`] cut off.
pub struct CutOff {
    slot: u16,
    primary: u16,
    /// Stopped until the primary is killed.
    replicas: Vec<u32>,
}

impl RedisCluster {
    /// `shards` primaries, no replicas: starts the nodes, creates the cluster and waits
    /// (at most 20 s) until every node reports it healthy.
    pub async fn start(shards: usize) -> Self {
        Self::start_replicated(shards, 0, Duration::from_secs(5)).await
    }

    /// `shards` primaries with `replicas` replicas each, which promote one of theirs
    /// once their primary has been unreachable for `node_timeout` (Redis's
    /// `cluster-node-timeout`).
    pub async fn start_replicated(shards: usize, replicas: usize, node_timeout: Duration) -> Self {
        let timeout = node_timeout.as_millis().to_string();
        let mut nodes = Vec::new();
        for _ in 0..shards * (1 + replicas) {
            let flags = flags(&[
                "--appendonly",
                "no",
                "--cluster-enabled",
                "yes",
                "--cluster-node-timeout",
                &timeout,
            ]);
            nodes.push(RedisServer::start_with(flags, None).await);
        }
        let addresses: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let created = tokio::process::Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addresses)
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .output()
            .await
            .expect("redis-cli must be installed (scripts/test.sh installs it)");
        assert!(
            created.status.success(),
            "redis-cli --cluster create failed: {}",
            String::from_utf8_lossy(&created.stderr)
        );
        let cluster = Self {
            url: addresses
                .iter()
                .map(|a| format!("redis://{a}"))
                .collect::<Vec<_>>()
                .join(","),
            nodes,
        };
        cluster.wait_healthy().await;
        if replicas > 0 {
            cluster.wait_replicated(replicas).await;
        }
        cluster
    }

    /// Kills (SIGKILL) the primary of the shard holding `key`'s slot, and waits (at
    /// most 30 s) until the surviving nodes report the cluster `ok` again with a new
    /// primary for that slot. Returns how long that took.
    pub async fn kill_primary_of(&mut self, key: &str) -> Duration {
        let cut = self.cut_off_replicas_of(key, false).await;
        self.kill_cut_off(cut).await
    }

    /// Cuts the replicas of the primary of `key`'s shard off: they are stopped
    /// (SIGSTOP) and their replication links closed, so that what the primary
    /// acknowledges from now on it alone holds, until [`Self::kill_cut_off`] kills it
    /// and lets them go on. With `cut` false, nothing is cut (the primary is only
    /// found).
    pub async fn cut_off_replicas_of(&mut self, key: &str, cut: bool) -> CutOff {
        let slot = self.slot_of(key).await;
        let primary = self.primary_port_of(slot, None).await;
        let replicas = match cut {
            true => self.replica_pids_of(primary).await,
            false => Vec::new(),
        };
        if !replicas.is_empty() {
            signal("STOP", &replicas);
            let links = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("TYPE")
                .arg("replica")
                .to_owned();
            let url = format!("redis://127.0.0.1:{primary}");
            let _: i64 = reply(&url, &links).await.expect("CLIENT KILL TYPE replica");
        }
        CutOff {
            slot,
            primary,
            replicas,
        }
    }

    /// Kills the primary of a [`CutOff`], lets its replicas go on, and waits (at most
    /// 30 s) until the surviving nodes report the cluster `ok` again with a new
    /// primary for its slot. Returns how long that took.
    pub async fn kill_cut_off(&mut self, cut: CutOff) -> Duration {
        let CutOff {
            slot,
            primary: old,
            replicas,
        } = cut;
        let victim = self
            .nodes
            .iter_mut()
            .find(|n| n.port == old)
            .expect("the primary is one of the nodes");
        victim.kill();
        signal("CONT", &replicas);
        let killed = std::time::Instant::now();
        let deadline = killed + Duration::from_secs(30);
        loop {
            let promoted = self.primary_port_of(slot, Some(old)).await;
            if promoted != old && self.state_ok(promoted).await {
                return killed.elapsed();
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the cluster did not promote a replica within 30 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The slot of `key`.
    async fn slot_of(&self, key: &str) -> u16 {
        self.query_any(redis::cmd("CLUSTER").arg("KEYSLOT").arg(key))
            .await
    }

    /// Puts the primary of `key`'s shard behind a proxy of `toxiproxy` named `name`:
    /// the cluster announces the proxy's port for it (its cluster bus keeps its own),
    /// so every client reaches that shard through the proxy. Waits (at most 20 s) until
    /// every node tells clients so.
    pub async fn announce_through(&self, key: &str, toxiproxy: &Toxiproxy, name: &str) {
        let slot = self.slot_of(key).await;
        let primary = self.primary_port_of(slot, None).await;
        let port = toxiproxy.proxy(name, &format!("127.0.0.1:{primary}")).await;
        let url = format!("redis://127.0.0.1:{primary}");
        for (setting, value) in [
            ("cluster-announce-bus-port", u32::from(primary) + 10_000),
            ("cluster-announce-port", u32::from(port)),
        ] {
            let set = redis::cmd("CONFIG")
                .arg("SET")
                .arg(setting)
                .arg(value)
                .to_owned();
            let _: String = reply(&url, &set).await.expect("CONFIG SET");
        }
        for node in &self.nodes {
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            while self.primary_port_seen_by(node, slot).await != Some(port) {
                assert!(
                    std::time::Instant::now() < deadline,
                    "waited 20 s for the cluster to announce the proxy"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }

    /// A reply from the first live node that gives one.
    async fn query_any<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> T {
        for node in &self.nodes {
            if let Ok(answer) = reply(&node.url, cmd).await {
                return answer;
            }
        }
        panic!("no node of the cluster answered");
    }

    /// The process ids of the replicas of the primary on `port`.
    async fn replica_pids_of(&self, port: u16) -> Vec<u32> {
        let mut pids = Vec::new();
        for node in &self.nodes {
            let role: Vec<redis::Value> = reply(&node.url, &redis::cmd("ROLE"))
                .await
                .unwrap_or_default();
            if let [redis::Value::BulkString(kind), _, redis::Value::Int(of), ..] = role.as_slice()
                && kind.as_slice() == b"slave"
                && *of == i64::from(port)
            {
                pids.push(node.child.id());
            }
        }
        pids
    }

    /// The port of the primary serving `slot`, as a node other than `not` sees it.
    async fn primary_port_of(&self, slot: u16, not: Option<u16>) -> u16 {
        for node in self.nodes.iter().filter(|n| Some(n.port) != not) {
            if let Some(port) = self.primary_port_seen_by(node, slot).await {
                return port;
            }
        }
        0
    }

    /// The port `node` tells clients the primary serving `slot` is on.
    async fn primary_port_seen_by(&self, node: &RedisServer, slot: u16) -> Option<u16> {
        let slots = redis::cmd("CLUSTER").arg("SLOTS").to_owned();
        let Ok(redis::Value::Array(ranges)) = reply(&node.url, &slots).await else {
            return None;
        };
        for range in ranges {
            let redis::Value::Array(range) = range else {
                continue;
            };
            let (Some(redis::Value::Int(start)), Some(redis::Value::Int(end))) =
                (range.first(), range.get(1))
            else {
                continue;
            };
            if !(*start..=*end).contains(&i64::from(slot)) {
                continue;
            }
            if let Some(redis::Value::Array(primary)) = range.get(2)
                && let Some(redis::Value::Int(port)) = primary.get(1)
            {
                return u16::try_from(*port).ok();
            }
        }
        None
    }

    /// Whether the node on `port` reports `cluster_state:ok`.
    async fn state_ok(&self, port: u16) -> bool {
        let Some(node) = self.nodes.iter().find(|n| n.port == port) else {
            return false;
        };
        let info: redis::RedisResult<String> =
            reply(&node.url, redis::cmd("CLUSTER").arg("INFO")).await;
        info.is_ok_and(|i| i.contains("cluster_state:ok"))
    }

    /// Waits (at most 20 s) until every primary has `replicas` replicas online.
    async fn wait_replicated(&self, replicas: usize) {
        self.until_every_node(
            "every primary's replicas to be online",
            redis::cmd("INFO").arg("replication"),
            |info| info.contains("role:slave") || info.matches("state=online").count() >= replicas,
        )
        .await;
    }

    async fn wait_healthy(&self) {
        self.until_every_node(
            "every node to report the cluster healthy",
            redis::cmd("CLUSTER").arg("INFO"),
            |info| info.contains("cluster_state:ok"),
        )
        .await;
    }

    /// Waits (at most 20 s) until every node's reply to `cmd` is `ready`.
    async fn until_every_node(&self, what: &str, cmd: &redis::Cmd, ready: impl Fn(&str) -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        for node in &self.nodes {
            loop {
                let answer: redis::RedisResult<String> = reply(&node.url, cmd).await;
                if answer.is_ok_and(|a| ready(&a)) {
                    break;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "waited 20 s for {what}"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// `cmd`'s reply from the Redis at `url`, on a connection of its own.
pub(crate) async fn reply<T: redis::FromRedisValue>(
    url: &str,
    cmd: &redis::Cmd,
) -> redis::RedisResult<T> {
    let client = redis::Client::open(url)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    cmd.query_async(&mut conn).await
}

/// An `askgate serve --listen 127.0.0.1:0` child process, its address read from its log;
/// killed when dropped. Its log is read away (a full pipe would block the server) and
/// echoed to stderr when `ASKGATE_ECHO_SERVE_LOG` is set.
pub struct ServeProcess {
    child: tokio::process::Child,
    pub pid: u32,
    /// When it was started (for "start to SERVING").
    pub spawned: std::time::Instant,
    /// `http://<its address>`.
    pub url: String,
    drain: tokio::task::JoinHandle<()>,
    log: Arc<parking_lot::Mutex<ServeLog>>,
}

/// What the tests may ask of a serve process's log once it is read away.
#[derive(Default)]
struct ServeLog {
    /// Bytes of the longest line so far.
    longest: usize,
    /// The last lines, each cut to [`RECENT_LINE_BYTES`].
    recent: std::collections::VecDeque<String>,
    /// Every line, while they total at most [`WHOLE_LOG_BYTES`].
    whole: String,
    /// Whether more than that was logged.
    overflowed: bool,
}

const RECENT_LINES: usize = 256;
const RECENT_LINE_BYTES: usize = 512;
const WHOLE_LOG_BYTES: usize = 8 << 20;

impl ServeLog {
    /// Keeps `line` (and echoes it to stderr when `echo`).
    fn record(&mut self, line: &str, echo: bool) {
        if echo {
            eprintln!("serve: {line}");
        }
        self.longest = self.longest.max(line.len());
        if self.recent.len() == RECENT_LINES {
            self.recent.pop_front();
        }
        let mut end = line.len().min(RECENT_LINE_BYTES);
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        self.recent.push_back(line[..end].to_owned());
        if self.whole.len() + line.len() < WHOLE_LOG_BYTES {
            self.whole.push_str(line);
            self.whole.push('\n');
        } else {
            self.overflowed = true;
        }
    }

    /// The last `lines` recent lines, one per line.
    fn tail(&self, lines: usize) -> String {
        let skip = self.recent.len().saturating_sub(lines);
        let kept: Vec<&str> = self.recent.iter().skip(skip).map(String::as_str).collect();
        kept.join("\n")
    }
}

impl ServeProcess {
    /// The address it listens on.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.url
            .trim_start_matches("http://")
            .parse()
            .expect("serve logs an address")
    }

    /// Starts `askgate serve` from the binary `askgate` with `args` added, and waits (at
    /// most 10 s) until it logs its address. The log is at `info` unless `args` give
    /// `--log`.
    pub async fn spawn(askgate: &std::path::Path, args: &[&str]) -> anyhow::Result<Self> {
        Self::spawn_within(askgate, args, Duration::from_secs(10)).await
    }

    /// [`ServeProcess::spawn`], waiting at most `within` for the address (a node on a
    /// large store loads it first).
    pub async fn spawn_within(
        askgate: &std::path::Path,
        args: &[&str],
        within: Duration,
    ) -> anyhow::Result<Self> {
        use anyhow::Context;
        use tokio::io::AsyncBufReadExt;
        let spawned = std::time::Instant::now();
        let log: &[&str] = match args.contains(&"--log") {
            true => &[],
            false => &["--log", "info"],
        };
        let mut child = tokio::process::Command::new(askgate)
            .args(["serve", "--listen", "127.0.0.1:0"])
            // Tests choose their engine: memory unless `args` say otherwise.
            .env("ASKGATE_BACKEND", "memory")
            .args(log)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("starting askgate serve")?;
        let stderr = child.stderr.take().context("serve's stderr")?;
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        let echo = std::env::var_os("ASKGATE_ECHO_SERVE_LOG").is_some();
        let log = Arc::new(parking_lot::Mutex::new(ServeLog::default()));
        let addr = tokio::time::timeout(within, async {
            while let Some(line) = lines.next_line().await? {
                log.lock().record(&line, echo);
                if let Some((_, rest)) = line.split_once("local_addr=") {
                    let addr = rest.split_whitespace().next().unwrap_or_default();
                    return Ok(addr.to_owned());
                }
            }
            anyhow::bail!("askgate serve exited before listening")
        })
        .await
        .with_context(|| format!("askgate serve did not start within {within:?}"))
        .and_then(|read| read)
        .map_err(|e| anyhow::anyhow!("{e:#}; its log ends:\n{}", log.lock().tail(20)))?;
        let kept = log.clone();
        let drain = tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                kept.lock().record(&line, echo);
            }
        });
        Ok(Self {
            pid: child.id().context("serve's pid")?,
            child,
            spawned,
            url: format!("http://{addr}"),
            drain,
            log,
        })
    }

    /// Bytes of the longest line the process has logged so far.
    pub fn longest_log_line(&self) -> usize {
        self.log.lock().longest
    }

    /// Whether one of its recent log lines contains `needle`.
    pub fn logged(&self, needle: &str) -> bool {
        self.log
            .lock()
            .recent
            .iter()
            .any(|line| line.contains(needle))
    }

    /// The value of `field` (`field=value`) on the first recent log line containing
    /// `message`: for example where `--metrics 127.0.0.1:0` listens.
    pub fn logged_field(&self, message: &str, field: &str) -> Option<String> {
        let key = format!("{field}=");
        self.log
            .lock()
            .recent
            .iter()
            .filter(|line| line.contains(message))
            .find_map(|line| {
                let (_, rest) = line.split_once(&key)?;
                Some(rest.split_whitespace().next()?.to_owned())
            })
    }

    /// Stops the process (SIGKILL) and reads its log to the end: everything it logged,
    /// `None` when that passed 8 MiB.
    pub async fn kill_and_read_log(&mut self) -> Option<String> {
        let _ = self.child.kill().await;
        let _ = (&mut self.drain).await;
        let log = self.log.lock();
        (!log.overflowed).then(|| log.whole.clone())
    }

    /// Waits for the process to exit.
    pub async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        self.child.wait().await
    }

    /// Resident memory, in bytes (`VmRSS` of /proc).
    pub fn rss(&self) -> anyhow::Result<u64> {
        use anyhow::Context;
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid))?;
        let kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .context("no VmRSS in /proc status")?;
        Ok(kib * 1024)
    }

    /// CPU time used so far (user and system).
    pub fn cpu(&self) -> anyhow::Result<Duration> {
        process_cpu(self.pid)
    }
}

/// CPU time process `pid` has used so far (user and system), from /proc (in clock
/// ticks of 10 ms, Linux's USER_HZ).
pub fn process_cpu(pid: u32) -> anyhow::Result<Duration> {
    use anyhow::Context;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The fields after the command name (which may hold spaces), from `state` on.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .context("malformed /proc stat")?
        .1
        .split_whitespace()
        .collect();
    let ticks = |i: usize| -> anyhow::Result<u64> {
        Ok(fields.get(i).context("short /proc stat")?.parse()?)
    };
    Ok(Duration::from_millis((ticks(11)? + ticks(12)?) * 10))
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        self.drain.abort();
    }
}

/// A fresh directory for a test's or a benchmark's files, removed when dropped.
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    pub fn new() -> Self {
        let name = format!("askgate-test-{}", uuid::Uuid::new_v4().simple());
        let path = std::env::temp_dir().join(name);
        std::fs::create_dir_all(&path).expect("create a temp dir");
        Self(path)
    }

    /// Writes `contents` to `name` in the directory and returns its path.
    pub fn file(&self, name: &str, contents: impl AsRef<[u8]>) -> std::path::PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, contents).expect("write a temp file");
        path
    }
}

impl Default for TempDir {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
