//! A2A tasks: each is one ask, run on a task of its own, whose state callers watch. A
//! node keeps the tasks it took `SendMessage` for, by tenant, for as long as they run
//! and [`RETENTION`] after they end.

use std::{collections::HashMap, sync::Arc, time::Duration};

use a2a_pb::{
    Artifact, Message, Part, Role, Task, TaskState, TaskStatus, part::Content,
    pbconv::json_value_to_proto_value,
};
use askgate_proto::v1::AskResponse;
use parking_lot::Mutex;
use tokio::sync::watch;
use tonic::Status;

use crate::domain::Error;

/// How long a node keeps an ended task for `GetTask`.
pub const RETENTION: Duration = Duration::from_secs(600);

/// Tasks one tenant may hold on a node, running and ended: past it a `SendMessage` is
/// refused (RESOURCE_EXHAUSTED) until some age out.
pub const MAX_TASKS_PER_TENANT: usize = 10_000;

/// The id of the artifact that holds the answers.
pub const ANSWERS_ARTIFACT: &str = "answers";

/// One task as the registry keeps it.
#[derive(Clone, Debug)]
pub struct Found {
    /// The task's context: the askgate session it asks in.
    pub session: String,
    /// Its ask's request_id in that session.
    pub request_id: String,
    pub state: watch::Receiver<Task>,
}

/// The node's tasks, by tenant and id. Cheap to clone.
#[derive(Clone, Default)]
pub struct Tasks {
    inner: Arc<Mutex<HashMap<String, HashMap<String, Found>>>>,
}

impl Tasks {
    /// Adds a running task, whose ask has `request_id`; its state goes through the
    /// returned sender.
    pub fn start(
        &self,
        tenant: &str,
        request_id: &str,
        task: Task,
    ) -> Result<watch::Sender<Task>, Status> {
        let mut all = self.inner.lock();
        let tenants = all.entry(tenant.to_owned()).or_default();
        if tenants.len() >= MAX_TASKS_PER_TENANT {
            return Err(Status::resource_exhausted(format!(
                "too many A2A tasks on this node for the tenant (at most \
                 {MAX_TASKS_PER_TENANT}, kept {} s after they end)",
                RETENTION.as_secs()
            )));
        }
        let (sender, state) = watch::channel(task);
        let (id, session) = {
            let task = state.borrow();
            (task.id.clone(), task.context_id.clone())
        };
        let request_id = request_id.to_owned();
        let found = Found {
            session,
            request_id,
            state,
        };
        tenants.insert(id, found);
        Ok(sender)
    }

    /// The task `id` of `tenant`.
    pub fn get(&self, tenant: &str, id: &str) -> Result<Found, Status> {
        self.inner
            .lock()
            .get(tenant)
            .and_then(|tasks| tasks.get(id))
            .cloned()
            .ok_or_else(|| a2a_error(tonic::Code::NotFound, "TASK_NOT_FOUND", "no such task"))
    }

    /// Forgets a task.
    pub fn forget(&self, tenant: &str, id: &str) {
        let mut all = self.inner.lock();
        if let Some(tasks) = all.get_mut(tenant) {
            tasks.remove(id);
            if tasks.is_empty() {
                all.remove(tenant);
            }
        }
    }
}

/// An A2A error as the protocol's gRPC binding has it: the code, and an ErrorInfo of
/// the domain `a2a-protocol.org` with the error's reason (`TASK_NOT_FOUND`, ...).
pub fn a2a_error(code: tonic::Code, reason: &str, message: &str) -> Status {
    let details = tonic_types::ErrorDetails::with_error_info(
        reason,
        "a2a-protocol.org",
        HashMap::<String, String>::new(),
    );
    <Status as tonic_types::StatusExt>::with_error_details(code, message, details)
}

/// Whether a task has ended.
pub fn is_terminal(task: &Task) -> bool {
    matches!(
        task.status.as_ref().map(|s| s.state()),
        Some(TaskState::Completed | TaskState::Failed | TaskState::Canceled | TaskState::Rejected)
    )
}

/// A task that waits for its human.
pub fn working(id: &str, context_id: &str) -> Task {
    Task {
        id: id.to_owned(),
        context_id: context_id.to_owned(),
        status: Some(status(TaskState::Working, None)),
        ..Task::default()
    }
}

