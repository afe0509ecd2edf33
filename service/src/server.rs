//! Assembles the gRPC server (askgate services, health, reflection) and runs it until
//! the shutdown future completes, then drains.

use std::{future::Future, time::Duration};

use anyhow::Context as _;
use askgate_proto::v1::{agents_server::AgentsServer, user_questions_server::UserQuestionsServer};
use tokio::net::TcpListener;
use tonic::transport::{Server, server::TcpIncoming};
use tonic_health::ServingStatus;
use tracing::{info, warn};

use crate::{
    api::{AgentsApi, UserQuestionsApi, deadline, health, status},
    backend::memory::{MemoryBackend, MemoryConfig},
    domain::Limits,
    questions::Questions,
};

/// Everything `run` needs; built from the command line by `cli`, or directly by tests.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub limits: Limits,
    pub memory: MemoryConfig,
    /// Longest an Ask waits when its caller set no deadline or a longer one.
    pub max_wait: Duration,
    /// How long shutdown waits for calls and connections to finish.
    pub drain_timeout: Duration,
    /// HTTP/2 PING interval, so dead peers (and their Asks) are noticed.
    pub keepalive_interval: Duration,
    /// How long a PING may go unanswered before the connection is closed.
    pub keepalive_timeout: Duration,
    /// Largest request message accepted.
    pub max_message_bytes: usize,
    /// Interval of the heartbeats on an agent's Attach stream.
    pub agent_heartbeat: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            memory: MemoryConfig::default(),
            max_wait: Duration::from_secs(3600),
            drain_timeout: Duration::from_secs(5),
            keepalive_interval: Duration::from_secs(20),
            keepalive_timeout: Duration::from_secs(10),
            max_message_bytes: 4 * 1024 * 1024,
            agent_heartbeat: Duration::from_secs(10),
        }
    }
}

fn reflection() -> tonic_reflection::server::Builder<'static> {
    tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(askgate_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
}

/// The health service names the node reports.
const HEALTH_SERVICE_OVERALL: &str = "";

/// Serves askgate on `listener` until `shutdown` completes, then drains: health goes
/// NOT_SERVING, new asks are refused SHUTTING_DOWN, pending asks resolve DISPOSED, the
/// service ends every subscription itself, and calls still open after
/// `drain_timeout` are abandoned with a warning.
pub async fn run(
    listener: TcpListener,
    config: ServerConfig,
    shutdown: impl Future<Output = ()> + Send,
) -> anyhow::Result<()> {
    let local_addr = listener
        .local_addr()
        .context("failed to read the listen address")?;
    let backend = std::sync::Arc::new(MemoryBackend::new(config.memory.clone()));
    let questions = Questions::new(backend, config.limits.clone());

    let (draining_tx, draining_rx) = tokio::sync::watch::channel(false);
    let health = tonic_health::server::HealthReporter::new();
    let health_service = health::service(health.clone(), draining_rx.clone());
    health
        .set_serving::<UserQuestionsServer<UserQuestionsApi>>()
        .await;
    health
        .set_service_status(HEALTH_SERVICE_OVERALL, ServingStatus::Serving)
        .await;

    let reflection_v1 = reflection()
        .build_v1()
        .context("failed to build the reflection service")?;
    let reflection_v1alpha = reflection()
        .build_v1alpha()
        .context("failed to build the reflection service")?;

    let agents = AgentsServer::new(AgentsApi::new(
        questions.clone(),
        config.agent_heartbeat,
        draining_rx.clone(),
    ));
    let user_questions =
        UserQuestionsServer::new(UserQuestionsApi::new(questions.clone(), config.max_wait))
            .max_decoding_message_size(config.max_message_bytes);

    let incoming = TcpIncoming::from(listener)
        .with_nodelay(Some(true))
        .with_keepalive(Some(config.keepalive_interval));
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = Server::builder()
        .http2_keepalive_interval(Some(config.keepalive_interval))
        .http2_keepalive_timeout(Some(config.keepalive_timeout))
        .layer(tower::util::MapRequestLayer::new(deadline::stamp_arrival))
        .layer(tower::util::MapResponseLayer::new(
            status::map_oversize_request,
        ))
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(user_questions)
        .add_service(agents)
        .serve_with_incoming_shutdown(incoming, async {
            let _ = stop_rx.await;
        });
    let mut server = std::pin::pin!(server);
    info!(%local_addr, "askgate listening");

    tokio::select! {
        result = &mut server => return result.context("the gRPC server failed"),
        () = shutdown => {}
    }
    info!("shutting down: draining");
    health
        .set_not_serving::<UserQuestionsServer<UserQuestionsApi>>()
        .await;
    health
        .set_service_status(HEALTH_SERVICE_OVERALL, ServingStatus::NotServing)
        .await;
    let _ = draining_tx.send(true);
    questions.shut_down().await;
    let _ = stop_tx.send(());
    match tokio::time::timeout(config.drain_timeout, server).await {
        Ok(result) => result.context("the gRPC server failed while draining")?,
        Err(_) => warn!(
            timeout = ?config.drain_timeout,
            "drain timed out; closing the remaining connections"
        ),
    }
    info!("askgate stopped");
    Ok(())
}
