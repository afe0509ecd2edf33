use askgate_engines::memory::MemoryBackend;
use std::time::Duration;

use askgate_proto::v1::{
    AskRequest, Question, QuestionOption, Resolution, subscribe_response::Event,
};
use async_trait::async_trait;
use tokio::sync::Semaphore;
use tokio_stream::StreamExt;

use super::*;
use crate::backend::{Registered, StateConfig, Stats};

/// The memory backend, except that a registration, once the ask is stored and
/// announced, waits for a permit before it returns: the window in which a Redis
/// node has published `requested` but not yet read the script's reply.
struct SlowRegistration {
    inner: MemoryBackend,
    permits: Arc<Semaphore>,
}

#[async_trait]
impl Backend for SlowRegistration {
    async fn hold(
        &self,
        tenant: &str,
        budget: Budget,
        max: usize,
    ) -> Result<crate::backend::BudgetHold, Error> {
        self.inner.hold(tenant, budget, max).await
    }
    async fn register(&self, ask: NewAsk) -> Result<Registered, Error> {
        let registered = self.inner.register(ask).await;
        let _permit = self.permits.acquire().await.expect("open");
        registered
    }
    async fn pending(&self, key: &SessionKey, rpc_id: &str) -> Result<Requested, Error> {
        self.inner.pending(key, rpc_id).await
    }
    async fn claim(&self, key: &SessionKey, rpc_id: &str, outcome: Outcome) -> Result<(), Error> {
        self.inner.claim(key, rpc_id, outcome).await
    }
    async fn abandon(&self, key: &SessionKey, rpc_id: &str) -> Result<(), Error> {
        self.inner.abandon(key, rpc_id).await
    }
    async fn vote(
        &self,
        key: &SessionKey,
        rpc_id: &str,
        vote: crate::domain::quorum::Vote,
        needed: u32,
        record: Option<crate::backend::audit::AuditEntry>,
    ) -> Result<crate::domain::quorum::Voted, Error> {
        self.inner.vote(key, rpc_id, vote, needed, record).await
    }
    async fn subscribe(
        &self,
        scope: Scope,
        options: SubscribeOptions,
    ) -> Result<EventStream, Error> {
        self.inner.subscribe(scope, options).await
    }
    async fn list_pending(&self, key: &SessionKey) -> Result<Vec<Requested>, Error> {
        self.inner.list_pending(key).await
    }
    async fn abort_request(
        &self,
        key: &SessionKey,
        request_id: &str,
        resolved: askgate_proto::v1::Resolved,
    ) -> Result<crate::backend::RequestAbort, Error> {
        self.inner.abort_request(key, request_id, resolved).await
    }
    async fn notify(
        &self,
        key: &SessionKey,
        rpc_id: &str,
        notice: askgate_proto::v1::subscribe_response::Event,
    ) -> Result<Option<crate::backend::Noticed>, Error> {
        self.inner.notify(key, rpc_id, notice).await
    }
    fn set_tap(&self, tap: crate::backend::Tap) {
        self.inner.set_tap(tap);
    }
    async fn attach(
        &self,
        tenant: &str,
        agent_id: &str,
        parent: &str,
        holder: &Holder,
    ) -> Result<Attached, Error> {
        self.inner.attach(tenant, agent_id, parent, holder).await
    }
    async fn detach(&self, tenant: &str, agent_id: &str, incarnation: &str) {
        self.inner.detach(tenant, agent_id, incarnation).await
    }
    async fn healthy(&self) -> bool {
        self.inner.healthy().await
    }
    async fn stats(&self) -> Stats {
        self.inner.stats().await
    }
    async fn dispose_all(&self) {
        self.inner.dispose_all().await
    }
}

async fn next(events: &mut EventStream) -> Event {
    tokio::time::timeout(Duration::from_secs(10), events.next())
        .await
        .expect("an event within 10s")
        .expect("the stream goes on")
        .expect("no error")
        .event
        .clone()
        .expect("an event")
}

/// The node's questions over `backend`, with room for the tests' asks.
fn questions_over(backend: Arc<dyn Backend>) -> Questions {
    Questions::new(
        backend,
        Limits::default(),
        Metrics::new(false),
        AskRate {
            per_second: 100,
            burst: 100,
        },
    )
}

