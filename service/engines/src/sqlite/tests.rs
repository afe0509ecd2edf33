use std::{sync::Arc, time::Duration};

use askgate_core::{
    backend::{Backend, Scope, StateConfig, SubscribeOptions, hooks::StoreLimits},
    domain::{Error, NewAsk, Outcome, SessionKey},
};
use askgate_proto::v1::{Question, Resolution, subscribe_response::Event};
use tokio_stream::StreamExt;

use super::SqliteEngine;

/// A data directory of a test's own, removed when dropped.
type Scratch = askgate_testing::TempDir;

/// A crash image of the store in `dir`, as kill -9 would leave it: the database and
/// its write-ahead log as they are on disk now, in a new directory.
fn crash_copy(dir: &Scratch) -> Scratch {
    let copy = Scratch::new();
    for name in ["askgate.db", "askgate.db-wal"] {
        let from = dir.0.join(name);
        if from.exists() {
            std::fs::copy(&from, copy.0.join(name)).expect("copy the store");
        }
    }
    copy
}

fn limits() -> StoreLimits {
    StoreLimits {
        max_endpoints: 16,
        max_queued: 1000,
        keep_finished: 100,
        max_people: 4,
    }
}

async fn open(dir: &Scratch, config: StateConfig) -> SqliteEngine {
    SqliteEngine::open(&dir.0, config, limits())
        .await
        .expect("open the store")
}

async fn make(config: StateConfig) -> (Arc<dyn Backend>, Box<dyn std::any::Any + Send>) {
    let dir = Scratch::new();
    let engine = open(&dir, config).await;
    (Arc::new(engine.backend()), Box::new(dir))
}

askgate_core::backend_conformance_suite!(make);

fn key(session: &str) -> SessionKey {
    SessionKey::new("tenant", session)
}

fn ask(session: &str, request_id: &str, grace: Duration) -> NewAsk {
    NewAsk {
        request_id: request_id.into(),
        reattach_grace: grace,
        ..NewAsk::new(
            key(session),
            vec![Question {
                id: "q".into(),
                question: "Deploy?".into(),
                ..Default::default()
            }],
        )
    }
}

#[tokio::test]
async fn a_pending_ask_and_a_recorded_outcome_survive_a_crash() {
    let dir = Scratch::new();
    let engine = open(&dir, StateConfig::default()).await;
    let backend = engine.backend();
    let pending = backend
        .register(ask("s", "pending-one", Duration::from_secs(60)))
        .await
        .expect("register");
    let answered = backend
        .register(ask("s", "answered-one", Duration::from_secs(60)))
        .await
        .expect("register");
    backend
        .claim(&key("s"), &answered.rpc_id, Outcome::aborted())
        .await
        .expect("claim: acknowledged once durable");
    let copy = crash_copy(&dir);

    let restored = open(&copy, StateConfig::default()).await.backend();
    let listed = restored.list_pending(&key("s")).await.expect("list");
    assert_eq!(listed.len(), 1, "the pending ask is back: {listed:?}");
    assert_eq!(listed[0].rpc_id, pending.rpc_id, "with its rpc_id");
    // Each request id still names its own ask only.
    for request_id in ["pending-one", "answered-one"] {
        let mut other = ask("s", request_id, Duration::from_secs(60));
        other.questions[0].question = "Roll back?".into();
        let reused = restored.register(other).await.map(|r| r.rpc_id);
        assert!(
            matches!(reused, Err(Error::RequestIdReused)),
            "{request_id}: {reused:?}"
        );
    }
    let retried = restored
        .register(ask("s", "pending-one", Duration::from_secs(60)))
        .await
        .expect("a retry joins");
    assert_eq!(retried.rpc_id, pending.rpc_id);
    let recorded = restored
        .register(ask("s", "answered-one", Duration::from_secs(60)))
        .await
        .expect("a retry of the answered one");
    assert_eq!(recorded.rpc_id, answered.rpc_id);
    let outcome = recorded.outcome.await.expect("the recorded outcome");
    assert_eq!(outcome.resolution, Resolution::Aborted);
    restored
        .claim(&key("s"), &pending.rpc_id, Outcome::aborted())
        .await
        .expect("the restored ask is answerable");
    assert_eq!(
        retried.outcome.await.expect("outcome").resolution,
        Resolution::Aborted
    );
}

