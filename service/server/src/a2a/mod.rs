//! askgate as an A2A agent, "a human" (`--a2a on`): the protocol's gRPC service
//! (`lf.a2a.v1.A2AService`, the official bindings) beside askgate's own, and the agent
//! card at [`AGENT_CARD_PATH`].
//!
//! A `SendMessage` whose DataPart holds `{"questions": [...]}` (the `ask_user_question`
//! tool's input) is an ask in the session the message's context names (a new one when
//! it names none). Its request_id comes from the message's id and its questions, so a
//! client that sends the same message again (after a dropped call, or a node's restart)
//! joins the ask instead of asking twice (`request_id`). The task is WORKING while the
//! ask is pending, then COMPLETED with a DataPart artifact of the answers, CANCELED
//! (the human cancelled, with their reason; or `CancelTask`, which aborts the ask), or
//! FAILED (it expired, nobody follows the session, ...), the reason in the status
//! message. Credentials are askgate's, with the agent role; the tenant is the
//! credential's. A node keeps the tasks it started (`tasks.rs`).

mod card;
mod tasks;

use std::{collections::VecDeque, pin::Pin, time::Duration};

use a2a_pb::{
    AgentCard, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest, GetTaskPushNotificationConfigRequest, GetTaskRequest,
    ListTaskPushNotificationConfigsRequest, ListTaskPushNotificationConfigsResponse,
    ListTasksRequest, ListTasksResponse, Message, SendMessageRequest, SendMessageResponse,
    StreamResponse, SubscribeToTaskRequest, Task, TaskArtifactUpdateEvent,
    TaskPushNotificationConfig, TaskStatusUpdateEvent, a2a_service_server::A2aService,
    part::Content, pbconv::proto_value_to_json_value, send_message_response, stream_response,
};
use askgate_contract::tool::ToolAsk;
use askgate_proto::v1::{AbortRequest, AskRequest};
use tokio::{sync::watch, time::Instant};
use tokio_stream::Stream;
use tonic::{Code, Request, Response, Status};

pub use a2a_pb::a2a_service_server::A2aServiceServer;
pub use card::{AGENT_CARD_PATH, AgentCardPage};
use sha2::{Digest, Sha256};
use tasks::{Found, RETENTION, Tasks, a2a_error, is_terminal};

use crate::{
    auth::{Action, Gate},
    domain::{Error, status},
    questions::Questions,
    telemetry,
};

/// How long an ask stays pending for its message sent again when the node that took it
/// restarts: as long as the SDKs' grace.
const REATTACH_GRACE: Duration = askgate_contract::DEFAULT_REATTACH_GRACE;

/// How long `CancelTask` waits for the aborted ask's task to end.
const CANCEL_WAIT: Duration = Duration::from_secs(10);

/// The header in which A2A clients name the protocol version they speak.
const VERSION_HEADER: &str = "a2a-version";

type Updates = Pin<Box<dyn Stream<Item = Result<StreamResponse, Status>> + Send>>;

/// The `lf.a2a.v1.A2AService` of a node.
#[derive(Clone)]
pub struct A2aApi {
    questions: Questions,
    gate: Gate,
    max_wait: Duration,
    tasks: Tasks,
}

impl A2aApi {
    pub fn new(questions: Questions, gate: Gate, max_wait: Duration) -> Self {
        Self {
            questions,
            gate,
            max_wait,
            tasks: Tasks::default(),
        }
    }

