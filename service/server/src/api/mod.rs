//! tonic handlers: thin. Each authenticates the caller, checks its role, takes the
//! request apart, calls [`Questions`] and maps the domain error through
//! [`status::to_status`].

pub mod agents;
pub mod audit;
pub mod deadline;
pub mod grants;
pub mod health;
pub mod people;
pub mod policies;
pub mod receipts;

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use askgate_proto::v1::{
    AbortRequest, AbortResponse, AnswerRequest, AnswerResponse, AskRequest, AskResponse,
    CancelRequest, CancelResponse, ListPendingRequest, ListPendingResponse, SubscribeRequest,
    SubscribeResponse, WhoAmIRequest, WhoAmIResponse, user_questions_server::UserQuestions,
};
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status};
use tracing::{Instrument, debug_span, field::Empty, instrument};

pub use agents::AgentsApi;
/// The status of a failed call that names no session (the channels' admin calls' too).
pub(crate) use askgate_channels::api::failed;
pub use audit::AuditApi;
pub use grants::GrantsApi;
pub use people::PeopleApi;
pub use policies::PoliciesApi;
pub use receipts::ReceiptsApi;

use crate::{
    auth::{Action, Gate, Principal},
    domain::{
        Error, Resolver, approval, bounded,
        model::{CONSOLE_CHANNEL, GRPC_CHANNEL},
        status,
    },
    questions::{Answered, Questions},
    telemetry,
};

/// The request header in which a client names its channel (`tui`, `cli`, an SDK's
/// name): recorded with what it resolves, and matched against an ask's
/// `allowed_channels`.
pub const CHANNEL_HEADER: &str = "askgate-channel";

/// Marks a request that arrived as gRPC-Web (the console, or another browser page the
/// Origin policy let through): its channel is `console`, whatever it claims. Not on a
/// server with the identity provider's sign-in, where `console` is a console session.
#[derive(Debug, Clone, Copy)]
pub struct FromBrowser;

/// Tower `map_request` function, in front of the gRPC-Web translation: marks
/// gRPC-Web requests with [`FromBrowser`].
pub fn mark_browser<B>(mut request: http::Request<B>) -> http::Request<B> {
    let grpc_web = request
        .headers()
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|t| t.as_bytes().starts_with(b"application/grpc-web"));
    if grpc_web {
        request.extensions_mut().insert(FromBrowser);
    }
    request
}

/// Who resolves through this call and from which channel: `console` for a console
/// session (or, on a server without the identity provider's sign-in, for gRPC-Web),
/// else the channel the `askgate-channel` header names (not one of the server's own),
/// else `grpc`.
pub fn resolver<T>(request: &Request<T>, caller: &Principal) -> Result<Resolver, Status> {
    resolver_of(request.metadata(), request.extensions(), caller)
        .map(|by| by.in_groups(caller.groups.clone()))
}

/// [`resolver`], from a request's metadata and extensions.
fn resolver_of(
    metadata: &tonic::metadata::MetadataMap,
    extensions: &http::Extensions,
    caller: &Principal,
) -> Result<Resolver, Status> {
    let subject = caller.sub.as_str();
    if caller.console || extensions.get::<FromBrowser>().is_some() {
        return Ok(Resolver::new(subject, CONSOLE_CHANNEL));
    }
    let Some(claimed) = metadata.get(CHANNEL_HEADER) else {
        return Ok(Resolver::new(subject, GRPC_CHANNEL));
    };
    let claimed = claimed.to_str().unwrap_or("\u{fffd}");
    approval::claimed_channel(claimed, askgate_channels::names())
        .map(|()| Resolver::new(subject, claimed))
        .map_err(|e| status::to_status(&Error::bad_request(CHANNEL_HEADER, e), "", None))
}

/// A stream that ends with the status of `lapsed` once it completes: what keeps a
/// Subscribe or Attach stream from outliving its credential. A credential that
/// cannot lapse has nothing to watch: its stream's messages go through untouched.
pub struct UntilLapsed<S> {
    events: S,
    lapsed: Option<Pin<Box<dyn Future<Output = Status> + Send>>>,
    ended: bool,
}

impl<S> UntilLapsed<S> {
    pub fn new(events: S, lapsed: Option<impl Future<Output = Status> + Send + 'static>) -> Self {
        Self {
            events,
            lapsed: lapsed.map(|l| Box::pin(l) as Pin<Box<dyn Future<Output = Status> + Send>>),
            ended: false,
        }
    }
}