/// A store written before pending asks were keyed by their order (schema version 4)
/// keeps them through the migration, each answerable and removed by its order.
#[tokio::test]
async fn pending_asks_of_a_version_4_store_survive_the_migration() {
    let dir = Scratch::new();
    let backend = open(&dir, StateConfig::default()).await.backend();
    let mut pending = Vec::new();
    for session in ["a", "b", "a"] {
        let registered = backend
            .register(ask(session, "", Duration::from_secs(60)))
            .await
            .expect("register");
        pending.push((session, registered.rpc_id));
    }
    backend.synced().await.expect("on disk");
    let copy = crash_copy(&dir);
    let old = rusqlite::Connection::open(copy.0.join("askgate.db")).expect("a connection");
    old.execute_batch(
        "BEGIN;
         CREATE TABLE asks_v4 (
             tenant TEXT NOT NULL, session_id TEXT NOT NULL, rpc_id TEXT NOT NULL,
             seq INTEGER NOT NULL, ord INTEGER NOT NULL, bytes INTEGER NOT NULL,
             request_id TEXT NOT NULL, reattach_grace_ms INTEGER NOT NULL,
             requested BLOB NOT NULL, PRIMARY KEY (tenant, session_id, rpc_id)
         ) WITHOUT ROWID;
         INSERT INTO asks_v4 SELECT tenant, session_id, rpc_id, seq, ord, bytes, request_id,
             reattach_grace_ms, requested FROM asks;
         DROP TABLE asks;
         ALTER TABLE asks_v4 RENAME TO asks;
         DROP TABLE people;
         DROP TABLE policies;
         DROP TABLE grants;
         PRAGMA user_version = 4;
         COMMIT;",
    )
    .expect("the store as version 4 wrote it");
    drop(old);

    let restored = open(&copy, StateConfig::default()).await.backend();
    let layout: String = rusqlite::Connection::open(copy.0.join("askgate.db"))
        .expect("a connection")
        .query_row(
            "SELECT sql FROM sqlite_master WHERE name = 'asks'",
            [],
            |row| row.get(0),
        )
        .expect("the asks table");
    assert!(
        layout.contains("ord INTEGER PRIMARY KEY"),
        "migrated: {layout}"
    );
    for session in ["a", "b"] {
        let listed: Vec<String> = restored
            .list_pending(&key(session))
            .await
            .expect("list")
            .into_iter()
            .map(|ask| ask.rpc_id)
            .collect();
        let expected: Vec<String> = pending
            .iter()
            .filter(|(s, _)| *s == session)
            .map(|(_, rpc_id)| rpc_id.clone())
            .collect();
        assert_eq!(listed, expected, "session {session}, in their order");
    }
    let (session, rpc_id) = &pending[1];
    restored
        .claim(&key(session), rpc_id, Outcome::aborted())
        .await
        .expect("a migrated ask is answerable");
    restored.synced().await.expect("on disk");
    let again = open(&crash_copy(&copy), StateConfig::default())
        .await
        .backend();
    assert!(
        again
            .list_pending(&key("b"))
            .await
            .expect("list")
            .is_empty(),
        "its removal by order reached the store"
    );
    assert_eq!(again.list_pending(&key("a")).await.expect("list").len(), 2);
}

