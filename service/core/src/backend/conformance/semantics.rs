//! Semantics 1-6: store then broadcast, the first claim wins, replay and resume,
//! lag, exclusive subscribers, limits, dispose.

use super::*;

pub async fn register_stores_then_broadcasts_and_a_claim_wins_once(make: impl Make) {
    let (backend, _guard) = default_backend(make).await;
    let mut events = subscribe(&backend, "s").await;
    assert!(replay(&mut events).await.0.is_empty());
    let registered = backend.register(ask("s")).await.expect("register");
    let Event::Requested(requested) = next(&mut events).await else {
        panic!("expected requested");
    };
    assert_eq!(requested.rpc_id, registered.rpc_id);
    let pending = backend.pending(&key("s"), &registered.rpc_id).await;
    assert_eq!(pending.expect("pending"), requested);

    backend
        .claim(&key("s"), &registered.rpc_id, answered())
        .await
        .expect("first claim wins");
    assert_eq!(
        registered.outcome.await.expect("outcome").as_ref(),
        &answered()
    );
    let Event::Resolved(resolved) = next(&mut events).await else {
        panic!("expected resolved");
    };
    assert_eq!(resolved.reason(), Resolution::Answered);

    let again = backend
        .claim(&key("s"), &registered.rpc_id, Outcome::cancelled(None, "x"))
        .await;
    assert_eq!(
        again,
        Err(Error::NotPending {
            settled: Some(Settled {
                resolution: Resolution::Answered,
                resolved_by: "tester".into(),
            })
        })
    );
    let wrong_session = backend
        .claim(&key("t"), &registered.rpc_id, answered())
        .await;
    assert!(matches!(wrong_session, Err(Error::NotPending { .. })));
}

pub async fn concurrent_claims_have_exactly_one_winner(make: impl Make) {
    let (backend, _guard) = default_backend(make).await;
    for _ in 0..50 {
        let registered = backend.register(ask("s")).await.expect("register");
        let claims: Vec<_> = (0..16)
            .map(|i| {
                let (backend, rpc_id) = (backend.clone(), registered.rpc_id.clone());
                tokio::spawn(async move {
                    let outcome = Outcome::cancelled(Some(i.to_string()), "x");
                    backend.claim(&key("s"), &rpc_id, outcome).await.map(|()| i)
                })
            })
            .collect();
        let mut winners = Vec::new();
        for claim in claims {
            if let Ok(i) = claim.await.expect("join") {
                winners.push(i);
            }
        }
        assert_eq!(winners.len(), 1);
        let outcome = registered.outcome.await.expect("outcome");
        assert_eq!(outcome.cancel_reason, Some(winners[0].to_string()));
    }
}

pub async fn replay_is_oldest_first_with_the_original_ids(make: impl Make) {
    let (backend, _guard) = default_backend(make).await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(backend.register(ask("s")).await.expect("register").rpc_id);
    }
    for _ in 0..2 {
        let mut events = subscribe(&backend, "s").await;
        let (replayed, resumed) = replay(&mut events).await;
        assert_eq!(requested_ids(&replayed), ids);
        assert!(!resumed);
    }
    let pending = backend.list_pending(&key("s")).await.expect("list");
    let listed: Vec<String> = pending.into_iter().map(|r| r.rpc_id).collect();
    assert_eq!(listed, ids);
    let mut all = backend
        .subscribe(Scope::Tenant("tenant".into()), SubscribeOptions::default())
        .await
        .expect("subscribe all");
    assert_eq!(requested_ids(&replay(&mut all).await.0), ids);
}

