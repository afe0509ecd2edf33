//! The credential gate every ingress passes (gRPC, MCP, the channels' admin): who the
//! caller is, whether their role allows the action, and when their credential lapses.

use std::{future::Future, sync::Arc};

use tonic::{Request, Status};
use tracing::{Span, debug};

use super::{Action, Authenticator, Failure, Principal, oidc::Sessions};
use crate::{
    domain::status,
    metrics::{Metrics, RpcTimer},
};

/// Authenticates and authorizes a call; the one place both happen for every RPC.
///
/// Authentication runs as a tonic interceptor ([`Gate::authenticate`]), from the
/// headers alone, before the request's message is decoded: an unauthenticated caller
/// costs the server no decoding. The handler then authorizes the principal the
/// interceptor left in the request's extensions ([`Gate::admit`]).
#[derive(Clone)]
pub struct Gate {
    auth: Arc<Authenticator>,
    /// The console sessions of the identity provider's sign-in, if the node has one: a
    /// call without an `authorization` header may carry one.
    sessions: Option<Arc<Sessions>>,
    metrics: Metrics,
}

impl Gate {
    pub fn new(auth: Arc<Authenticator>, metrics: Metrics) -> Self {
        Self {
            auth,
            sessions: None,
            metrics,
        }
    }

    /// Takes the console sessions of `--oidc-issuer`'s sign-in besides credentials.
    pub fn with_sessions(mut self, sessions: Arc<Sessions>) -> Self {
        self.sessions = Some(sessions);
        self
    }

    /// Times an RPC (the `rpc_duration_seconds` metric) until the guard drops.
    pub fn timer(&self, method: &'static str) -> RpcTimer {
        self.metrics.rpc_timer(method)
    }

    /// The interceptor: the caller from the `authorization` header, kept in the
    /// request's extensions, or UNAUTHENTICATED before the message is read.
    pub fn authenticate(&self, mut request: Request<()>) -> Result<Request<()>, Status> {
        let principal = self.principal(request.metadata())?;
        request.extensions_mut().insert(principal);
        Ok(request)
    }

    /// The caller named by request metadata (headers), counting a failure.
    pub fn principal_of(
        &self,
        metadata: &tonic::metadata::MetadataMap,
    ) -> Result<Principal, Status> {
        self.principal(metadata)
    }

    fn principal(&self, metadata: &tonic::metadata::MetadataMap) -> Result<Principal, Status> {
        let session = match &self.sessions {
            Some(sessions) if !metadata.contains_key("authorization") => {
                sessions.authenticate(metadata.as_ref())
            }
            _ => None,
        };
        session
            .unwrap_or_else(|| self.auth.authenticate(metadata))
            .map_err(|failure| {
                self.metrics.auth_failure(failure.as_str());
                status::to_status(&failure.into_error(), "", None)
            })
    }

    /// The caller, if it may do `action` on `session_id` (empty for none).
    pub fn admit<T>(
        &self,
        request: &Request<T>,
        action: Action,
        session_id: &str,
    ) -> Result<Principal, Status> {
        self.admit_parts(request.metadata(), request.extensions(), action, session_id)
    }

    /// [`Gate::admit`], from a request's metadata and extensions.
    pub fn admit_parts(
        &self,
        metadata: &tonic::metadata::MetadataMap,
        extensions: &http::Extensions,
        action: Action,
        session_id: &str,
    ) -> Result<Principal, Status> {
        let principal = match extensions.get::<Principal>() {
            Some(principal) => principal.clone(),
            // Served without the interceptor (a handler called directly).
            None => self.principal(metadata)?,
        };
        principal.authorize(action, session_id).map_err(|e| {
            self.metrics.auth_failure("permission_denied");
            status::to_status(&e, session_id, None)
        })?;
        Span::current().record("tenant", &*principal.tenant);
        Ok(principal)
    }

    /// Completes with the UNAUTHENTICATED status that ends a long-lived stream once
    /// its caller's credential lapses (expires, or is revoked by a keys reload); none
    /// for a credential that cannot lapse.
    pub fn lapsed(
        &self,
        principal: &Principal,
    ) -> Option<impl Future<Output = Status> + Send + 'static> {
        let lapsed = self.auth.lapsed(principal)?;
        let metrics = self.metrics.clone();
        Some(async move {
            lapsed.await;
            metrics.auth_failure(Failure::Revoked.as_str());
            debug!("the stream's credential lapsed");
            status::to_status(&Failure::Revoked.into_error(), "", None)
        })
    }
}