#[tokio::test]
async fn a_subscriber_resumes_its_cursor_after_a_crash() {
    let dir = Scratch::new();
    let backend = open(&dir, StateConfig::default()).await.backend();
    let first = backend
        .register(ask("s", "", Duration::from_secs(60)))
        .await
        .expect("register");
    let mut stream = backend
        .subscribe(Scope::Session(key("s")), SubscribeOptions::default())
        .await
        .expect("subscribe");
    let mut cursor = String::new();
    while let Some(Ok(message)) = stream.next().await {
        cursor = message.cursor.clone();
        if matches!(message.event, Some(Event::Synced(_))) {
            break;
        }
    }
    backend
        .claim(&key("s"), &first.rpc_id, Outcome::aborted())
        .await
        .expect("claim");
    let copy = crash_copy(&dir);

    let restored = open(&copy, StateConfig::default()).await.backend();
    let mut resumed = restored
        .subscribe(
            Scope::Session(key("s")),
            SubscribeOptions {
                after: Some(cursor),
                ..Default::default()
            },
        )
        .await
        .expect("resume");
    let next = tokio::time::timeout(Duration::from_secs(5), resumed.next())
        .await
        .expect("an event within 5 s")
        .expect("the stream is open")
        .expect("no error");
    let Some(Event::Resolved(resolved)) = &next.event else {
        panic!("expected the missed resolved event, not a reset: {next:?}");
    };
    assert_eq!(resolved.rpc_id, first.rpc_id);
}

#[tokio::test]
async fn an_ask_without_a_grace_ends_aborted_at_restart() {
    let dir = Scratch::new();
    let backend = open(&dir, StateConfig::default()).await.backend();
    let pending = backend
        .register(ask("s", "r", Duration::ZERO))
        .await
        .expect("register");
    backend.synced().await.expect("on disk");
    let copy = crash_copy(&dir);
    let restored = open(&copy, StateConfig::default()).await.backend();
    let retried = restored
        .register(ask("s", "r", Duration::ZERO))
        .await
        .expect("a retry");
    assert_eq!(retried.rpc_id, pending.rpc_id);
    let outcome = tokio::time::timeout(Duration::from_secs(5), retried.outcome)
        .await
        .expect("settled within 5 s")
        .expect("outcome");
    assert_eq!(outcome.resolution, Resolution::Aborted);
}

/// A restored ask whose deadline comes before the end of its reattach grace ends
/// EXPIRED at its deadline.
#[tokio::test]
async fn a_restored_ask_expires_at_its_deadline() {
    let dir = Scratch::new();
    let backend = open(&dir, StateConfig::default()).await.backend();
    let mut soon = ask("s", "soon", Duration::from_secs(600));
    soon.expires_at = Some(std::time::SystemTime::now() + Duration::from_millis(500));
    let pending = backend.register(soon.clone()).await.expect("register");
    backend.synced().await.expect("on disk");
    let copy = crash_copy(&dir);
    let restored = open(&copy, StateConfig::default()).await.backend();
    let retried = restored.register(soon).await.expect("a retry joins");
    assert_eq!(retried.rpc_id, pending.rpc_id);
    let outcome = tokio::time::timeout(Duration::from_secs(10), retried.outcome)
        .await
        .expect("settled within 10 s")
        .expect("outcome");
    assert_eq!(outcome.resolution, Resolution::Expired);
}

/// Semantics 7 across a crash: a restored lease ends a reconnect grace after the
/// restart (its agent did not attach again), and the asks made under it end ABORTED.
#[tokio::test]
async fn a_restored_lease_nobody_renews_ends_with_its_asks() {
    let dir = Scratch::new();
    let backend = open(&dir, StateConfig::default()).await.backend();
    let holder = askgate_core::backend::Holder {
        subject: "worker".into(),
        may_take_over: false,
    };
    let attached = backend
        .attach("tenant", "agent-1", "", &holder)
        .await
        .expect("attach");
    let mut under_lease = ask("s", "leased", Duration::from_secs(600));
    under_lease.agent = Some(askgate_proto::v1::AgentRef {
        agent_id: "agent-1".into(),
        incarnation: attached.incarnation.clone(),
    });
    let pending = backend
        .register(under_lease.clone())
        .await
        .expect("register");
    backend.synced().await.expect("on disk");
    let copy = crash_copy(&dir);

    let config = StateConfig {
        reconnect_grace: Duration::from_millis(300),
        ..StateConfig::default()
    };
    let restored = open(&copy, config).await.backend();
    let retried = restored
        .register(under_lease)
        .await
        .expect("a retry joins the restored ask");
    assert_eq!(retried.rpc_id, pending.rpc_id);
    let outcome = tokio::time::timeout(Duration::from_secs(10), retried.outcome)
        .await
        .expect("the lease ends within 10 s")
        .expect("outcome");
    assert_eq!(outcome.resolution, Resolution::Aborted);
}

