//! Toxiproxy (Shopify's TCP proxy for simulating network faults) as a child process:
//! proxies between askgate's nodes and Redis, or between Redis servers, with latency,
//! cuts and partitions added and removed through its HTTP API.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A `toxiproxy` server on a free loopback port; killed when dropped. Its binary is
/// `$ASKGATE_TOXIPROXY`, else `server` in `$GOBIN` or `$(go env GOPATH)/bin` (what
/// `go install github.com/Shopify/toxiproxy/v2/cmd/server@v2.12.0` makes;
/// scripts/test.sh installs it).
pub struct Toxiproxy {
    child: std::process::Child,
    api: String,
}

impl Drop for Toxiproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn binary() -> std::path::PathBuf {
    if let Some(path) = std::env::var_os("ASKGATE_TOXIPROXY") {
        return path.into();
    }
    let home = std::env::var_os("HOME").unwrap_or_default();
    let gopath = std::env::var_os("GOPATH")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(&home).join("go"));
    let gobin = std::env::var_os("GOBIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| gopath.join("bin"));
    gobin.join("server")
}

impl Toxiproxy {
    /// Starts one and waits (at most 10 s) until its API answers. Panics with a hint
    /// when the binary is missing.
    pub async fn start() -> Self {
        let binary = binary();
        for _ in 0..5 {
            let port = crate::free_port();
            let child = std::process::Command::new(&binary)
                .args(["-host", "127.0.0.1", "-port", &port.to_string()])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap_or_else(|e| {
                    panic!(
                        "toxiproxy ({}) must be installed: go install \
                         github.com/Shopify/toxiproxy/v2/cmd/server@v2.12.0 \
                         (scripts/test.sh does): {e}",
                        binary.display()
                    )
                });
            let mut proxy = Self {
                child,
                api: format!("127.0.0.1:{port}"),
            };
            if proxy.wait_ready().await {
                return proxy;
            }
        }
        panic!("toxiproxy exited at once five times: its ports were taken");
    }

    async fn wait_ready(&mut self) -> bool {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            if self.request("GET", "/version", "").await.is_ok() {
                return true;
            }
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "toxiproxy did not answer within 10 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// One HTTP/1.1 request to the API; the response body, or an error naming the
    /// status.
    async fn request(&self, method: &str, path: &str, body: &str) -> anyhow::Result<String> {
        let mut stream = tokio::net::TcpStream::connect(&self.api).await?;
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.api,
            body.len()
        );
        stream.write_all(request.as_bytes()).await?;
        let mut response = String::new();
        stream.read_to_string(&mut response).await?;
        let status = response.split(' ').nth(1).unwrap_or_default().to_owned();
        let body = response
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_owned())
            .unwrap_or_default();
        match status.starts_with('2') {
            true => Ok(body),
            false => anyhow::bail!("toxiproxy {method} {path}: {status} {body}"),
        }
    }

    async fn call(&self, method: &str, path: &str, body: &str) {
        if let Err(e) = self.request(method, path, body).await {
            panic!("{e}");
        }
    }

    /// A proxy named `name` on a free loopback port to `upstream` (`host:port`); its
    /// port.
    pub async fn proxy(&self, name: &str, upstream: &str) -> u16 {
        let port = crate::free_port();
        let body = format!(
            r#"{{"name":"{name}","listen":"127.0.0.1:{port}","upstream":"{upstream}","enabled":true}}"#
        );
        self.call("POST", "/proxies", &body).await;
        port
    }

    /// Delays what flows through `name` by `latency` give or take `jitter`, both ways.
    pub async fn latency(&self, name: &str, latency: Duration, jitter: Duration) {
        for stream in ["upstream", "downstream"] {
            self.latency_one_way(name, stream, latency, jitter).await;
        }
    }

    /// Delays what flows through `name` in one direction: `downstream` (from the
    /// upstream server to the client) or `upstream`.
    pub async fn latency_one_way(
        &self,
        name: &str,
        stream: &str,
        latency: Duration,
        jitter: Duration,
    ) {
        let body = format!(
            r#"{{"name":"latency_{stream}","type":"latency","stream":"{stream}","attributes":{{"latency":{},"jitter":{}}}}}"#,
            latency.as_millis(),
            jitter.as_millis()
        );
        self.call("POST", &format!("/proxies/{name}/toxics"), &body)
            .await;
    }

    /// Removes every toxic of `name`.
    pub async fn clear(&self, name: &str) {
        let toxics = self
            .request("GET", &format!("/proxies/{name}/toxics"), "")
            .await
            .unwrap_or_default();
        for part in toxics.split(r#""name":""#).skip(1) {
            let toxic = part.split('"').next().unwrap_or_default();
            self.call("DELETE", &format!("/proxies/{name}/toxics/{toxic}"), "")
                .await;
        }
    }

    /// Cuts `name` off (`false`: open connections are closed and new ones refused), or
    /// lets it through again.
    pub async fn set_enabled(&self, name: &str, enabled: bool) {
        let body = format!(r#"{{"enabled":{enabled}}}"#);
        self.call("POST", &format!("/proxies/{name}"), &body).await;
    }

    /// Closes every connection through `name` with a TCP reset as soon as data flows
    /// back on it: a connection cut in the middle of a script's reply. New connections
    /// meet the same fate until [`Self::clear`].
    pub async fn reset_peer(&self, name: &str) {
        let body = r#"{"name":"reset","type":"reset_peer","stream":"downstream","attributes":{"timeout":0}}"#;
        self.call("POST", &format!("/proxies/{name}/toxics"), body)
            .await;
    }
}