pub async fn a_held_cursor_resumes_and_an_unknown_one_resets(make: impl Make) {
    let (backend, _guard) = default_backend(make).await;
    let keeper = backend.register(ask("s")).await.expect("register");
    let mut events = subscribe(&backend, "s").await;
    // The synced event carries the session's latest cursor.
    let last_cursor = loop {
        let message = events.next().await.expect("event").expect("ok");
        if matches!(message.event, Some(Event::Synced(_))) {
            break message.cursor.clone();
        }
    };
    drop(events);
    let missed = backend.register(ask("s")).await.expect("register");
    backend
        .claim(&key("s"), &keeper.rpc_id, answered())
        .await
        .expect("claim");

    let options = SubscribeOptions {
        after: Some(last_cursor),
        ..SubscribeOptions::default()
    };
    let mut resumed = backend
        .subscribe(Scope::Session(key("s")), options)
        .await
        .expect("resume");
    let (events, was_resumed) = replay(&mut resumed).await;
    assert!(was_resumed);
    assert_eq!(requested_ids(&events), std::slice::from_ref(&missed.rpc_id));
    assert!(matches!(&events[1], Event::Resolved(r) if r.rpc_id == keeper.rpc_id));

    let stale = SubscribeOptions {
        after: Some("1-1".into()),
        ..SubscribeOptions::default()
    };
    let mut reset = backend
        .subscribe(Scope::Session(key("s")), stale)
        .await
        .expect("subscribe");
    let (events, was_resumed) = replay(&mut reset).await;
    assert!(!was_resumed);
    assert!(matches!(events[0], Event::Reset(_)));
    assert_eq!(requested_ids(&events), [missed.rpc_id]);
}

pub async fn a_lagging_subscriber_gets_reset_and_the_snapshot(make: impl Make) {
    let (backend, _guard) = backend(
        make,
        StateConfig {
            subscriber_buffer: 4,
            ..Default::default()
        },
    )
    .await;
    let mut events = subscribe(&backend, "s").await;
    replay(&mut events).await;
    let mut ids = Vec::new();
    for i in 0..20 {
        let registered = backend.register(ask("s")).await.expect("register");
        if i % 2 == 0 {
            backend
                .claim(&key("s"), &registered.rpc_id, answered())
                .await
                .expect("claim");
        } else {
            ids.push(registered.rpc_id);
        }
    }
    // 30 events into a buffer of 4: the stream skips nothing silently. What
    // was queued before the subscriber fell behind may come first.
    let mut before_reset = 0;
    while !matches!(next(&mut events).await, Event::Reset(_)) {
        before_reset += 1;
        assert!(before_reset <= 4, "more than the buffer was queued");
    }
    let (snapshot, resumed) = replay(&mut events).await;
    assert!(!resumed);
    assert_eq!(requested_ids(&snapshot), ids);
    assert_eq!(snapshot.len(), ids.len());
}