/// A write that fails stops the writer: nothing after it is acknowledged, new writes
/// are refused BACKEND_UNAVAILABLE, the engine reports itself unhealthy, and the data
/// directory stays held.
#[tokio::test]
async fn a_failed_write_stops_acknowledging_and_keeps_the_directory() {
    let dir = Scratch::new();
    let backend = open(&dir, StateConfig::default()).await.backend();
    assert!(backend.healthy().await);
    // Another connection takes a table away: the writer's next insert fails.
    let other = rusqlite::Connection::open(dir.0.join("askgate.db")).expect("a connection");
    other
        .busy_timeout(Duration::from_secs(5))
        .expect("busy timeout");
    other.execute_batch("DROP TABLE asks").expect("drop");
    let registered = backend
        .register(ask("s", "", Duration::ZERO))
        .await
        .expect("registered in memory");
    let refused = backend.synced().await.expect_err("not on disk");
    assert!(
        matches!(refused, askgate_core::domain::Error::BackendUnavailable(_)),
        "{refused}"
    );
    assert!(!backend.healthy().await);
    let claim = backend
        .claim(&key("s"), &registered.rpc_id, Outcome::aborted())
        .await;
    assert!(claim.is_err(), "a claim is not acknowledged: {claim:?}");
    let again = backend.register(ask("s", "", Duration::ZERO)).await;
    assert!(
        matches!(
            again,
            Err(askgate_core::domain::Error::BackendUnavailable(_))
        ),
        "new work is refused: {:?}",
        again.err()
    );
    let held = super::DataDir::open(&dir.0).expect_err("still held");
    assert!(matches!(held, super::DirError::InUse(_)), "{held}");
}

mod hooks {
    use std::sync::Arc;

    use askgate_core::{
        backend::{
            StateConfig,
            hooks::{
                HookStore, Shares,
                conformance::{LIMITS, Made},
                records::{DeliveryRecord, EndpointRecord, EventType, Status, TimerRecord},
            },
        },
        hook_store_conformance_suite,
    };

    use super::{Scratch, SqliteEngine, crash_copy};

    async fn make() -> Made {
        let dir = Scratch::new();
        let engine = SqliteEngine::open(&dir.0, StateConfig::default(), LIMITS)
            .await
            .expect("open the store");
        (Arc::new(engine.hook_store()), Box::new(dir))
    }

    hook_store_conformance_suite!(make);

    fn endpoint() -> EndpointRecord {
        EndpointRecord {
            id: "ep_1".into(),
            tenant: "tenant".into(),
            url: "https://hooks.example/in".into(),
            events: vec![EventType::Requested],
            description: "ops".into(),
            labels: Default::default(),
            secret: "whsec_c2VjcmV0".into(),
            provides: false,
            created_ms: 1,
            session_prefix: String::new(),
            slack: None,
            channel: None,
        }
    }

    fn delivery(id: &str) -> DeliveryRecord {
        DeliveryRecord {
            id: id.into(),
            tenant: "tenant".into(),
            endpoint_id: "ep_1".into(),
            event_type: EventType::Requested,
            session_id: "s".into(),
            rpc_id: "r".into(),
            body: "{}".into(),
            status: Status::Pending,
            attempts: 0,
            last_error: String::new(),
            created_ms: 1,
            retry_until_ms: u64::MAX,
            next_attempt_ms: 0,
            last_attempt_ms: 0,
            traceparent: String::new(),
        }
    }

