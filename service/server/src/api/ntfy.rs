//! `askgate.v1.Ntfy`: a tenant's ntfy topics. Like the `Webhooks` service, every
//! call needs the admin role (with a credential not limited to some sessions) and sees
//! only the caller's tenant.

use askgate_proto::v1::{
    ConnectNtfyRequest, DisconnectNtfyRequest, DisconnectNtfyResponse, ListNtfyTopicsRequest,
    ListNtfyTopicsResponse, NtfyTopic, ntfy_server::Ntfy,
};
use tonic::{Request, Response, Status};
use tracing::instrument;

use super::{
    Gate,
    webhooks::{admin, failed, id},
};
use crate::{auth::Action, channels::delivery::Hooks};

/// The `askgate.v1.Ntfy` service.
pub struct NtfyApi {
    hooks: Hooks,
    gate: Gate,
}

impl NtfyApi {
    pub fn new(hooks: Hooks, gate: Gate) -> Self {
        Self { hooks, gate }
    }
}

#[tonic::async_trait]
impl Ntfy for NtfyApi {
    #[instrument(name = "ConnectNtfy", skip_all, fields(tenant))]
    async fn connect_ntfy(
        &self,
        request: Request<ConnectNtfyRequest>,
    ) -> Result<Response<NtfyTopic>, Status> {
        let _timer = self.gate.timer("ConnectNtfy");
        let (caller, by) = admin(&self.gate, &request)?;
        let topic = self
            .hooks
            .connect(
                &self.hooks.channels().ntfy,
                &caller.tenant,
                request.into_inner(),
                &by,
            )
            .await
            .map_err(failed)?;
        Ok(Response::new(topic))
    }

    #[instrument(name = "ListNtfyTopics", skip_all, fields(tenant))]
    async fn list_ntfy_topics(
        &self,
        request: Request<ListNtfyTopicsRequest>,
    ) -> Result<Response<ListNtfyTopicsResponse>, Status> {
        let _timer = self.gate.timer("ListNtfyTopics");
        let caller = self.gate.admit(&request, Action::ManageWebhooks, "")?;
        self.hooks
            .list(&self.hooks.channels().ntfy, &caller.tenant)
            .await
            .map(|topics| Response::new(ListNtfyTopicsResponse { topics }))
            .map_err(failed)
    }

    #[instrument(name = "DisconnectNtfy", skip_all, fields(tenant))]
    async fn disconnect_ntfy(
        &self,
        request: Request<DisconnectNtfyRequest>,
    ) -> Result<Response<DisconnectNtfyResponse>, Status> {
        let _timer = self.gate.timer("DisconnectNtfy");
        let (caller, by) = admin(&self.gate, &request)?;
        let topic = &request.get_ref().id;
        id("id", topic)?;
        self.hooks
            .disconnect(&self.hooks.channels().ntfy, &caller.tenant, topic, &by)
            .await
            .map_err(failed)?;
        Ok(Response::new(DisconnectNtfyResponse {}))
    }
}
