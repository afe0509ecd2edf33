//! A node from start to stop, in the shape of mini-redis's `run`: build the node
//! ([`node::Node::build`]), serve it until the shutdown future completes, then drain.
//! What a node is made of is [`ServerConfig`].

mod config;
mod node;
mod tasks;

use std::future::Future;

use anyhow::Context as _;
use tokio::net::TcpListener;
use tracing::{info, warn};

pub use self::config::{
    ApprovalConfig, AskConfig, AuthConfig, BackendChoice, ChannelConfig, DEFAULT_DATA_DIR,
    Http2Limits, HttpConfig, KEY_FILE, McpServing, MetricsAuth, MetricsConfig, ServerConfig,
    TlsConfig, TransportConfig,
};
use self::node::{Node, refuse_anonymous_off_loopback};
/// Where a Redis backend's Redis is (`BackendChoice::Redis`).
pub use askgate_engines::redis_engine::{RedisConfig, WaitPolicy};

/// Serves askgate on `listener` until `shutdown` completes, then drains: health goes
/// NOT_SERVING, new asks are refused SHUTTING_DOWN, pending asks resolve DISPOSED, the
/// service ends every subscription itself, and calls still open after
/// `drain_timeout` are abandoned with a warning.
pub async fn run(
    listener: TcpListener,
    config: ServerConfig,
    shutdown: impl Future<Output = ()> + Send,
) -> anyhow::Result<()> {
    run_with_metrics(listener, None, config, shutdown).await
}

/// [`run`], also serving Prometheus metrics on `metrics_listener`.
pub async fn run_with_metrics(
    listener: TcpListener,
    metrics_listener: Option<TcpListener>,
    config: ServerConfig,
    shutdown: impl Future<Output = ()> + Send,
) -> anyhow::Result<()> {
    let local_addr = listener
        .local_addr()
        .context("failed to read the listen address")?;
    refuse_anonymous_off_loopback(&config.auth, local_addr)?;
    let node = Node::build(&config).await?;
    let _metrics = node.serve_metrics(metrics_listener, &config.metrics.auth)?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = node.serve(listener, local_addr, &config, async {
        let _ = stop_rx.await;
    })?;
    let mut server = std::pin::pin!(server);
    announce(&config, local_addr);
    tokio::select! {
        result = &mut server => return result.context("the gRPC server failed"),
        () = shutdown => {}
    }
    info!("shutting down: draining");
    node.drain(config.transport.drain_timeout).await;
    let _ = stop_tx.send(());
    match tokio::time::timeout(config.transport.drain_timeout, server).await {
        Ok(result) => result.context("the gRPC server failed while draining")?,
        Err(_) => warn!(
            timeout = ?config.transport.drain_timeout,
            "drain timed out; closing the remaining connections"
        ),
    }
    info!("askgate stopped");
    Ok(())
}

/// The log line that says where the node listens, and its console and MCP URLs.
fn announce(config: &ServerConfig, local_addr: std::net::SocketAddr) {
    let scheme = if config.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let url_or_off = |on: bool, path: &str| match on {
        true => format!("{scheme}://{local_addr}{path}"),
        false => "off".to_owned(),
    };
    info!(
        %local_addr,
        console = %url_or_off(config.http.console, "/console/"),
        mcp = %url_or_off(config.mcp.enabled, "/mcp"),
        "askgate listening"
    );
}
