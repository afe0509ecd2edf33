//! `askgate.v1.Webhooks`: a tenant's webhook endpoints and the deliveries of every
//! channel. Every call needs the admin role (with a credential not limited to some
//! sessions) and sees only the caller's tenant: another tenant's endpoint or delivery
//! does not exist for it.

use std::sync::Arc;

use askgate_proto::v1::{
    CreateEndpointRequest, DeleteEndpointRequest, DeleteEndpointResponse, Delivery, Endpoint,
    ListDeliveriesRequest, ListDeliveriesResponse, ListEndpointsRequest, ListEndpointsResponse,
    RedeliverRequest,
    webhooks_server::{Webhooks as Service, WebhooksServer},
};
use tonic::{Request, Response, Status};
use tracing::instrument;

use super::Webhook;
use crate::{
    api::{AdminGate, Administered, Admitted, Mount, failed, id},
    delivery::Hooks,
    domain::bounded,
};

/// The `askgate.v1.Webhooks` service.
pub struct WebhooksApi {
    hooks: Hooks,
    gate: Arc<dyn AdminGate>,
}

impl WebhooksApi {
    fn admit<T>(
        &self,
        call: &'static str,
        request: &Request<T>,
        changes: bool,
    ) -> Result<Admitted, Status> {
        self.gate
            .admit(call, request.metadata(), request.extensions(), changes)
    }
}

impl Administered for Webhook {
    fn mount<M: Mount>(on: M, hooks: &Hooks, gate: &Arc<dyn AdminGate>, limit: usize) -> M {
        let api = WebhooksApi {
            hooks: hooks.clone(),
            gate: gate.clone(),
        };
        on.mount(WebhooksServer::new(api).max_decoding_message_size(limit))
    }
}

#[tonic::async_trait]
impl Service for WebhooksApi {
    #[instrument(name = "CreateEndpoint", skip_all, fields(tenant))]
    async fn create_endpoint(
        &self,
        request: Request<CreateEndpointRequest>,
    ) -> Result<Response<Endpoint>, Status> {
        let caller = self.admit("CreateEndpoint", &request, true)?;
        let endpoint = self
            .hooks
            .connect(
                &self.hooks.channels().webhook,
                &caller.tenant,
                request.into_inner(),
                caller.by(),
            )
            .await
            .map_err(failed)?;
        Ok(Response::new(endpoint))
    }

    #[instrument(name = "ListEndpoints", skip_all, fields(tenant))]
    async fn list_endpoints(
        &self,
        request: Request<ListEndpointsRequest>,
    ) -> Result<Response<ListEndpointsResponse>, Status> {
        let caller = self.admit("ListEndpoints", &request, false)?;
        self.hooks
            .list(&self.hooks.channels().webhook, &caller.tenant)
            .await
            .map(|endpoints| Response::new(ListEndpointsResponse { endpoints }))
            .map_err(failed)
    }

    #[instrument(name = "DeleteEndpoint", skip_all, fields(tenant, endpoint = %bounded(&request.get_ref().id)))]
    async fn delete_endpoint(
        &self,
        request: Request<DeleteEndpointRequest>,
    ) -> Result<Response<DeleteEndpointResponse>, Status> {
        let caller = self.admit("DeleteEndpoint", &request, true)?;
        let endpoint = &request.get_ref().id;
        id("id", endpoint)?;
        self.hooks
            .disconnect(
                &self.hooks.channels().webhook,
                &caller.tenant,
                endpoint,
                caller.by(),
            )
            .await
            .map_err(failed)?;
        Ok(Response::new(DeleteEndpointResponse {}))
    }

    #[instrument(name = "ListDeliveries", skip_all, fields(tenant))]
    async fn list_deliveries(
        &self,
        request: Request<ListDeliveriesRequest>,
    ) -> Result<Response<ListDeliveriesResponse>, Status> {
        let caller = self.admit("ListDeliveries", &request, false)?;
        if !request.get_ref().endpoint_id.is_empty() {
            id("endpoint_id", &request.get_ref().endpoint_id)?;
        }
        self.hooks
            .list_deliveries(&caller.tenant, request.get_ref())
            .await
            .map(|deliveries| Response::new(ListDeliveriesResponse { deliveries }))
            .map_err(failed)
    }

    #[instrument(name = "Redeliver", skip_all, fields(tenant, delivery = %bounded(&request.get_ref().id)))]
    async fn redeliver(
        &self,
        request: Request<RedeliverRequest>,
    ) -> Result<Response<Delivery>, Status> {
        let caller = self.admit("Redeliver", &request, true)?;
        id("id", &request.get_ref().id)?;
        let delivery = self
            .hooks
            .redeliver(&caller.tenant, &request.get_ref().id, caller.by())
            .await
            .map_err(failed)?;
        Ok(Response::new(delivery))
    }
}
