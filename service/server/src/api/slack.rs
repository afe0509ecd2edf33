//! `askgate.v1.Slack`: a tenant's Slack apps. Like the `Webhooks` service, every call
//! needs the admin role (with a credential not limited to some sessions) and sees only
//! the caller's tenant; an app's secrets are never returned.

use askgate_proto::v1::{
    ConnectSlackRequest, DisconnectSlackRequest, DisconnectSlackResponse, ListSlackAppsRequest,
    ListSlackAppsResponse, SlackApp, slack_server::Slack,
};
use tonic::{Request, Response, Status};
use tracing::instrument;

use super::{
    Gate,
    webhooks::{admin, failed, id},
};
use crate::{
    auth::{Action, Principal},
    channels::delivery::Hooks,
};

/// The `askgate.v1.Slack` service.
pub struct SlackApi {
    hooks: Hooks,
    gate: Gate,
}

impl SlackApi {
    pub fn new(hooks: Hooks, gate: Gate) -> Self {
        Self { hooks, gate }
    }

    fn admit<T>(&self, request: &Request<T>) -> Result<Principal, Status> {
        self.gate.admit(request, Action::ManageWebhooks, "")
    }
}

#[tonic::async_trait]
impl Slack for SlackApi {
    #[instrument(name = "ConnectSlack", skip_all, fields(tenant))]
    async fn connect_slack(
        &self,
        request: Request<ConnectSlackRequest>,
    ) -> Result<Response<SlackApp>, Status> {
        let _timer = self.gate.timer("ConnectSlack");
        let (caller, by) = admin(&self.gate, &request)?;
        let app = self
            .hooks
            .connect(
                &self.hooks.channels().slack,
                &caller.tenant,
                request.into_inner(),
                &by,
            )
            .await
            .map_err(failed)?;
        Ok(Response::new(app))
    }

    #[instrument(name = "ListSlackApps", skip_all, fields(tenant))]
    async fn list_slack_apps(
        &self,
        request: Request<ListSlackAppsRequest>,
    ) -> Result<Response<ListSlackAppsResponse>, Status> {
        let _timer = self.gate.timer("ListSlackApps");
        let caller = self.admit(&request)?;
        self.hooks
            .list(&self.hooks.channels().slack, &caller.tenant)
            .await
            .map(|apps| Response::new(ListSlackAppsResponse { apps }))
            .map_err(failed)
    }

    #[instrument(name = "DisconnectSlack", skip_all, fields(tenant))]
    async fn disconnect_slack(
        &self,
        request: Request<DisconnectSlackRequest>,
    ) -> Result<Response<DisconnectSlackResponse>, Status> {
        let _timer = self.gate.timer("DisconnectSlack");
        let (caller, by) = admin(&self.gate, &request)?;
        let app = &request.get_ref().id;
        id("id", app)?;
        self.hooks
            .disconnect(&self.hooks.channels().slack, &caller.tenant, app, &by)
            .await
            .map_err(failed)?;
        Ok(Response::new(DisconnectSlackResponse {}))
    }
}
