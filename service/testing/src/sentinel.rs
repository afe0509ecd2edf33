//! A replicated Redis watched by Sentinels: a primary, its replicas and three
//! `redis-sentinel`s on free loopback ports, for failover tests.

use std::{path::PathBuf, time::Duration};

use crate::RedisServer;

/// The name the Sentinels know the primary by (`--redis-sentinel-master`).
pub const MASTER: &str = "askgate";

/// A primary, `replicas` replicas of it, and three Sentinels (quorum two) that fail
/// over within seconds of the primary's death. Stopped when dropped.
pub struct RedisFailover {
    /// The servers, the first one the primary at the start.
    pub servers: Vec<RedisServer>,
    sentinels: Vec<Sentinel>,
    /// The Sentinels' URLs, comma-separated: `--redis-url` with
    /// `--redis-sentinel-master` [`MASTER`].
    pub url: String,
}

struct Sentinel {
    child: std::process::Child,
    dir: PathBuf,
    url: String,
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl RedisFailover {
    /// Starts the servers and the Sentinels, and waits (at most 20 s) until every
    /// replica is in sync and every Sentinel sees them all.
    pub async fn start(replicas: usize) -> Self {
        Self::start_with(replicas, None).await
    }

    /// [`Self::start`], each replica reading the primary's stream through a proxy of
    /// `link` named `replication-<i>`: to make replication lag, or cut it.
    pub async fn start_with(replicas: usize, link: Option<&crate::Toxiproxy>) -> Self {
        let primary = RedisServer::start().await;
        let primary_port = primary.port;
        let mut servers = vec![primary];
        for i in 0..replicas {
            let port = match link {
                Some(proxy) => {
                    let upstream = format!("127.0.0.1:{primary_port}");
                    proxy.proxy(&format!("replication-{i}"), &upstream).await
                }
                None => primary_port,
            };
            let flags = crate::flags(&[
                "--appendonly",
                "no",
                "--replicaof",
                "127.0.0.1",
                &port.to_string(),
            ]);
            servers.push(RedisServer::start_with(flags, None).await);
        }
        // A Sentinel points a replica whose master address is not the primary's (one
        // reading through a proxy) at the primary itself, once the failover timeout has
        // passed since it met the replica: with proxies, that is put off for a minute.
        let failover_timeout = match link {
            Some(_) => Duration::from_secs(60),
            None => Duration::from_secs(5),
        };
        let mut sentinels = Vec::new();
        for _ in 0..3 {
            sentinels.push(Sentinel::start(primary_port, failover_timeout).await);
        }
        let failover = Self {
            url: sentinels
                .iter()
                .map(|s| s.url.clone())
                .collect::<Vec<_>>()
                .join(","),
            servers,
            sentinels,
        };
        failover.wait_synced(replicas).await;
        failover
    }

    /// Waits until the primary reports `replicas` replicas online and in sync, and
    /// each Sentinel knows all of them.
    async fn wait_synced(&self, replicas: usize) {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let primary = self.primary_url().await;
        loop {
            let info = query(&primary, redis::cmd("INFO").arg("replication")).await;
            let online = info
                .as_deref()
                .map(|i| i.matches("state=online").count())
                .unwrap_or(0);
            let mut known = true;
            for sentinel in &self.sentinels {
                let seen: redis::RedisResult<Vec<redis::Value>> = async {
                    let client = redis::Client::open(sentinel.url.as_str())?;
                    let mut conn = client.get_multiplexed_async_connection().await?;
                    redis::cmd("SENTINEL")
                        .arg("REPLICAS")
                        .arg(MASTER)
                        .query_async(&mut conn)
                        .await
                }
                .await;
                known &= seen.is_ok_and(|s| s.len() >= replicas);
            }
            if online >= replicas && known {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the replicas were not in sync, or the Sentinels did not see them, within 20 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The URL of the server the Sentinels name primary now.
    pub async fn primary_url(&self) -> String {
        for sentinel in &self.sentinels {
            let addr: redis::RedisResult<(String, u16)> = async {
                let client = redis::Client::open(sentinel.url.as_str())?;
                let mut conn = client.get_multiplexed_async_connection().await?;
                redis::cmd("SENTINEL")
                    .arg("GET-MASTER-ADDR-BY-NAME")
                    .arg(MASTER)
                    .query_async(&mut conn)
                    .await
            }
            .await;
            if let Ok((host, port)) = addr {
                return format!("redis://{host}:{port}/");
            }
        }
        panic!("no Sentinel names a primary");
    }

    /// The server the Sentinels name primary now.
    pub async fn primary(&mut self) -> &mut RedisServer {
        let url = self.primary_url().await;
        self.servers
            .iter_mut()
            .find(|s| s.url == url)
            .expect("the primary is one of the servers")
    }

    /// Kills the primary (SIGKILL) and waits (at most 30 s) until the Sentinels have
    /// promoted a replica and it accepts writes. Returns how long that took.
    pub async fn kill_primary(&mut self) -> Duration {
        let old = self.primary_url().await;
        self.primary().await.kill();
        let killed = std::time::Instant::now();
        let deadline = killed + Duration::from_secs(30);
        loop {
            let now = self.primary_url().await;
            if now != old {
                let role = query(&now, &mut redis::cmd("ROLE")).await;
                if role.is_ok() {
                    return killed.elapsed();
                }
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the Sentinels did not promote a replica within 30 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// A command's reply from the server at `url`, as text.
async fn query(url: &str, cmd: &mut redis::Cmd) -> redis::RedisResult<String> {
    let value: redis::Value = crate::reply(url, cmd).await?;
    Ok(format!("{value:?}"))
}

impl Sentinel {
    async fn start(primary_port: u16, failover_timeout: Duration) -> Self {
        for _ in 0..5 {
            let dir =
                std::env::temp_dir().join(format!("askgate-sentinel-{}", uuid::Uuid::new_v4()));
            std::fs::create_dir_all(&dir).expect("temp dir");
            let port = crate::free_port();
            // The Sentinel rewrites its configuration file: it lives in its directory.
            let conf = dir.join("sentinel.conf");
            std::fs::write(
                &conf,
                format!(
                    "port {port}\nbind 127.0.0.1\ndir {dir}\n\
                     sentinel monitor {MASTER} 127.0.0.1 {primary_port} 2\n\
                     sentinel down-after-milliseconds {MASTER} 1000\n\
                     sentinel failover-timeout {MASTER} {failover_timeout}\n\
                     sentinel parallel-syncs {MASTER} 1\n",
                    dir = dir.display(),
                    failover_timeout = failover_timeout.as_millis(),
                ),
            )
            .expect("sentinel.conf");
            let child = std::process::Command::new("redis-server")
                .arg(&conf)
                .arg("--sentinel")
                .stdout(std::process::Stdio::null())
                .spawn()
                .expect("redis-server must be installed (scripts/test.sh installs it)");
            let mut sentinel = Self {
                child,
                dir,
                url: format!("redis://127.0.0.1:{port}/"),
            };
            if sentinel.wait_ready().await {
                return sentinel;
            }
        }
        panic!("redis-sentinel exited at once five times: its ports were taken");
    }

    async fn wait_ready(&mut self) -> bool {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            if query(&self.url, &mut redis::cmd("PING")).await.is_ok() {
                return true;
            }
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "redis-sentinel did not answer at {} within 10 s",
                self.url
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
