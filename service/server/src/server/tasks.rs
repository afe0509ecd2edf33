//! The node's background tasks: health following the backend, and credentials
//! re-read on SIGHUP.

use std::{sync::Arc, time::Duration};

use askgate_proto::v1::user_questions_server::UserQuestionsServer;
use tonic_health::ServingStatus;
use tracing::{info, warn};

use crate::{api::UserQuestionsApi, auth::Authenticator, backend::Backend};

/// The health service names the node reports.
const HEALTH_SERVICE_OVERALL: &str = "";

/// Aborts a background task when dropped, so it ends with `run`.
pub(super) struct TaskGuard(pub(super) tokio::task::JoinHandle<()>);

impl Drop for TaskGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Sets the node's overall health and that of the askgate service.
pub(super) async fn set_health(
    health: &tonic_health::server::HealthReporter,
    status: ServingStatus,
) {
    health
        .set_service_status(HEALTH_SERVICE_OVERALL, status)
        .await;
    health
        .set_service_status(
            <UserQuestionsServer<UserQuestionsApi> as tonic::server::NamedService>::NAME,
            status,
        )
        .await;
}

/// How often health re-checks the backend.
const BACKEND_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// Health follows the backend: NOT_SERVING while it is unreachable (new asks then get
/// UNAVAILABLE from the backend itself), SERVING again when it is back, until the node
/// drains.
pub(super) async fn follow_backend_health(
    backend: Arc<dyn Backend>,
    health: tonic_health::server::HealthReporter,
    draining: tokio::sync::watch::Receiver<bool>,
) {
    let mut serving = true;
    loop {
        tokio::time::sleep(BACKEND_CHECK_INTERVAL).await;
        if *draining.borrow() {
            return;
        }
        let healthy = backend.healthy().await;
        if healthy == serving || *draining.borrow() {
            continue;
        }
        serving = healthy;
        let status = match healthy {
            true => ServingStatus::Serving,
            false => ServingStatus::NotServing,
        };
        match healthy {
            true => info!("backend reachable again: SERVING"),
            false => warn!("backend unreachable: NOT_SERVING"),
        }
        set_health(&health, status).await;
    }
}

/// Re-reads credentials on SIGHUP; open connections and streams are untouched.
pub(super) fn reload_on_sighup(auth: Arc<Authenticator>) -> Option<TaskGuard> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut hangups = match signal(SignalKind::hangup()) {
            Ok(hangups) => hangups,
            Err(e) => {
                warn!("cannot listen for SIGHUP, credentials will not reload: {e}");
                return None;
            }
        };
        Some(TaskGuard(tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                if let Err(e) = auth.reload() {
                    tracing::error!("reload failed, keeping the previous credentials: {e:#}");
                }
            }
        })))
    }
    #[cfg(not(unix))]
    {
        let _ = auth;
        None
    }
}
