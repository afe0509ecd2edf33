//! `askgate.v1.Email`: a tenant's email routes. Like the `Webhooks` service, every
//! call needs the admin role (with a credential not limited to some sessions) and sees
//! only the caller's tenant.

use askgate_proto::v1::{
    ConnectEmailRequest, DisconnectEmailRequest, DisconnectEmailResponse, EmailRoute,
    ListEmailRoutesRequest, ListEmailRoutesResponse, email_server::Email,
};
use tonic::{Request, Response, Status};
use tracing::instrument;

use super::{
    Gate,
    webhooks::{admin, failed, id},
};
use crate::{auth::Action, channels::delivery::Hooks};

/// The `askgate.v1.Email` service.
pub struct EmailApi {
    hooks: Hooks,
    gate: Gate,
}

impl EmailApi {
    pub fn new(hooks: Hooks, gate: Gate) -> Self {
        Self { hooks, gate }
    }
}

#[tonic::async_trait]
impl Email for EmailApi {
    #[instrument(name = "ConnectEmail", skip_all, fields(tenant))]
    async fn connect_email(
        &self,
        request: Request<ConnectEmailRequest>,
    ) -> Result<Response<EmailRoute>, Status> {
        let _timer = self.gate.timer("ConnectEmail");
        let (caller, by) = admin(&self.gate, &request)?;
        let route = self
            .hooks
            .connect(
                &self.hooks.channels().email,
                &caller.tenant,
                request.into_inner(),
                &by,
            )
            .await
            .map_err(failed)?;
        Ok(Response::new(route))
    }

    #[instrument(name = "ListEmailRoutes", skip_all, fields(tenant))]
    async fn list_email_routes(
        &self,
        request: Request<ListEmailRoutesRequest>,
    ) -> Result<Response<ListEmailRoutesResponse>, Status> {
        let _timer = self.gate.timer("ListEmailRoutes");
        let caller = self.gate.admit(&request, Action::ManageWebhooks, "")?;
        self.hooks
            .list(&self.hooks.channels().email, &caller.tenant)
            .await
            .map(|routes| Response::new(ListEmailRoutesResponse { routes }))
            .map_err(failed)
    }

    #[instrument(name = "DisconnectEmail", skip_all, fields(tenant))]
    async fn disconnect_email(
        &self,
        request: Request<DisconnectEmailRequest>,
    ) -> Result<Response<DisconnectEmailResponse>, Status> {
        let _timer = self.gate.timer("DisconnectEmail");
        let (caller, by) = admin(&self.gate, &request)?;
        let route = &request.get_ref().id;
        id("id", route)?;
        self.hooks
            .disconnect(&self.hooks.channels().email, &caller.tenant, route, &by)
            .await
            .map_err(failed)?;
        Ok(Response::new(DisconnectEmailResponse {}))
    }
}