/// A one-question batch in session `s`, checked for tenant `t`.
fn checked_ask(questions: &Questions) -> CheckedAsk {
    let request = AskRequest {
        session_id: "s".into(),
        questions: vec![Question {
            id: "q".into(),
            question: "Go?".into(),
            options: vec![QuestionOption {
                label: "yes".into(),
                description: None,
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    questions
        .check_ask(
            "t",
            "agent",
            request,
            Instant::now() + Duration::from_secs(60),
        )
        .expect("a valid ask")
}

#[tokio::test]
async fn a_call_dropped_while_its_registration_is_in_flight_leaves_no_ask_pending() {
    let permits = Arc::new(Semaphore::new(0));
    let backend = Arc::new(SlowRegistration {
        inner: MemoryBackend::new(StateConfig::default()),
        permits: permits.clone(),
    });
    let questions = questions_over(backend.clone());
    let mut events = questions
        .subscribe(
            "t",
            None,
            SubscribeRequest {
                session_id: "s".into(),
                ..Default::default()
            },
        )
        .await
        .expect("subscribe");
    assert!(matches!(next(&mut events).await, Event::Synced(_)));

    let checked = checked_ask(&questions);
    let asking = questions.clone();
    let call = tokio::spawn(async move { asking.ask(checked).await });
    let Event::Requested(requested) = next(&mut events).await else {
        panic!("expected requested");
    };

    // The caller goes away before its node has seen the registration finish.
    call.abort();
    let _ = call.await;
    permits.add_permits(1);

    let Event::Resolved(resolved) = next(&mut events).await else {
        panic!("expected resolved");
    };
    assert_eq!(resolved.rpc_id, requested.rpc_id);
    assert_eq!(resolved.reason(), Resolution::Aborted);
    let key = SessionKey::new("t", "s".to_owned());
    assert!(backend.list_pending(&key).await.expect("list").is_empty());
}

/// A chat channel never collects a secret answer (it links to the console); it may
/// still cancel the ask, and answer one without secrets.
#[test]
fn chat_channels_answer_no_secret_question_but_may_cancel() {
    let mut pending = Requested {
        questions: vec![Question {
            id: "code".into(),
            question: "The code?".into(),
            secret: true,
            ..Default::default()
        }],
        ..Default::default()
    };
    let from = |channel: &str| Resolver::new("ana", channel);
    for chat in ["slack", "telegram", "email", "ntfy"] {
        assert!(matches!(
            may_answer(&pending, &from(chat)),
            Err(Error::ChannelNotAllowed { .. })
        ));
        assert!(allowed(&pending, &from(chat)).is_ok(), "{chat} may cancel");
    }
    for own in ["console", "tui", "cli", "grpc"] {
        assert!(may_answer(&pending, &from(own)).is_ok(), "{own}");
    }
    pending.questions[0].secret = false;
    assert!(may_answer(&pending, &from("slack")).is_ok());
}

/// What a waiting Ask's own future holds is memory per pending ask (docs/performance.md
/// profiles it): printed for a profile, and bounded so that a field added to it by
/// accident shows up here rather than in a capacity benchmark.
#[test]
fn a_waiting_asks_future_stays_small() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime");
    let _entered = runtime.enter();
    let questions = questions_over(Arc::new(MemoryBackend::new(StateConfig::default())));
    let checked = checked_ask(&questions);
    let future = questions.ask(checked);
    let bytes = std::mem::size_of_val(&future);
    println!(
        "Questions::ask future: {bytes} bytes; Span {}, SettleOnDrop {}, Outcome {}, Sleep {}, Registered {}",
        std::mem::size_of::<tracing::Span>(),
        std::mem::size_of::<super::asking::SettleOnDrop>(),
        std::mem::size_of::<Outcome>(),
        std::mem::size_of::<tokio::time::Sleep>(),
        std::mem::size_of::<crate::backend::Registered>(),
    );
    assert!(bytes <= 1024, "the Ask future grew to {bytes} bytes");
}