    /// Starts the task a message asks for: its state as it starts, and its state to
    /// watch.
    fn start(
        &self,
        request: Request<SendMessageRequest>,
    ) -> Result<(Task, watch::Receiver<Task>), Status> {
        check_version(&request)?;
        let message = request
            .get_ref()
            .message
            .as_ref()
            .ok_or_else(|| invalid("a message is required"))?;
        if !message.task_id.is_empty() {
            return Err(a2a_error(
                Code::FailedPrecondition,
                "UNSUPPORTED_OPERATION",
                "an askgate task takes no further messages: send a new message to ask again",
            ));
        }
        let session = match message.context_id.as_str() {
            "" => uuid::Uuid::now_v7().to_string(),
            context => context.to_owned(),
        };
        let caller = self.gate.admit(&request, Action::Ask, &session)?;
        let (asked, arguments) = ask_of(message)?;
        let ToolAsk { questions, action } = asked;
        let request_id = request_id(&message.message_id, &arguments);
        let id = uuid::Uuid::now_v7().to_string();
        let traced = telemetry::ask_span(&session, questions.len(), || {
            telemetry::caller(request.metadata())
        });
        let ask = AskRequest {
            session_id: session.clone(),
            questions,
            action: action.map(Box::new),
            request_id: request_id.clone(),
            // A node that restarts keeps the ask that long for the message sent again.
            reattach_grace_ms: REATTACH_GRACE.as_millis().try_into().unwrap_or(u32::MAX),
            ..AskRequest::default()
        };
        let deadline = Instant::now() + self.max_wait;
        // The task takes its place first: a node with no room for it asks nothing.
        let first = tasks::working(&id, &session);
        let sender = self
            .tasks
            .start(&caller.tenant, &request_id, first.clone())?;
        let checked = self
            .questions
            .check_ask(&caller.tenant, &caller.sub, ask, deadline)
            .map(|checked| checked.with_groups(&caller.groups))
            .map_err(|e| {
                self.tasks.forget(&caller.tenant, &id);
                telemetry::refused(&traced, &e);
                refusal(&e, &session)
            })?
            .traced(traced);
        let state = sender.subscribe();
        let (questions, tasks, tenant) = (
            self.questions.clone(),
            self.tasks.clone(),
            caller.tenant.to_string(),
        );
        tokio::spawn(async move {
            let ended = match questions.ask(checked).await {
                Ok(response) => tasks::completed(&id, &session, &response),
                Err(failure) => {
                    tasks::ended(&id, &session, &failure.error, failure.rpc_id.as_deref())
                }
            };
            sender.send_replace(ended);
            tokio::time::sleep(RETENTION).await;
            tasks.forget(&tenant, &id);
        });
        Ok((first, state))
    }

    /// The task `id` of the caller's tenant, if the caller may ask in its session: the
    /// tenant, and the task.
    fn task<T>(&self, request: &Request<T>, id: &str) -> Result<(String, Found), Status> {
        check_version(request)?;
        let caller = self.gate.admit(request, Action::WhoAmI, "")?;
        let found = self.tasks.get(&caller.tenant, id)?;
        self.gate.admit(request, Action::Ask, &found.session)?;
        Ok((caller.tenant.to_string(), found))
    }
}

/// The ask of a message's DataPart (its questions, and the action they approve),
/// checked against the tool's schema, and the DataPart as JSON.
fn ask_of(message: &Message) -> Result<(ToolAsk, String), Status> {
    let data = message
        .parts
        .iter()
        .find_map(|part| match &part.content {
            Some(Content::Data(data)) => Some(data),
            _ => None,
        })
        .ok_or_else(|| {
            invalid(
                "the message needs a DataPart {\"questions\": [...]}: the input of the \
                 ask_user_question skill (see the agent card)",
            )
        })?;
    let arguments = proto_value_to_json_value(data).to_string();
    let asked = askgate_contract::tool::parse_ask(&arguments).map_err(|refused| {
        let text = refused
            .text
            .strip_prefix("Error: ")
            .unwrap_or(&refused.text);
        invalid(text)
    })?;
    Ok((asked, arguments))
}

/// The request_id of a message's ask: a digest of the message's id and its DataPart.
/// The same message sent again joins its ask (or gets its recorded outcome): a client
/// whose blocking call dropped before it learnt the task's id, or whose node
/// restarted, sends it again and the human is asked once. Another message that reuses
/// the id with other questions is another ask, never the first one's answers. A
/// message with no id (the protocol requires one) is a new ask each time.
fn request_id(message_id: &str, arguments: &str) -> String {
    if message_id.is_empty() {
        return uuid::Uuid::now_v7().to_string();
    }
    let mut digest = Sha256::new();
    digest.update(message_id.len().to_be_bytes());
    digest.update(message_id);
    digest.update(arguments);
    format!("a2a-{}", hex::encode(&digest.finalize()[..16]))
}

/// The longest message an INVALID_PARAMS carries: it may quote the caller's input.
const MAX_MESSAGE_BYTES: usize = 1024;

/// INVALID_PARAMS, its message cut at [`MAX_MESSAGE_BYTES`].
fn invalid(message: &str) -> Status {
    let mut end = message.len().min(MAX_MESSAGE_BYTES);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    a2a_error(Code::InvalidArgument, "INVALID_PARAMS", &message[..end])
}

