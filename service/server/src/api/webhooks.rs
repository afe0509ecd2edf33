//! `askgate.v1.Webhooks`: a tenant's webhook endpoints and their deliveries. Every call
//! needs the admin role (with a credential not limited to some sessions) and sees only
//! the caller's tenant: another tenant's endpoint or delivery does not exist for it.

use askgate_proto::v1::{
    CreateEndpointRequest, DeleteEndpointRequest, DeleteEndpointResponse, Delivery, Endpoint,
    ListDeliveriesRequest, ListDeliveriesResponse, ListEndpointsRequest, ListEndpointsResponse,
    RedeliverRequest, webhooks_server::Webhooks,
};
use tonic::{Request, Response, Status};
use tracing::instrument;

use crate::{
    auth::{Action, Gate, Principal},
    channels::delivery::Hooks,
    domain::{Error, Resolver, bounded, status, validate},
};

/// The `askgate.v1.Webhooks` service.
pub struct WebhooksApi {
    hooks: Hooks,
    gate: Gate,
}

impl WebhooksApi {
    pub fn new(hooks: Hooks, gate: Gate) -> Self {
        Self { hooks, gate }
    }

    fn admit<T>(&self, request: &Request<T>) -> Result<Principal, Status> {
        self.gate.admit(request, Action::ManageWebhooks, "")
    }
}

/// An admin caller and its channel, for the audit record of its change.
pub(super) fn admin<T>(gate: &Gate, request: &Request<T>) -> Result<(Principal, Resolver), Status> {
    let caller = gate.admit(request, Action::ManageWebhooks, "")?;
    let by = super::resolver(request, &caller.sub)?;
    Ok((caller, by))
}

pub(super) fn failed(error: Error) -> Status {
    status::to_status(&error, "", None)
}

/// An id a caller sent: bounded before it reaches the store.
pub(super) fn id(field: &str, id: &str) -> Result<(), Status> {
    if id.is_empty() {
        return Err(failed(Error::bad_request(field, "must not be empty")));
    }
    validate::text(field, id, validate::MAX_ID_BYTES).map_err(failed)
}

#[tonic::async_trait]
impl Webhooks for WebhooksApi {
    #[instrument(name = "CreateEndpoint", skip_all, fields(tenant))]
    async fn create_endpoint(
        &self,
        request: Request<CreateEndpointRequest>,
    ) -> Result<Response<Endpoint>, Status> {
        let _timer = self.gate.timer("CreateEndpoint");
        let (caller, by) = admin(&self.gate, &request)?;
        let endpoint = self
            .hooks
            .connect(
                &self.hooks.channels().webhook,
                &caller.tenant,
                request.into_inner(),
                &by,
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
        let _timer = self.gate.timer("ListEndpoints");
        let caller = self.admit(&request)?;
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
        let _timer = self.gate.timer("DeleteEndpoint");
        let (caller, by) = admin(&self.gate, &request)?;
        let endpoint = &request.get_ref().id;
        id("id", endpoint)?;
        self.hooks
            .disconnect(
                &self.hooks.channels().webhook,
                &caller.tenant,
                endpoint,
                &by,
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
        let _timer = self.gate.timer("ListDeliveries");
        let caller = self.admit(&request)?;
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
        let _timer = self.gate.timer("Redeliver");
        let (caller, by) = admin(&self.gate, &request)?;
        id("id", &request.get_ref().id)?;
        let delivery = self
            .hooks
            .redeliver(&caller.tenant, &request.get_ref().id, &by)
            .await
            .map_err(failed)?;
        Ok(Response::new(delivery))
    }
}
