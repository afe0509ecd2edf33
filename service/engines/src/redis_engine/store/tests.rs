use askgate_proto::v1::{Question, Resolution, Resolved, subscribe_response::Event};
use askgate_testing::RedisServer;
use prost::Message as _;

use super::*;

fn requested(rpc_id: &str) -> Requested {
    Requested {
        rpc_id: rpc_id.into(),
        session_id: "s".into(),
        questions: vec![Question {
            id: "q".into(),
            question: "ok?".into(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn resolved(rpc_id: &str, reason: Resolution, by: &str) -> Resolved {
    Resolved {
        rpc_id: rpc_id.into(),
        session_id: "s".into(),
        reason: reason.into(),
        resolved_by: by.into(),
        ..Default::default()
    }
}

fn key() -> SessionKey {
    SessionKey::new("acme{x}", "team/s-1")
}

async fn store(redis: &RedisServer) -> RedisStore {
    store_with(redis, StateConfig::default()).await
}

async fn store_with(redis: &RedisServer, config: StateConfig) -> RedisStore {
    RedisStore::connect(&redis.url, config)
        .await
        .expect("connect")
}

#[tokio::test]
async fn register_then_claim_first_wins_and_later_claims_learn_the_resolution() {
    let redis = RedisServer::start().await;
    let store = store(&redis).await;
    let registered = store
        .register(&key(), &requested("r1"), "", None, None)
        .await
        .expect("register");
    let Registration::New { seq, epoch } = registered else {
        panic!("expected a new ask, got {registered:?}");
    };
    assert_eq!(seq, 1);
    assert_eq!(
        store
            .pending_ask(&key(), "r1")
            .await
            .expect("pending")
            .rpc_id,
        "r1"
    );
    assert_eq!(store.pending(&key()).await.expect("list").len(), 1);

    let claimed = store
        .claim(&key(), &resolved("r1", Resolution::Answered, "ana"))
        .await
        .expect("first claim wins");
    assert_eq!(claimed.seq, 2);
    assert_eq!(
        Requested::decode(claimed.asked.as_slice())
            .expect("the ask")
            .rpc_id,
        "r1"
    );
    let late = store
        .claim(&key(), &resolved("r1", Resolution::Cancelled, "bo"))
        .await;
    assert_eq!(
        late,
        Err(Error::NotPending {
            settled: Some(Settled {
                resolution: Resolution::Answered,
                resolved_by: "ana".into()
            })
        })
    );
    assert!(store.pending(&key()).await.expect("list").is_empty());
    let events = store
        .events_after(&key(), &epoch, 0)
        .await
        .expect("history");
    let events = events.expect("held");
    assert_eq!(events.len(), 2);
    assert!(matches!(&events[0], (1, StoredEvent::Requested(r)) if r.rpc_id == "r1"));
    assert!(matches!(&events[1], (2, StoredEvent::Resolved(r)) if r.resolved_by == "ana"));
    assert_eq!(
        store
            .events_after(&key(), "another-epoch", 0)
            .await
            .expect("history"),
        None
    );
}

#[tokio::test]
async fn concurrent_claims_have_exactly_one_winner() {
    let redis = RedisServer::start().await;
    let store = store(&redis).await;
    for round in 0..20 {
        let rpc_id = format!("r{round}");
        store
            .register(&key(), &requested(&rpc_id), "", None, None)
            .await
            .expect("register");
        let claims: Vec<_> = (0..16)
            .map(|i| {
                let (store, rpc_id) = (store.clone(), rpc_id.clone());
                tokio::spawn(async move {
                    let by = format!("ui-{i}");
                    store
                        .claim(&key(), &resolved(&rpc_id, Resolution::Answered, &by))
                        .await
                })
            })
            .collect();
        let mut winners = 0;
        for claim in claims {
            match claim.await.expect("join") {
                Ok(_) => winners += 1,
                Err(e) => assert_eq!(e.reason(), "NOT_PENDING"),
            }
        }
        assert_eq!(winners, 1, "round {round}");
    }
}

#[tokio::test]
async fn a_request_id_joins_while_pending_and_gets_the_recorded_outcome_after() {
    let redis = RedisServer::start().await;
    let store = store(&redis).await;
    assert!(matches!(
        store
            .register(&key(), &requested("r1"), "req", None, None)
            .await
            .expect("register"),
        Registration::New { .. }
    ));
    assert_eq!(
        store
            .register(&key(), &requested("r2"), "req", None, None)
            .await
            .expect("retry"),
        Registration::Joined {
            rpc_id: "r1".into()
        }
    );
    let outcome = resolved("r1", Resolution::Cancelled, "ana");
    store.claim(&key(), &outcome).await.expect("claim");
    assert_eq!(
        store
            .register(&key(), &requested("r3"), "req", None, None)
            .await
            .expect("late retry"),
        Registration::Recorded {
            rpc_id: "r1".into(),
            resolved: Box::new(outcome)
        }
    );
    assert_eq!(store.pending(&key()).await.expect("list").len(), 0);
}

#[tokio::test]
async fn history_is_trimmed_and_an_old_cursor_must_reset() {
    let redis = RedisServer::start().await;
    let store = store_with(
        &redis,
        StateConfig {
            history_len: 4,
            ..StateConfig::default()
        },
    )
    .await;
    for i in 0..5 {
        let rpc_id = format!("r{i}");
        store
            .register(&key(), &requested(&rpc_id), "", None, None)
            .await
            .expect("register");
        store
            .claim(&key(), &resolved(&rpc_id, Resolution::Answered, "a"))
            .await
            .expect("claim");
    }
    let Snapshot { epoch, head, .. } = store.snapshot(&key()).await.expect("head");
    assert!(!epoch.is_empty(), "an epoch");
    assert_eq!(head, 10);
    let recent = store
        .events_after(&key(), &epoch, 7)
        .await
        .expect("history");
    assert_eq!(
        recent
            .expect("held")
            .iter()
            .map(|(n, _)| *n)
            .collect::<Vec<_>>(),
        [8, 9, 10]
    );
    assert_eq!(
        store
            .events_after(&key(), &epoch, 2)
            .await
            .expect("history"),
        None
    );
}

#[tokio::test]
async fn after_a_run_nothing_is_kept_without_an_expiry() {
    let redis = RedisServer::start().await;
    let store = store(&redis).await;
    for i in 0..20 {
        let key = SessionKey::new("acme", format!("s-{i}"));
        let rpc_id = format!("r{i}");
        let request_id = if i % 2 == 0 { "req" } else { "" };
        store
            .register(&key, &requested(&rpc_id), request_id, None, None)
            .await
            .expect("register");
        store
            .claim(&key, &resolved(&rpc_id, Resolution::Answered, "a"))
            .await
            .expect("claim");
    }
    let client = redis::Client::open(redis.url.as_str()).expect("url");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut conn)
        .await
        .expect("keys");
    assert!(!keys.is_empty());
    for key in keys {
        let ttl: i64 = redis::cmd("TTL")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .expect("ttl");
        assert!(ttl > 0, "{key} has no expiry (TTL {ttl})");
    }
}

#[tokio::test]
async fn the_pending_limit_is_enforced_in_the_script() {
    let redis = RedisServer::start().await;
    let store = store_with(
        &redis,
        StateConfig {
            max_pending_per_session: 1,
            ..StateConfig::default()
        },
    )
    .await;
    store
        .register(&key(), &requested("r1"), "", None, None)
        .await
        .expect("first");
    let full = store
        .register(&key(), &requested("r2"), "", None, None)
        .await;
    assert!(matches!(full, Err(Error::TooManyPending(_))));
}

#[tokio::test]
async fn a_busy_session_remembers_how_its_last_history_len_asks_ended_not_every_ask() {
    let redis = RedisServer::start().await;
    let history_len = 3;
    let store = store_with(
        &redis,
        StateConfig {
            history_len,
            ..StateConfig::default()
        },
    )
    .await;
    for round in 0..history_len + 2 {
        let rpc_id = format!("r{round}");
        store
            .register(&key(), &requested(&rpc_id), "", None, None)
            .await
            .expect("register");
        store
            .claim(&key(), &resolved(&rpc_id, Resolution::Answered, "ana"))
            .await
            .expect("claim");
    }
    let settled_of = |rpc_id: &'static str| {
        let store = store.clone();
        async move {
            match store
                .claim(&key(), &resolved(rpc_id, Resolution::Cancelled, "bo"))
                .await
            {
                Err(Error::NotPending { settled }) => settled,
                other => panic!("{rpc_id} is not pending any more, got {other:?}"),
            }
        }
    };
    // The two oldest are forgotten; the last three are remembered.
    assert_eq!(settled_of("r0").await, None);
    assert_eq!(settled_of("r1").await, None);
    for rpc_id in ["r2", "r3", "r4"] {
        assert_eq!(
            settled_of(rpc_id).await.map(|s| s.resolved_by),
            Some("ana".to_owned()),
            "{rpc_id} is among the last {history_len}"
        );
    }
    let mut conn = redis::Client::open(redis.url.as_str())
        .expect("client")
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let keys = SessionKeys::new(&key());
    // Two fields per ask: how it ended, and its `resolved` event.
    let held: usize = conn.hlen(keys.settled()).await.expect("HLEN");
    let order: usize = conn.llen(keys.settled_order()).await.expect("LLEN");
    assert_eq!((held, order), (2 * history_len, history_len));
}

/// A reminder timer fired again by another node (the first died after the notice, before
/// it recorded the timer's progress) sends no second notice of that rank: the stream
/// sees each reminder once, and the caller learns where the first went.
#[tokio::test]
async fn a_notice_of_a_rank_already_sent_is_not_sent_again() {
    use askgate_proto::v1::{Escalated, Reminder};
    let redis = RedisServer::start().await;
    let store = store(&redis).await;
    store
        .register(&key(), &requested("r1"), "", None, None)
        .await
        .expect("register");
    let reminder = |count| {
        Event::Reminder(Reminder {
            rpc_id: "r1".into(),
            session_id: "s".into(),
            count,
            sent_at: None,
        })
    };
    let first = store
        .notice(&key(), "r1", &reminder(1))
        .await
        .expect("notice")
        .expect("pending");
    let again = store
        .notice(&key(), "r1", &reminder(1))
        .await
        .expect("notice")
        .expect("pending");
    assert_eq!((again.seq, &again.epoch), (first.seq, &first.epoch));
    let second = store
        .notice(&key(), "r1", &reminder(2))
        .await
        .expect("notice")
        .expect("pending");
    assert_eq!(second.seq, first.seq + 1);
    let escalated = Event::Escalated(Escalated {
        rpc_id: "r1".into(),
        session_id: "s".into(),
        sent_at: None,
        step: 0,
    });
    let up = store
        .notice(&key(), "r1", &escalated)
        .await
        .expect("notice")
        .expect("pending");
    let up_again = store
        .notice(&key(), "r1", &escalated)
        .await
        .expect("notice")
        .expect("pending");
    assert_eq!(up_again.seq, up.seq);
    // In the history: the ask, reminders 1 and 2, one escalation.
    let Snapshot { epoch, head, .. } = store.snapshot(&key()).await.expect("head");
    assert_eq!(head, 4);
    let events = store
        .events_after(&key(), &epoch, 0)
        .await
        .expect("history")
        .expect("held");
    assert_eq!(events.len(), 4);
}

/// The outbox index has no expiry, so a session must leave it: when its events are
/// given back, and when a sweep finds its outbox gone (expired) with the member left.
#[tokio::test]
async fn a_session_leaves_the_outbox_index_with_its_last_event() {
    let redis = RedisServer::start().await;
    let store = store(&redis).await;
    store.use_outbox();
    let client = redis::Client::open(redis.url.as_str()).expect("url");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let indexed = |mut conn: redis::aio::MultiplexedConnection| async move {
        redis::cmd("ZCARD")
            .arg(crate::redis_engine::keys::OUTBOXES_KEY)
            .query_async::<u64>(&mut conn)
            .await
            .expect("zcard")
    };
    let Registration::New { seq, epoch } = store
        .register(&key(), &requested("r1"), "", None, None)
        .await
        .expect("register")
    else {
        panic!("a new ask");
    };
    assert_eq!(indexed(conn.clone()).await, 1, "the session is indexed");
    store
        .outbox_done(vec![(key(), vec![format!("{epoch} {seq}")])])
        .await
        .expect("given back");
    assert_eq!(
        indexed(conn.clone()).await,
        0,
        "given back: out of the index"
    );

    store
        .register(&key(), &requested("r2"), "", None, None)
        .await
        .expect("register");
    // The outbox expires with the member still indexed: a sweep drops the member.
    let keys = SessionKeys::new(&key());
    let _: () = redis::cmd("DEL")
        .arg(keys.outbox())
        .arg(keys.outbox_data())
        .query_async(&mut conn)
        .await
        .expect("del");
    assert_eq!(indexed(conn.clone()).await, 1);
    let taken = store
        .take_stale(crate::redis_engine::keys::OUTBOXES_KEY, 0)
        .await
        .expect("sweep");
    assert!(taken.is_empty(), "nothing to queue: {taken:?}");
    assert_eq!(indexed(conn).await, 0, "the sweep dropped the session");
}
