//! Support for tests and benchmarks: a real `redis-server` to point a Redis backend at.

use std::time::Duration;

/// A real `redis-server` on a free loopback port in a temporary directory; stopped (and
/// its directory removed) when dropped.
pub struct RedisServer {
    child: std::process::Child,
    dir: std::path::PathBuf,
    port: u16,
    durable: bool,
    pub url: String,
}

impl RedisServer {
    /// Starts one and waits (at most 10 s) until it answers PING. Panics with a hint
    /// when `redis-server` is missing: `scripts/test.sh` installs it.
    pub async fn start() -> Self {
        Self::start_inner(false).await
    }

    /// Starts one that writes every change to its append-only file before it replies
    /// (`appendfsync always`): what it acknowledged survives [`RedisServer::kill`].
    pub async fn start_durable() -> Self {
        Self::start_inner(true).await
    }

    async fn start_inner(durable: bool) -> Self {
        let dir = std::env::temp_dir().join(format!("askgate-redis-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut server = Self {
            child: spawn(&dir, port, durable),
            dir,
            port,
            durable,
            url: format!("redis://127.0.0.1:{port}/"),
        };
        server.wait_ready().await;
        server
    }

    /// Stops the server as a crash would (SIGKILL): its data is lost, unless it was
    /// started durable.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts it again on the same port, after [`RedisServer::kill`].
    pub async fn start_again(&mut self) {
        self.child = spawn(&self.dir, self.port, self.durable);
        self.wait_ready().await;
    }

    async fn wait_ready(&mut self) {
        let client = redis::Client::open(self.url.as_str()).expect("url");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(mut conn) = client.get_multiplexed_async_connection().await {
                let pong: redis::RedisResult<String> =
                    redis::cmd("PING").query_async(&mut conn).await;
                if pong.is_ok() {
                    return;
                }
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

fn spawn(dir: &std::path::Path, port: u16, durable: bool) -> std::process::Child {
    let appendonly = match durable {
        true => ["--appendonly", "yes", "--appendfsync", "always"],
        false => ["--appendonly", "no", "--appendfsync", "everysec"],
    };
    std::process::Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .args(appendonly)
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
