//! `askgate.v1.Email`: a tenant's email routes. Every call needs the admin role (with a
//! credential not limited to some sessions) and sees only the caller's tenant.

use askgate_proto::v1::{
    ConnectEmailRequest, DisconnectEmailRequest, DisconnectEmailResponse, EmailRoute,
    ListEmailRoutesRequest, ListEmailRoutesResponse,
    email_server::{Email as Service, EmailServer},
};

use super::Email;

crate::api::connections_service! {
    /// The `askgate.v1.Email` service.
    EmailApi for Email in email: Service, EmailServer;
    connect_email(ConnectEmailRequest) -> EmailRoute as "ConnectEmail";
    list_email_routes(ListEmailRoutesRequest) -> ListEmailRoutesResponse { routes } as "ListEmailRoutes";
    disconnect_email(DisconnectEmailRequest) -> DisconnectEmailResponse as "DisconnectEmail";
}