    #[tokio::test]
    async fn endpoints_deliveries_timers_notes_and_people_survive_a_crash() {
        let dir = Scratch::new();
        let engine = SqliteEngine::open(&dir.0, StateConfig::default(), LIMITS)
            .await
            .expect("open");
        let store = engine.hook_store();
        let made = askgate_core::backend::hooks::conformance::change("tenant", "made");
        store
            .create_endpoint(&endpoint(), &made)
            .await
            .expect("endpoint");
        let queued = store
            .enqueue("tenant", &[delivery("d1"), delivery("d2")])
            .await
            .expect("enqueue");
        assert_eq!(queued, 2);
        let claimed = store
            .claim_deliveries(10, 20, 1, &Shares::unlimited())
            .await
            .expect("claim");
        let mut done = claimed[0].clone();
        done.status = Status::Delivered;
        done.last_attempt_ms = 15;
        assert!(store.finish_attempt(&done).await.expect("finish"));
        let timer = TimerRecord {
            tenant: "tenant".into(),
            session_id: "s".into(),
            rpc_id: "r".into(),
            asked_ms: 1,
            remind_after_ms: 100,
            remind_every_ms: 0,
            max_reminders: 1,
            escalate_after_ms: 0,
            reminders: 0,
            escalated: false,
            steps: Vec::new(),
            steps_done: 0,
        };
        store.schedule(&timer, 500).await.expect("schedule");
        assert!(
            store
                .put_note("slack:msg", "C1/123.4", 60_000, true)
                .await
                .expect("note")
        );
        let ana = askgate_core::backend::hooks::records::PersonRecord {
            tenant: "tenant".into(),
            id: "ana".into(),
            display_name: "Ana".into(),
            groups: vec!["ops".into()],
            identities: vec!["ana".into(), "telegram:42".into()],
            delegate: None,
            updated_ms: 1,
        };
        let put = askgate_core::backend::hooks::conformance::change("tenant", "person");
        store.put_person(&ana, &put).await.expect("a person");
        let copy = crash_copy(&dir);

        let restored = SqliteEngine::open(&copy.0, StateConfig::default(), LIMITS)
            .await
            .expect("reopen")
            .hook_store();
        assert_eq!(
            restored.endpoints("tenant").await.expect("list"),
            vec![endpoint()]
        );
        assert_eq!(
            restored
                .person_of("tenant", "telegram:42")
                .await
                .expect("a person"),
            Some(ana)
        );
        let listed = restored
            .deliveries("tenant", None, None, 10)
            .await
            .expect("deliveries");
        let statuses: Vec<(String, Status)> =
            listed.iter().map(|d| (d.id.clone(), d.status)).collect();
        assert_eq!(
            statuses,
            vec![
                ("d2".into(), Status::Pending),
                ("d1".into(), Status::Delivered)
            ],
            "newest first, as they were"
        );
        let due = restored
            .claim_deliveries(30, 40, 10, &Shares::unlimited())
            .await
            .expect("claim after the restart");
        assert_eq!(due.len(), 1, "the pending one is still to deliver: {due:?}");
        assert_eq!(due[0].id, "d2", "with the same webhook-id");
        let timers = restored.claim_timers(600, 700, 10).await.expect("timers");
        assert_eq!(timers, vec![timer]);
        assert_eq!(
            restored.note("slack:msg").await.expect("note").as_deref(),
            Some("C1/123.4")
        );
    }

    /// An admin change's audit record is written with the change, in one commit: a
    /// crash right after the change is acknowledged keeps both, and nothing waits to
    /// be appended.
    #[tokio::test]
    async fn an_admin_changes_record_is_in_the_changes_own_commit() {
        use askgate_core::backend::{audit::AuditStore, hooks::conformance::change};
        let dir = Scratch::new();
        let engine = SqliteEngine::open(&dir.0, StateConfig::default(), LIMITS)
            .await
            .expect("open");
        let store = engine.hook_store();
        store
            .create_endpoint(&endpoint(), &change("tenant", "created"))
            .await
            .expect("endpoint");
        assert!(
            store
                .delete_endpoint("tenant", &endpoint().id, &change("tenant", "deleted"))
                .await
                .expect("delete")
        );
        assert!(store.unaudited(10).await.expect("unaudited").is_empty());
        let copy = crash_copy(&dir);
        let restored = SqliteEngine::open(&copy.0, StateConfig::default(), LIMITS)
            .await
            .expect("reopen");
        let records = restored
            .audit_store()
            .export("tenant", 0, 10)
            .await
            .expect("export");
        assert_eq!(records.len(), 2, "{records:?}");
        assert_eq!(askgate_core::backend::audit::verify(&records), Ok(2));
    }
}

