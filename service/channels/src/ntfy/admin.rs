//! `askgate.v1.Ntfy`: a tenant's ntfy topics. Every call needs the admin role (with a
//! credential not limited to some sessions) and sees only the caller's tenant.

use askgate_proto::v1::{
    ConnectNtfyRequest, DisconnectNtfyRequest, DisconnectNtfyResponse, ListNtfyTopicsRequest,
    ListNtfyTopicsResponse, NtfyTopic,
    ntfy_server::{Ntfy as Service, NtfyServer},
};

use super::Ntfy;

crate::api::connections_service! {
    /// The `askgate.v1.Ntfy` service.
    NtfyApi for Ntfy in ntfy: Service, NtfyServer;
    connect_ntfy(ConnectNtfyRequest) -> NtfyTopic as "ConnectNtfy";
    list_ntfy_topics(ListNtfyTopicsRequest) -> ListNtfyTopicsResponse { topics } as "ListNtfyTopics";
    disconnect_ntfy(DisconnectNtfyRequest) -> DisconnectNtfyResponse as "DisconnectNtfy";
}