impl<T, S: Stream<Item = Result<T, Status>> + Unpin> Stream for UntilLapsed<S> {
    type Item = Result<T, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.ended {
            return Poll::Ready(None);
        }
        if let Some(lapsed) = self.lapsed.as_mut()
            && let Poll::Ready(status) = lapsed.as_mut().poll(cx)
        {
            self.ended = true;
            return Poll::Ready(Some(Err(status)));
        }
        let next = Pin::new(&mut self.events).poll_next(cx);
        if matches!(next, Poll::Ready(None)) {
            self.ended = true;
        }
        next
    }
}

/// The `askgate.v1.UserQuestions` service.
#[derive(Clone)]
pub struct UserQuestionsApi {
    questions: Questions,
    gate: Gate,
    max_wait: Duration,
}

impl UserQuestionsApi {
    pub fn new(questions: Questions, gate: Gate, max_wait: Duration) -> Self {
        Self {
            questions,
            gate,
            max_wait,
        }
    }
}

type SubscribeStream = Pin<Box<dyn Stream<Item = Result<SubscribeResponse, Status>> + Send>>;

#[tonic::async_trait]
impl UserQuestions for UserQuestionsApi {
    /// Written out rather than `async fn`: the caller is admitted and the request taken
    /// apart before the future is made, so the future (one per blocked Ask, for as
    /// long as it waits) holds neither the request nor its metadata.
    fn ask<'life0, 'async_trait>(
        &'life0 self,
        request: Request<AskRequest>,
    ) -> Pin<Box<dyn Future<Output = Result<Response<AskResponse>, Status>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        let session_id = request.get_ref().session_id.clone();
        let span =
            debug_span!("Ask", tenant = Empty, session_id = %bounded(&session_id), rpc_id = Empty);
        let timer = self.gate.timer("Ask");
        let checked = span.in_scope(|| {
            let caller = self.gate.admit(&request, Action::Ask, &session_id)?;
            let deadline = deadline::of(&request, self.max_wait);
            let traced =
                telemetry::ask_span(&session_id, request.get_ref().questions.len(), || {
                    telemetry::caller(request.metadata())
                });
            self.questions
                .check_ask(&caller.tenant, &caller.sub, request.into_inner(), deadline)
                .map(|checked| checked.traced(traced.clone()).with_groups(&caller.groups))
                .map_err(|e| {
                    telemetry::refused(&traced, &e);
                    status::to_status(&e, &session_id, None)
                })
        });
        let checked = match checked {
            Ok(checked) => checked,
            Err(status) => return Box::pin(std::future::ready(Err(status))),
        };
        let call = async move {
            let _timer = timer;
            self.questions
                .ask(checked)
                .await
                .map(Response::new)
                .map_err(|f| {
                    status::to_status_with_receipt(
                        &f.error,
                        &session_id,
                        f.rpc_id.as_deref(),
                        f.receipt.as_deref(),
                    )
                })
        };
        Box::pin(call.instrument(span))
    }

    type SubscribeStream = SubscribeStream;

    #[instrument(name = "Subscribe", skip_all, fields(tenant, session_id = %bounded(&request.get_ref().session_id), all_sessions = request.get_ref().all_sessions))]
    async fn subscribe(
        &self,
        request: Request<SubscribeRequest>,
    ) -> Result<Response<Self::SubscribeStream>, Status> {
        let session_id = request.get_ref().session_id.clone();
        let action = match request.get_ref().all_sessions {
            true => Action::SubscribeAll,
            false => Action::Subscribe,
        };
        let _timer = self.gate.timer("Subscribe");
        let caller = self.gate.admit(&request, action, &session_id)?;
        let events = self
            .questions
            .subscribe(
                &caller.tenant,
                caller.sessions.as_deref(),
                request.into_inner(),
            )
            .await
            .map_err(|e| status::to_status(&e, &session_id, None))?;
        let stream = events.map(move |item| match item {
            Ok(message) => Ok(SubscribeResponse::clone(&message)),
            Err(e) => Err(status::to_status(&e, &session_id, None)),
        });
        let lapsed = self.gate.lapsed(&caller).map(Instrument::in_current_span);
        Ok(Response::new(Box::pin(UntilLapsed::new(stream, lapsed))))
    }

    #[instrument(level = "debug", name = "Answer", skip_all, fields(tenant, session_id = %bounded(&request.get_ref().session_id), rpc_id = %bounded(&request.get_ref().rpc_id)))]
    async fn answer(
        &self,
        request: Request<AnswerRequest>,
    ) -> Result<Response<AnswerResponse>, Status> {
        let (session_id, rpc_id) = (
            request.get_ref().session_id.clone(),
            request.get_ref().rpc_id.clone(),
        );
        let _timer = self.gate.timer("Answer");
        let caller = self.gate.admit(&request, Action::Answer, &session_id)?;
        let by = resolver(&request, &caller)?;
        let parent = telemetry::caller(request.metadata());
        let call = self
            .questions
            .answer(&caller.tenant, request.into_inner(), &by);
        telemetry::within(parent, call)
            .await
            .map(|answered| {
                Response::new(match answered {
                    Answered::Resolved => AnswerResponse::default(),
                    Answered::Voted { votes, needed } => AnswerResponse { votes, needed },
                })
            })
            .map_err(|e| status::to_status(&e, &session_id, Some(&rpc_id)))
    }

    #[instrument(level = "debug", name = "Cancel", skip_all, fields(tenant, session_id = %bounded(&request.get_ref().session_id), rpc_id = %bounded(&request.get_ref().rpc_id)))]
    async fn cancel(
        &self,
        request: Request<CancelRequest>,
    ) -> Result<Response<CancelResponse>, Status> {
        let (session_id, rpc_id) = (
            request.get_ref().session_id.clone(),
            request.get_ref().rpc_id.clone(),
        );
        let _timer = self.gate.timer("Cancel");
        let caller = self.gate.admit(&request, Action::Cancel, &session_id)?;
        let by = resolver(&request, &caller)?;
        let parent = telemetry::caller(request.metadata());
        let call = self
            .questions
            .cancel(&caller.tenant, request.into_inner(), &by);
        telemetry::within(parent, call)
            .await
            .map(|()| Response::new(CancelResponse {}))
            .map_err(|e| status::to_status(&e, &session_id, Some(&rpc_id)))
    }

    #[instrument(level = "debug", name = "Abort", skip_all, fields(tenant, session_id = %bounded(&request.get_ref().session_id)))]
    async fn abort(
        &self,
        request: Request<AbortRequest>,
    ) -> Result<Response<AbortResponse>, Status> {
        let session_id = request.get_ref().session_id.clone();
        let _timer = self.gate.timer("Abort");
        let caller = self.gate.admit(&request, Action::Abort, &session_id)?;
        self.questions
            .abort(&caller.tenant, request.into_inner())
            .await
            .map(|()| Response::new(AbortResponse {}))
            .map_err(|e| status::to_status(&e, &session_id, None))
    }

    #[instrument(level = "debug", name = "ListPending", skip_all, fields(tenant, session_id = %bounded(&request.get_ref().session_id)))]
    async fn list_pending(
        &self,
        request: Request<ListPendingRequest>,
    ) -> Result<Response<ListPendingResponse>, Status> {
        let session_id = request.get_ref().session_id.clone();
        let _timer = self.gate.timer("ListPending");
        let caller = self
            .gate
            .admit(&request, Action::ListPending, &session_id)?;
        self.questions
            .list_pending(&caller.tenant, session_id.clone())
            .await
            .map(|pending| Response::new(ListPendingResponse { pending }))
            .map_err(|e| status::to_status(&e, &session_id, None))
    }

    #[instrument(level = "debug", name = "WhoAmI", skip_all, fields(tenant))]
    async fn who_am_i(
        &self,
        request: Request<WhoAmIRequest>,
    ) -> Result<Response<WhoAmIResponse>, Status> {
        let _timer = self.gate.timer("WhoAmI");
        let caller = self.gate.admit(&request, Action::WhoAmI, "")?;
        Ok(Response::new(caller.who_am_i()))
    }
}

/// The channels' admin services (in their folders) are admitted here: the admin role,
/// with a credential not limited to some sessions, in the caller's tenant.
impl askgate_channels::api::AdminGate for Gate {
    fn admit(
        &self,
        call: &'static str,
        metadata: &tonic::metadata::MetadataMap,
        extensions: &http::Extensions,
        changes: bool,
    ) -> Result<askgate_channels::api::Admitted, Status> {
        let timer = self.timer(call);
        let caller = self.admit_parts(metadata, extensions, Action::ManageWebhooks, "")?;
        let by = match changes {
            true => Some(resolver_of(metadata, extensions, &caller)?),
            false => None,
        };
        Ok(askgate_channels::api::Admitted {
            tenant: caller.tenant,
            by,
            _timer: Box::new(timer),
        })
    }
}