/// A resolution's audit record is written in the resolution's own commit, by the
/// engine: a crash right after the claim is acknowledged keeps both. The node's intake,
/// which reports the same event, does not append it twice.
#[tokio::test]
async fn a_resolutions_audit_record_is_in_its_own_commit() {
    use askgate_core::backend::audit::{self, AuditStore};
    let dir = Scratch::new();
    let engine = open(&dir, StateConfig::default()).await;
    let backend = engine.backend();
    let asked = backend
        .register(ask("s", "one", Duration::from_secs(60)))
        .await
        .expect("register");
    backend
        .claim(&key("s"), &asked.rpc_id, Outcome::aborted())
        .await
        .expect("claim: acknowledged once durable");
    let copy = crash_copy(&dir);
    let restored = open(&copy, StateConfig::default()).await;
    let records = restored
        .audit_store()
        .export("tenant", 0, 10)
        .await
        .expect("export");
    assert_eq!(records.len(), 1, "the resolution's record: {records:?}");
    let body: serde_json::Value = serde_json::from_str(&records[0].body_json).expect("JSON");
    assert_eq!(body["kind"], "ask.resolved");
    assert_eq!(body["rpc_id"], asked.rpc_id.as_str());
    assert_eq!(body["resolution"], "ABORTED");

    let reported = askgate_proto::v1::Resolved {
        session_id: "s".into(),
        rpc_id: asked.rpc_id.clone(),
        ..Default::default()
    };
    let again = audit::resolution("tenant", &reported, None);
    let store = engine.audit_store();
    store.append(vec![again]).await.expect("append");
    let records = store.export("tenant", 0, 10).await.expect("export");
    assert_eq!(records.len(), 1, "appended once: {records:?}");
}

async fn audit_log() -> askgate_core::backend::audit::conformance::Made {
    let dir = Scratch::new();
    let audit = open(&dir, StateConfig::default()).await.audit_store();
    (audit.clone(), audit, Box::new(dir))
}

askgate_core::audit_store_conformance_suite!(audit_log);

#[tokio::test]
async fn the_audit_log_keeps_the_rules_and_survives_a_restart() {
    use askgate_core::backend::audit::{AuditStore, conformance, verify};
    let dir = Scratch::new();
    let engine = open(&dir, StateConfig::default()).await;
    let audit: Arc<dyn AuditStore> = engine.audit_store();
    conformance::appends_from_every_node_chain_into_one_log_per_tenant(audit.clone(), audit).await;
    // What was appended is on disk, as kill -9 would leave it.
    let copy = crash_copy(&dir);
    let engine = open(&copy, StateConfig::default()).await;
    let audit = engine.audit_store();
    let before = audit.export("acme", 0, 100).await.expect("export");
    assert_eq!(before.iter().map(|r| r.seq).collect::<Vec<_>>(), [43, 44]);
    audit
        .append(vec![conformance::entry("acme", "after-restart")])
        .await
        .expect("append");
    let after = audit.export("acme", 0, 100).await.expect("export");
    assert_eq!(verify(&after), Ok(3), "the chain goes on from where it was");
}

#[tokio::test]
async fn a_consumed_receipt_stays_consumed_after_a_crash() {
    use askgate_core::backend::audit::{AuditStore, Consumed, conformance, consumption};
    let dir = Scratch::new();
    let engine = open(&dir, StateConfig::default()).await;
    let audit: Arc<dyn AuditStore> = engine.audit_store();
    conformance::a_receipt_is_consumed_once_whichever_node_is_asked(audit.clone(), audit.clone())
        .await;
    let until = std::time::SystemTime::now() + Duration::from_secs(600);
    let record = || consumption("acme", "r-9", "s", "exec", "approved");
    let Consumed::Now(at) = audit
        .consume(record(), "r-9", until)
        .await
        .expect("consume")
    else {
        panic!("the first use")
    };
    // Acknowledged, so on disk: kill -9 now, and the use is still there.
    let copy = crash_copy(&dir);
    let engine = open(&copy, StateConfig::default()).await;
    let audit = engine.audit_store();
    assert_eq!(
        audit
            .consume(record(), "r-9", until)
            .await
            .expect("consume"),
        Consumed::Before(at)
    );
    let head = audit.head("acme").await.expect("head");
    assert_eq!(head.seq, 1, "its record too");
}