/// A refusal before the ask was stored: an invalid batch is the protocol's
/// INVALID_PARAMS; anything else keeps askgate's own status and reason.
fn refusal(error: &Error, session: &str) -> Status {
    match error {
        Error::BadRequest(_) | Error::EmptyQuestions | Error::BadIntent(_) => {
            invalid(&error.to_string())
        }
        _ => status::to_status(error, session, None),
    }
}

/// Refuses a client that names a protocol version other than 1.x.
fn check_version<T>(request: &Request<T>) -> Result<(), Status> {
    let Some(version) = request.metadata().get(VERSION_HEADER) else {
        return Ok(());
    };
    match version.to_str().unwrap_or_default().split('.').next() {
        Some("1") => Ok(()),
        _ => Err(a2a_error(
            Code::FailedPrecondition,
            "VERSION_NOT_SUPPORTED",
            &format!("this agent speaks A2A {}", card::PROTOCOL_VERSION),
        )),
    }
}

/// What a task's subscriber gets: the task as it is, then, once it ends, its
/// artifacts and its final status.
fn updates(state: watch::Receiver<Task>) -> Updates {
    enum Phase {
        First,
        Waiting,
        Ending(VecDeque<StreamResponse>),
    }
    let stream =
        futures_util::stream::unfold((state, Phase::First), |(mut state, phase)| async move {
            let mut queue = match phase {
                Phase::First => {
                    let task = state.borrow_and_update().clone();
                    let next = match is_terminal(&task) {
                        true => Phase::Ending(VecDeque::new()),
                        false => Phase::Waiting,
                    };
                    let first = stream_response::Payload::Task(task);
                    return Some((Ok(response(first)), (state, next)));
                }
                Phase::Waiting => {
                    let task = state.wait_for(is_terminal).await.ok()?.clone();
                    ending(task)
                }
                Phase::Ending(queue) => queue,
            };
            let next = queue.pop_front()?;
            Some((Ok(next), (state, Phase::Ending(queue))))
        });
    Box::pin(stream)
}

/// The updates that end a task: its artifacts, then its final status.
fn ending(task: Task) -> VecDeque<StreamResponse> {
    let (task_id, context_id) = (task.id, task.context_id);
    let mut queue: VecDeque<StreamResponse> = task
        .artifacts
        .into_iter()
        .map(|artifact| {
            response(stream_response::Payload::ArtifactUpdate(
                TaskArtifactUpdateEvent {
                    task_id: task_id.clone(),
                    context_id: context_id.clone(),
                    artifact: Some(artifact),
                    last_chunk: true,
                    ..TaskArtifactUpdateEvent::default()
                },
            ))
        })
        .collect();
    queue.push_back(response(stream_response::Payload::StatusUpdate(
        TaskStatusUpdateEvent {
            task_id,
            context_id,
            status: task.status,
            metadata: task.metadata,
        },
    )));
    queue
}

fn response(payload: stream_response::Payload) -> StreamResponse {
    StreamResponse {
        payload: Some(payload),
    }
}

fn unsupported(what: &str) -> Status {
    a2a_error(
        Code::FailedPrecondition,
        "PUSH_NOTIFICATION_NOT_SUPPORTED",
        &format!(
            "{what}: this agent sends no push notifications (follow a task with SubscribeToTask)"
        ),
    )
}

#[tonic::async_trait]
impl A2aService for A2aApi {
    async fn send_message(
        &self,
        request: Request<SendMessageRequest>,
    ) -> Result<Response<SendMessageResponse>, Status> {
        let immediately = request
            .get_ref()
            .configuration
            .as_ref()
            .is_some_and(|c| c.return_immediately);
        let (first, mut state) = self.start(request)?;
        let task = match immediately {
            true => first,
            // Blocking, as the protocol's default is: until the human has decided.
            false => match state.wait_for(is_terminal).await {
                Ok(task) => task.clone(),
                Err(_) => first,
            },
        };
        Ok(Response::new(SendMessageResponse {
            payload: Some(send_message_response::Payload::Task(task)),
        }))
    }

    type SendStreamingMessageStream = Updates;

    async fn send_streaming_message(
        &self,
        request: Request<SendMessageRequest>,
    ) -> Result<Response<Updates>, Status> {
        let (_, state) = self.start(request)?;
        Ok(Response::new(updates(state)))
    }

    async fn get_task(&self, request: Request<GetTaskRequest>) -> Result<Response<Task>, Status> {
        let (_, found) = self.task(&request, &request.get_ref().id)?;
        let task = found.state.borrow().clone();
        Ok(Response::new(task))
    }

