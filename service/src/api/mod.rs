//! tonic handlers: thin. Each takes the request apart, calls [`Questions`] and maps the
//! domain error through [`status::to_status`].

pub mod agents;
pub mod deadline;
pub mod health;
pub mod status;

use std::{pin::Pin, time::Duration};

use askgate_proto::v1::{
    AnswerRequest, AnswerResponse, AskRequest, AskResponse, CancelRequest, CancelResponse,
    ListPendingRequest, ListPendingResponse, SubscribeRequest, SubscribeResponse,
    user_questions_server::UserQuestions,
};
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status};
use tracing::instrument;

pub use agents::AgentsApi;

use crate::{domain::DEFAULT_TENANT, questions::Questions};

/// Who resolves a question while calls carry no credential.
pub const ANONYMOUS: &str = "anonymous";

/// The `askgate.v1.UserQuestions` service.
#[derive(Clone)]
pub struct UserQuestionsApi {
    questions: Questions,
    max_wait: Duration,
}

impl UserQuestionsApi {
    pub fn new(questions: Questions, max_wait: Duration) -> Self {
        Self {
            questions,
            max_wait,
        }
    }
}

type SubscribeStream = Pin<Box<dyn Stream<Item = Result<SubscribeResponse, Status>> + Send>>;

#[tonic::async_trait]
impl UserQuestions for UserQuestionsApi {
    #[instrument(name = "Ask", skip_all, fields(session_id = %request.get_ref().session_id, rpc_id))]
    async fn ask(&self, request: Request<AskRequest>) -> Result<Response<AskResponse>, Status> {
        let deadline = deadline::of(&request, self.max_wait);
        let request = request.into_inner();
        let session_id = request.session_id.clone();
        self.questions
            .ask(DEFAULT_TENANT, request, deadline)
            .await
            .map(Response::new)
            .map_err(|f| status::to_status(&f.error, &session_id, f.rpc_id.as_deref()))
    }

    type SubscribeStream = SubscribeStream;

    #[instrument(name = "Subscribe", skip_all, fields(session_id = %request.get_ref().session_id, all_sessions = request.get_ref().all_sessions))]
    async fn subscribe(
        &self,
        request: Request<SubscribeRequest>,
    ) -> Result<Response<Self::SubscribeStream>, Status> {
        let request = request.into_inner();
        let session_id = request.session_id.clone();
        let events = self
            .questions
            .subscribe(DEFAULT_TENANT, request)
            .await
            .map_err(|e| status::to_status(&e, &session_id, None))?;
        let stream = events.map(|message| Ok(SubscribeResponse::clone(&message)));
        Ok(Response::new(Box::pin(stream)))
    }

    #[instrument(name = "Answer", skip_all, fields(session_id = %request.get_ref().session_id, rpc_id = %request.get_ref().rpc_id))]
    async fn answer(
        &self,
        request: Request<AnswerRequest>,
    ) -> Result<Response<AnswerResponse>, Status> {
        let request = request.into_inner();
        let (session_id, rpc_id) = (request.session_id.clone(), request.rpc_id.clone());
        self.questions
            .answer(DEFAULT_TENANT, request, ANONYMOUS)
            .await
            .map(|()| Response::new(AnswerResponse {}))
            .map_err(|e| status::to_status(&e, &session_id, Some(&rpc_id)))
    }

    #[instrument(name = "Cancel", skip_all, fields(session_id = %request.get_ref().session_id, rpc_id = %request.get_ref().rpc_id))]
    async fn cancel(
        &self,
        request: Request<CancelRequest>,
    ) -> Result<Response<CancelResponse>, Status> {
        let request = request.into_inner();
        let (session_id, rpc_id) = (request.session_id.clone(), request.rpc_id.clone());
        self.questions
            .cancel(DEFAULT_TENANT, request, ANONYMOUS)
            .await
            .map(|()| Response::new(CancelResponse {}))
            .map_err(|e| status::to_status(&e, &session_id, Some(&rpc_id)))
    }

    #[instrument(name = "ListPending", skip_all, fields(session_id = %request.get_ref().session_id))]
    async fn list_pending(
        &self,
        request: Request<ListPendingRequest>,
    ) -> Result<Response<ListPendingResponse>, Status> {
        let session_id = request.into_inner().session_id;
        self.questions
            .list_pending(DEFAULT_TENANT, session_id.clone())
            .await
            .map(|pending| Response::new(ListPendingResponse { pending }))
            .map_err(|e| status::to_status(&e, &session_id, None))
    }
}