#[tokio::test]
async fn a_quorum_asks_votes_survive_a_crash() {
    use askgate_core::domain::quorum::{Vote, Voted};
    let vote = |subject: &str| Vote {
        subject: subject.into(),
        channel: "console".into(),
        key: "A".into(),
        person: String::new(),
    };
    let dir = Scratch::new();
    let engine = open(&dir, StateConfig::default()).await;
    let backend = engine.backend();
    let registered = backend
        .register(ask("s", "quorum", Duration::from_secs(60)))
        .await
        .expect("register");
    // The vote's audit record is written in the vote's own commit.
    let record = askgate_core::backend::audit::conformance::entry("tenant", "vote-ana");
    assert_eq!(
        backend
            .vote(&key("s"), &registered.rpc_id, vote("ana"), 2, Some(record))
            .await,
        Ok(Voted::Recorded { count: 1 })
    );
    let copy = crash_copy(&dir);
    let restored = open(&copy, StateConfig::default()).await;
    let records =
        askgate_core::backend::audit::AuditStore::export(&*restored.audit_store(), "tenant", 0, 10)
            .await
            .expect("export");
    assert_eq!(records.len(), 1, "the vote's record: {records:?}");
    let restored = restored.backend();
    assert_eq!(
        restored
            .vote(&key("s"), &registered.rpc_id, vote("ana"), 2, None)
            .await,
        Err(askgate_core::domain::Error::AlreadyApproved),
        "the acknowledged vote is back"
    );
    let Ok(Voted::Complete(votes)) = restored
        .vote(&key("s"), &registered.rpc_id, vote("bo"), 2, None)
        .await
    else {
        panic!("the quorum completes");
    };
    assert_eq!(votes.len(), 2);
}

/// The store holds no more than the node does: the events the session's history
/// dropped leave it, and so do a resolved quorum ask's votes.
#[tokio::test]
async fn trimmed_events_and_a_resolved_asks_votes_leave_the_store() {
    use askgate_core::domain::quorum::{Vote, Voted};
    let dir = Scratch::new();
    let config = StateConfig {
        history_len: 3,
        ..StateConfig::default()
    };
    let backend = open(&dir, config).await.backend();
    // A pending ask keeps the session (and its history) in place.
    backend
        .register(ask("s", "", Duration::from_secs(60)))
        .await
        .expect("register");
    for _ in 0..4 {
        let registered = backend
            .register(ask("s", "", Duration::from_secs(60)))
            .await
            .expect("register");
        backend
            .claim(&key("s"), &registered.rpc_id, Outcome::aborted())
            .await
            .expect("claim");
    }
    let quorum = backend
        .register(ask("q", "", Duration::from_secs(60)))
        .await
        .expect("register");
    let vote = Vote {
        subject: "ana".into(),
        channel: "console".into(),
        key: "A".into(),
        person: String::new(),
    };
    assert_eq!(
        backend.vote(&key("q"), &quorum.rpc_id, vote, 2, None).await,
        Ok(Voted::Recorded { count: 1 })
    );
    backend
        .claim(&key("q"), &quorum.rpc_id, Outcome::aborted())
        .await
        .expect("claim");
    backend.synced().await.expect("on disk");

    let store = rusqlite::Connection::open(dir.0.join("askgate.db")).expect("a connection");
    let count = |sql: &str| -> i64 {
        store
            .query_row(sql, [], |row| row.get(0))
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    };
    let seqs: Vec<i64> = store
        .prepare("SELECT seq FROM events WHERE session_id = 's' ORDER BY seq")
        .expect("prepare")
        .query_map([], |row| row.get(0))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    assert_eq!(seqs, [7, 8, 9], "the session's last three events of nine");
    assert_eq!(count("SELECT count(*) FROM votes"), 0, "the votes went");
    assert_eq!(count("SELECT count(*) FROM asks"), 1, "one ask is pending");
}