pub async fn one_exclusive_subscriber_per_session(make: impl Make) {
    let (backend, _guard) = default_backend(make).await;
    let exclusive = SubscribeOptions {
        exclusive: true,
        ..SubscribeOptions::default()
    };
    let first = backend
        .subscribe(Scope::Session(key("s")), exclusive.clone())
        .await
        .expect("first");
    let second = backend
        .subscribe(Scope::Session(key("s")), exclusive.clone())
        .await;
    assert!(matches!(second, Err(Error::DuplicateProvider)));
    drop(first);
    // Releasing may take a moment on a shared store: wait, within a bound.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match backend
            .subscribe(Scope::Session(key("s")), exclusive.clone())
            .await
        {
            Ok(_) => break,
            Err(e) => {
                assert!(matches!(e, Error::DuplicateProvider), "{e}");
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the hold was never released"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

pub async fn the_pending_limit_is_per_session(make: impl Make) {
    let (backend, _guard) = backend(
        make,
        StateConfig {
            max_pending_per_session: 2,
            ..Default::default()
        },
    )
    .await;
    backend.register(ask("s")).await.expect("first");
    backend.register(ask("s")).await.expect("second");
    let third = backend.register(ask("s")).await;
    assert!(matches!(third, Err(Error::TooManyPending(_))));
    backend.register(ask("t")).await.expect("another session");
}

pub async fn dispose_resolves_everything_and_ends_every_stream(make: impl Make) {
    let (backend, _guard) = default_backend(make).await;
    let mut session = subscribe(&backend, "s").await;
    replay(&mut session).await;
    let mut all = backend
        .subscribe(Scope::Tenant("tenant".into()), SubscribeOptions::default())
        .await
        .expect("subscribe all");
    replay(&mut all).await;
    let registered = backend.register(ask("s")).await.expect("register");
    backend.dispose_all().await;
    assert_eq!(
        registered.outcome.await.expect("outcome").resolution,
        Resolution::Disposed
    );
    for stream in [&mut session, &mut all] {
        assert!(matches!(next(stream).await, Event::Requested(_)));
        let Event::Resolved(resolved) = next(stream).await else {
            panic!("expected resolved");
        };
        assert_eq!(resolved.reason(), Resolution::Disposed);
        let end = tokio::time::timeout(Duration::from_secs(10), stream.next()).await;
        assert!(end.expect("the stream ends within 10 s").is_none());
    }
    assert!(matches!(
        backend.register(ask("s")).await,
        Err(Error::ShuttingDown)
    ));
    assert!(matches!(
        backend
            .subscribe(Scope::Session(key("s")), SubscribeOptions::default())
            .await,
        Err(Error::ShuttingDown)
    ));
}

/// A quorum ask's votes are one tally: each subject once, the completing vote closes
/// it, concurrent votes from many callers never lose one, and the claim drops them.
pub async fn quorum_votes_are_one_tally(make: impl Make) {
    use crate::domain::quorum::{Vote, Voted};
    let (backend, _guard) = default_backend(make).await;
    let vote = |subject: &str, key: &str| Vote {
        subject: subject.into(),
        channel: "console".into(),
        key: key.into(),
        person: String::new(),
    };
    let registered = backend.register(ask("s")).await.expect("register");
    let rpc_id = &registered.rpc_id;
    assert_eq!(
        backend
            .vote(&key("s"), rpc_id, vote("ana", "A"), 3, None)
            .await,
        Ok(Voted::Recorded { count: 1 })
    );
    assert_eq!(
        backend
            .vote(&key("s"), rpc_id, vote("ana", "A"), 3, None)
            .await,
        Err(Error::AlreadyApproved)
    );
    assert_eq!(
        backend
            .vote(&key("s"), "nope", vote("bo", "A"), 3, None)
            .await,
        Err(Error::not_pending())
    );
    // Twenty approvers at once: one tally, so exactly one completes it (the second
    // and third vote) and the rest find it closed.
    let mut tasks = Vec::new();
    for i in 0..20 {
        let (backend, rpc_id) = (backend.clone(), rpc_id.clone());
        let voter = vote(&format!("v{i}"), "A");
        tasks.push(tokio::spawn(async move {
            backend.vote(&key("s"), &rpc_id, voter, 3, None).await
        }));
    }
    let mut complete = Vec::new();
    let mut recorded = 0;
    for task in tasks {
        match task.await.expect("join") {
            Ok(Voted::Complete(votes)) => complete.push(votes),
            Ok(Voted::Recorded { count }) => {
                assert_eq!(count, 2);
                recorded += 1;
            }
            Err(Error::NotPending { .. }) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!((complete.len(), recorded), (1, 1), "one tally");
    assert_eq!(complete[0].len(), 3);
    assert_eq!(complete[0][0].subject, "ana");
    backend
        .claim(&key("s"), rpc_id, answered())
        .await
        .expect("the final claim");
    assert!(matches!(
        backend
            .vote(&key("s"), rpc_id, vote("late", "A"), 3, None)
            .await,
        Err(Error::NotPending { .. })
    ));

    // A differing vote closes the tally as a disagreement.
    let registered = backend.register(ask("s")).await.expect("register");
    backend
        .vote(&key("s"), &registered.rpc_id, vote("ana", "A"), 2, None)
        .await
        .expect("first");
    let Ok(Voted::Disagreed(votes)) = backend
        .vote(&key("s"), &registered.rpc_id, vote("bo", "B"), 2, None)
        .await
    else {
        panic!("disagreed");
    };
    assert_eq!(votes.len(), 2);
}