/// The task once its ask was answered: the answers as a DataPart artifact
/// (`{"answers": [...]}`, as `ask_user_question` returns them).
pub fn completed(id: &str, context_id: &str, response: &AskResponse) -> Task {
    let answers: serde_json::Value =
        serde_json::from_str(&askgate_contract::tool::answers_text(&response.answers))
            .unwrap_or_default();
    Task {
        id: id.to_owned(),
        context_id: context_id.to_owned(),
        status: Some(status(TaskState::Completed, None)),
        artifacts: vec![Artifact {
            artifact_id: ANSWERS_ARTIFACT.to_owned(),
            name: ANSWERS_ARTIFACT.to_owned(),
            parts: vec![Part {
                media_type: "application/json".to_owned(),
                content: Some(Content::Data(json_value_to_proto_value(&answers))),
                ..Part::default()
            }],
            ..Artifact::default()
        }],
        metadata: Some(metadata(&[
            ("askgate.rpc_id", &response.rpc_id),
            ("askgate.resolution", response.resolution().as_str_name()),
            ("askgate.resolved_by", &response.resolved_by),
        ])),
        ..Task::default()
    }
}

/// The task once its ask ended without answers: CANCELED when the human cancelled it
/// or the caller gave it up (`CancelTask`), FAILED otherwise (it expired, nobody
/// follows the session, ...). The status message says why, with askgate's reason in
/// its metadata.
pub fn ended(id: &str, context_id: &str, error: &Error, rpc_id: Option<&str>) -> Task {
    let state = match error {
        Error::AskCancelled { .. } | Error::AskAborted => TaskState::Canceled,
        _ => TaskState::Failed,
    };
    let message = Message {
        message_id: uuid::Uuid::now_v7().to_string(),
        context_id: context_id.to_owned(),
        task_id: id.to_owned(),
        role: Role::Agent.into(),
        parts: vec![Part {
            content: Some(Content::Text(error.to_string())),
            ..Part::default()
        }],
        metadata: Some(metadata(&[("reason", error.reason())])),
        ..Message::default()
    };
    Task {
        id: id.to_owned(),
        context_id: context_id.to_owned(),
        status: Some(status(state, Some(message))),
        metadata: rpc_id.map(|rpc_id| metadata(&[("askgate.rpc_id", rpc_id)])),
        ..Task::default()
    }
}

fn status(state: TaskState, message: Option<Message>) -> TaskStatus {
    TaskStatus {
        state: state.into(),
        message,
        timestamp: Some(std::time::SystemTime::now().into()),
    }
}

fn metadata(fields: &[(&str, &str)]) -> prost_types::Struct {
    let fields: HashMap<String, serde_json::Value> = fields
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).into()))
        .collect();
    a2a_pb::pbconv::to_proto_struct(&fields)
}

#[cfg(test)]
mod tests {
    use askgate_proto::v1::QuestionAnswer;

    use super::*;

    #[test]
    fn a_completed_task_holds_the_answers_and_an_ended_one_says_why() {
        let response = AskResponse {
            rpc_id: "r".into(),
            answers: vec![QuestionAnswer {
                id: "db".into(),
                selected: vec!["Postgres".into()],
                custom: None,
            }],
            ..AskResponse::default()
        };
        let done = completed("t", "s", &response);
        assert!(is_terminal(&done));
        let Some(Content::Data(data)) = &done.artifacts[0].parts[0].content else {
            panic!("a DataPart: {done:?}");
        };
        assert_eq!(
            a2a_pb::pbconv::proto_value_to_json_value(data),
            serde_json::json!({"answers": [{"id": "db", "selected": ["Postgres"]}]})
        );

        let cancelled = ended(
            "t",
            "s",
            &Error::AskCancelled {
                reason: Some("not now".into()),
                origin: Default::default(),
            },
            Some("r"),
        );
        let status = cancelled.status.expect("a status");
        assert_eq!(status.state(), TaskState::Canceled);
        let message = status.message.expect("a message");
        assert_eq!(
            message.parts[0].content,
            Some(Content::Text(
                "the user cancelled the question: not now".into()
            ))
        );
        let expired = ended("t", "s", &Error::AskExpired, None);
        assert_eq!(expired.status.expect("a status").state(), TaskState::Failed);
        assert!(!is_terminal(&working("t", "s")));
    }

    #[test]
    fn a_tenants_tasks_are_its_own() {
        let tasks = Tasks::default();
        let _running = tasks.start("a", "r", working("t", "s")).expect("started");
        assert_eq!(tasks.get("a", "t").expect("found").request_id, "r");
        let other = tasks.get("b", "t").expect_err("another tenant's");
        assert_eq!(other.code(), tonic::Code::NotFound);
        tasks.forget("a", "t");
        assert!(tasks.get("a", "t").is_err());
    }
}
