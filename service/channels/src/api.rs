//! The channels' admin services on the gRPC API (`askgate.v1.Webhooks`, `Slack`,
//! `Telegram`, `Email`, `Ntfy`, and each new channel's): each in its channel's folder,
//! admitted by the server's gate through the narrow [`AdminGate`], and mounted on the
//! node's services from the registry ([`crate::Channels::mount`], through [`Mount`]).
//! A channel's service of three calls (connect, list, disconnect) is written by
//! [`connections_service!`]; the calls themselves are [`crate::delivery::Hooks`]'s.

use std::{convert::Infallible, sync::Arc};

use http::Extensions;
use tonic::{Status, body::Body, metadata::MetadataMap, server::NamedService};

use crate::{
    delivery::Hooks,
    domain::{Error, Resolver, status, validate},
};

/// A caller the gate let manage its tenant's channels.
pub struct Admitted {
    pub tenant: Arc<str>,
    /// Who changes something, and through which channel (for the audit record); none
    /// for a call that only reads.
    pub by: Option<Resolver>,
    /// Ends the call's measurement when dropped.
    pub _timer: Box<dyn Send>,
}

impl Admitted {
    /// Who changes something: admitted with `changes`.
    pub fn by(&self) -> &Resolver {
        self.by
            .as_ref()
            .expect("a change is admitted with who makes it")
    }
}

/// Who may manage a tenant's channels, as the server decides it: the admin role, with
/// a credential not limited to some sessions.
pub trait AdminGate: Send + Sync {
    /// Admits the call `call` of the request with `metadata` and `extensions` (the
    /// caller the server's interceptor found), or the status to answer; with
    /// `changes`, also who makes the change.
    fn admit(
        &self,
        call: &'static str,
        metadata: &MetadataMap,
        extensions: &Extensions,
        changes: bool,
    ) -> Result<Admitted, Status>;
}

/// Where the node's gRPC services are mounted (the server authenticates each call
/// before its message is read).
pub trait Mount: Sized {
    fn mount<S>(self, service: S) -> Self
    where
        S: tonic::codegen::Service<
                http::Request<Body>,
                Response = http::Response<Body>,
                Error = Infallible,
            > + NamedService
            + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send + 'static;
}

/// A channel with an admin service: mounts it.
pub trait Administered {
    /// Mounts the channel's service on `on`, reading messages of at most `limit` bytes.
    fn mount<M: Mount>(on: M, hooks: &Hooks, gate: &Arc<dyn AdminGate>, limit: usize) -> M;
}

/// The status of a failed admin call.
pub fn failed(error: Error) -> Status {
    status::to_status(&error, "", None)
}

/// An id a caller sent: bounded before it reaches the store.
pub fn id(field: &str, id: &str) -> Result<(), Status> {
    if id.is_empty() {
        return Err(failed(Error::bad_request(field, "must not be empty")));
    }
    validate::text(field, id, validate::MAX_ID_BYTES).map_err(failed)
}

/// A channel's admin service of three calls, connect, list and disconnect, for the
/// channel `$channel` (its field in [`crate::Channels`], of type `$ty`), whose
/// generated service trait and server are in scope as `$service` and `$server`:
/// ```text
/// connections_service! {
///     /// The `askgate.v1.Ntfy` service: a tenant's ntfy topics.
///     NtfyApi for Ntfy in ntfy: Service, NtfyServer;
///     connect_ntfy(ConnectNtfyRequest) -> NtfyTopic as "ConnectNtfy";
///     list_ntfy_topics(ListNtfyTopicsRequest) -> ListNtfyTopicsResponse { topics } as "ListNtfyTopics";
///     disconnect_ntfy(DisconnectNtfyRequest) -> DisconnectNtfyResponse as "DisconnectNtfy";
/// }
/// ```
macro_rules! connections_service {
    (
        $(#[$doc:meta])*
        $api:ident for $ty:ident in $channel:ident: $service:ident, $server:ident;
        $connect:ident($connect_request:ty) -> $connection:ty as $connect_name:literal;
        $list:ident($list_request:ty) -> $listed:ident { $items:ident } as $list_name:literal;
        $disconnect:ident($disconnect_request:ty) -> $disconnected:ident as $disconnect_name:literal;
    ) => {
        $(#[$doc])*
        pub struct $api {
            hooks: $crate::delivery::Hooks,
            gate: std::sync::Arc<dyn $crate::api::AdminGate>,
        }

        #[tonic::async_trait]
        impl $service for $api {
            #[tracing::instrument(name = $connect_name, skip_all, fields(tenant))]
            async fn $connect(
                &self,
                request: tonic::Request<$connect_request>,
            ) -> Result<tonic::Response<$connection>, tonic::Status> {
                let caller = self.gate.admit(
                    $connect_name,
                    request.metadata(),
                    request.extensions(),
                    true,
                )?;
                let channel = &self.hooks.channels().$channel;
                self.hooks
                    .connect(channel, &caller.tenant, request.into_inner(), caller.by())
                    .await
                    .map(tonic::Response::new)
                    .map_err($crate::api::failed)
            }

            #[tracing::instrument(name = $list_name, skip_all, fields(tenant))]
            async fn $list(
                &self,
                request: tonic::Request<$list_request>,
            ) -> Result<tonic::Response<$listed>, tonic::Status> {
                let caller = self.gate.admit(
                    $list_name,
                    request.metadata(),
                    request.extensions(),
                    false,
                )?;
                self.hooks
                    .list(&self.hooks.channels().$channel, &caller.tenant)
                    .await
                    .map(|$items| tonic::Response::new($listed { $items }))
                    .map_err($crate::api::failed)
            }

            #[tracing::instrument(name = $disconnect_name, skip_all, fields(tenant))]
            async fn $disconnect(
                &self,
                request: tonic::Request<$disconnect_request>,
            ) -> Result<tonic::Response<$disconnected>, tonic::Status> {
                let caller = self.gate.admit(
                    $disconnect_name,
                    request.metadata(),
                    request.extensions(),
                    true,
                )?;
                let id = &request.get_ref().id;
                $crate::api::id("id", id)?;
                self.hooks
                    .disconnect(&self.hooks.channels().$channel, &caller.tenant, id, caller.by())
                    .await
                    .map(|()| tonic::Response::new($disconnected {}))
                    .map_err($crate::api::failed)
            }
        }

        impl $crate::api::Administered for $ty {
            fn mount<M: $crate::api::Mount>(
                on: M,
                hooks: &$crate::delivery::Hooks,
                gate: &std::sync::Arc<dyn $crate::api::AdminGate>,
                limit: usize,
            ) -> M {
                let api = $api {
                    hooks: hooks.clone(),
                    gate: gate.clone(),
                };
                on.mount($server::new(api).max_decoding_message_size(limit))
            }
        }
    };
}
pub(crate) use connections_service;