    async fn list_tasks(
        &self,
        _request: Request<ListTasksRequest>,
    ) -> Result<Response<ListTasksResponse>, Status> {
        Err(a2a_error(
            Code::FailedPrecondition,
            "UNSUPPORTED_OPERATION",
            "this agent does not list tasks: keep the ids SendMessage returned",
        ))
    }

    async fn cancel_task(
        &self,
        request: Request<CancelTaskRequest>,
    ) -> Result<Response<Task>, Status> {
        let (tenant, found) = self.task(&request, &request.get_ref().id)?;
        let (session, mut state) = (found.session, found.state);
        if is_terminal(&state.borrow()) {
            return Err(a2a_error(
                Code::FailedPrecondition,
                "TASK_NOT_CANCELABLE",
                "the task has ended",
            ));
        }
        let abort = AbortRequest {
            session_id: session.clone(),
            request_id: found.request_id,
        };
        match self.questions.abort(&tenant, abort).await {
            // Resolved meanwhile: the task ends as its resolution says.
            Ok(()) | Err(Error::NotPending { .. }) => {}
            Err(e) => return Err(status::to_status(&e, &session, None)),
        }
        let ended = tokio::time::timeout(CANCEL_WAIT, state.wait_for(is_terminal))
            .await
            .ok()
            .and_then(Result::ok)
            .map(|task| task.clone());
        let task = ended.unwrap_or_else(|| state.borrow().clone());
        Ok(Response::new(task))
    }

    type SubscribeToTaskStream = Updates;

    async fn subscribe_to_task(
        &self,
        request: Request<SubscribeToTaskRequest>,
    ) -> Result<Response<Updates>, Status> {
        let (_, found) = self.task(&request, &request.get_ref().id)?;
        Ok(Response::new(updates(found.state)))
    }

    async fn create_task_push_notification_config(
        &self,
        _request: Request<TaskPushNotificationConfig>,
    ) -> Result<Response<TaskPushNotificationConfig>, Status> {
        Err(unsupported("CreateTaskPushNotificationConfig"))
    }

    async fn get_task_push_notification_config(
        &self,
        _request: Request<GetTaskPushNotificationConfigRequest>,
    ) -> Result<Response<TaskPushNotificationConfig>, Status> {
        Err(unsupported("GetTaskPushNotificationConfig"))
    }

    async fn list_task_push_notification_configs(
        &self,
        _request: Request<ListTaskPushNotificationConfigsRequest>,
    ) -> Result<Response<ListTaskPushNotificationConfigsResponse>, Status> {
        Err(unsupported("ListTaskPushNotificationConfigs"))
    }

    async fn get_extended_agent_card(
        &self,
        _request: Request<GetExtendedAgentCardRequest>,
    ) -> Result<Response<AgentCard>, Status> {
        Err(a2a_error(
            Code::FailedPrecondition,
            "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            "this agent has no extended card: its card is at /.well-known/agent-card.json",
        ))
    }

    async fn delete_task_push_notification_config(
        &self,
        _request: Request<DeleteTaskPushNotificationConfigRequest>,
    ) -> Result<Response<()>, Status> {
        Err(unsupported("DeleteTaskPushNotificationConfig"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invalid_message_quoting_a_huge_input_is_cut() {
        let huge = format!("unknown field `{}`", "é".repeat(100_000));
        let status = invalid(&huge);
        assert!(status.message().len() <= MAX_MESSAGE_BYTES);
        assert!(status.message().starts_with("unknown field"));
    }

    #[test]
    fn the_same_message_is_the_same_ask_and_another_is_another() {
        let questions = r#"{"questions":[{"id":"db","question":"Which?"}]}"#;
        let first = request_id("m-1", questions);
        assert_eq!(first, request_id("m-1", questions), "sent again");
        assert!(first.len() <= 64, "{first}");
        assert_ne!(first, request_id("m-2", questions), "another message");
        let other = r#"{"questions":[{"id":"db","question":"Which one?"}]}"#;
        assert_ne!(
            first,
            request_id("m-1", other),
            "the id reused for other questions"
        );
        // The id's length is part of the digest: no id and text can pass for another.
        assert_ne!(request_id("m", "-1{}"), request_id("m-1", "{}"));
        assert_ne!(
            request_id("", questions),
            request_id("", questions),
            "no id"
        );
    }
}
