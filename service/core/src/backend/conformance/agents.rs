//! Agents and callers (Semantics 7, 8 and 10): live incarnations, lease ownership,
//! delegation, unattended sessions, reattach by request_id, abandoned asks.

use super::*;

pub async fn rule_7_only_the_live_incarnation_may_ask(make: impl Make) {
    let (backend, _guard) = default_backend(make).await;
    let never = ask_with("s", |a| a.agent = agent("ghost", "1"));
    assert!(matches!(
        backend.register(never).await,
        Err(Error::CallerNotLive)
    ));

    let first = backend
        .attach("tenant", "a", "", &holder("w"))
        .await
        .expect("attach");
    let live = ask_with("s", |a| a.agent = agent("a", &first.incarnation));
    let pending = backend.register(live).await.expect("live agent asks");

    // A second attach supersedes the first: its asks are aborted and its
    // incarnation is stale.
    let second = backend
        .attach("tenant", "a", "", &holder("w"))
        .await
        .expect("re-attach");
    assert_ne!(second.incarnation, first.incarnation);
    first.superseded.await.expect("the first lease is told");
    assert_eq!(
        pending.outcome.await.expect("outcome").resolution,
        Resolution::Aborted
    );
    let stale = ask_with("s", |a| a.agent = agent("a", &first.incarnation));
    assert!(matches!(
        backend.register(stale).await,
        Err(Error::CallerNotLive)
    ));

    // Detaching ends the lease and aborts what it asked.
    let current = ask_with("s", |a| a.agent = agent("a", &second.incarnation));
    let pending = backend.register(current).await.expect("asks");
    backend.detach("tenant", "a", &second.incarnation).await;
    assert_eq!(
        pending.outcome.await.expect("outcome").resolution,
        Resolution::Aborted
    );
    let detached = ask_with("s", |a| a.agent = agent("a", &second.incarnation));
    assert!(matches!(
        backend.register(detached).await,
        Err(Error::CallerNotLive)
    ));
}

/// docs/protocol.md "Security": a live lease belongs to the subject that attached it.
/// Another subject of the tenant is refused without touching it; an admin
/// may replace it (its asks are then ABORTED as on any re-attach); once the
/// lease ends, anyone may attach the id.
pub async fn a_lease_belongs_to_its_subject(make: impl Make) {
    let (backend, _guard) = default_backend(make).await;
    let owned = backend
        .attach("tenant", "a", "", &holder("owner"))
        .await
        .expect("attach");
    let asked = ask_with("s", |a| a.agent = agent("a", &owned.incarnation));
    let pending = backend.register(asked).await.expect("asks");

    let stolen = backend.attach("tenant", "a", "", &holder("intruder")).await;
    assert!(
        matches!(stolen, Err(Error::PermissionDenied(_))),
        "{stolen:?}"
    );
    // Untouched: the owner's incarnation still asks, its ask still pending.
    let still = ask_with("s", |a| a.agent = agent("a", &owned.incarnation));
    let still = backend.register(still).await.expect("the owner still asks");
    assert_eq!(
        backend.list_pending(&key("s")).await.expect("list").len(),
        2
    );
    // Another tenant's agent of the same id is another agent.
    backend
        .attach("other", "a", "", &holder("intruder"))
        .await
        .expect("another tenant's agent");

    let admin = crate::backend::Holder {
        subject: "root".into(),
        may_take_over: true,
    };
    let replaced = backend
        .attach("tenant", "a", "", &admin)
        .await
        .expect("admin");
    for outcome in [pending.outcome, still.outcome] {
        assert_eq!(
            outcome.await.expect("outcome").resolution,
            Resolution::Aborted
        );
    }
    // The admin now holds it; once it detaches, anyone may attach.
    assert!(matches!(
        backend.attach("tenant", "a", "", &holder("owner")).await,
        Err(Error::PermissionDenied(_))
    ));
    backend.detach("tenant", "a", &replaced.incarnation).await;
    backend
        .attach("tenant", "a", "", &holder("intruder"))
        .await
        .expect("a free id");
}

pub async fn rule_7_a_child_of_a_live_parent_is_delegated(make: impl Make) {
    let (backend, _guard) = default_backend(make).await;
    let parent = backend
        .attach("tenant", "parent", "", &holder("w"))
        .await
        .expect("parent");
    let child = backend
        .attach("tenant", "child", "parent", &holder("w"))
        .await
        .expect("child");
    let child_ask = || ask_with("s", |a| a.agent = agent("child", &child.incarnation));
    assert!(matches!(
        backend.register(child_ask()).await,
        Err(Error::DelegatedCaller)
    ));
    // Only the live link counts: once the parent detaches, the child may ask.
    backend
        .detach("tenant", "parent", &parent.incarnation)
        .await;
    backend
        .register(child_ask())
        .await
        .expect("the orphan asks");
    // Another tenant's agent of the same name is a different agent.
    let other = ask_with("s", |a| {
        a.key = SessionKey::new("other", "s");
        a.agent = agent("child", &child.incarnation);
    });
    assert!(matches!(
        backend.register(other).await,
        Err(Error::CallerNotLive)
    ));
}

pub async fn rule_8_fail_needs_a_subscriber_now_or_within_the_grace(make: impl Make) {
    let (backend, _guard) = with_short_grace(make).await;
    let fail = || ask_with("s", |a| a.if_unattended = Unattended::Fail);
    assert!(matches!(
        backend.register(fail()).await,
        Err(Error::NoProvider)
    ));
    backend
        .register(ask("s"))
        .await
        .expect("HOLD is always accepted");

    let events = subscribe(&backend, "s").await;
    backend.register(fail()).await.expect("attended");
    drop(events);
    backend
        .register(fail())
        .await
        .expect("within the reconnect grace");
    // Once the grace has passed (on the store's clock), nobody attends.
    until_unattended(&backend, fail).await;

    let all = backend
        .subscribe(Scope::Tenant("tenant".into()), SubscribeOptions::default())
        .await
        .expect("subscribe all");
    backend
        .register(fail())
        .await
        .expect("an all_sessions subscriber counts");
    drop(all);
}

pub async fn rule_10_a_retry_joins_the_pending_ask_then_gets_the_recorded_outcome(make: impl Make) {
    let (backend, _guard) = default_backend(make).await;
    let mut events = subscribe(&backend, "s").await;
    replay(&mut events).await;
    let with_id = || ask_with("s", |a| a.request_id = "req-1".into());
    let first = backend.register(with_id()).await.expect("register");
    let retry = backend.register(with_id()).await.expect("join");
    assert_eq!(retry.rpc_id, first.rpc_id);
    assert!(matches!(next(&mut events).await, Event::Requested(_)));

    drop(first.outcome); // the first call went away
    backend
        .abandon(&key("s"), &retry.rpc_id)
        .await
        .expect("still pending");
    // The retry still waits, so abandoning did nothing.
    backend
        .claim(&key("s"), &retry.rpc_id, answered())
        .await
        .expect("claim");
    assert_eq!(retry.outcome.await.expect("outcome").as_ref(), &answered());
    assert!(matches!(next(&mut events).await, Event::Resolved(_)));

    let late = backend.register(with_id()).await.expect("recorded");
    assert_eq!(late.rpc_id, first.rpc_id);
    assert_eq!(late.outcome.await.expect("outcome").as_ref(), &answered());
    // No second requested for any of the retries.
    let quiet = tokio::time::timeout(Duration::from_millis(100), events.next()).await;
    assert!(quiet.is_err(), "no event after the resolution");
}

/// A request_id names one ask: sent again with other questions, or another action,
/// it is REQUEST_ID_REUSED while its ask is pending and once it ended, never the other
/// ask's answer; the same ask still joins or gets its outcome, and an abort recorded
/// before any ask (no fingerprint) still ends the ask that comes with it.
pub async fn rule_10_a_request_id_names_one_ask(make: impl Make) {
    let (backend, _guard) = default_backend(make).await;
    let with = |question: &str, digest: &str| {
        ask_with("s", |a| {
            a.request_id = "req-1".into();
            a.questions[0].question = question.into();
            a.action_digest = digest.into();
        })
    };
    // The same questions under other approval terms are another ask too: an answer
    // given with no quorum must never come back to a call that asked for three.
    let terms = |change: fn(&mut NewAsk)| {
        let mut ask = with("ok?", "");
        change(&mut ask);
        ask
    };
    let skip = |a: &mut NewAsk| {
        a.default_answers = vec![QuestionAnswer {
            id: "q".into(),
            ..Default::default()
        }]
    };
    let first = backend.register(with("ok?", "")).await.expect("register");
    for (other, why) in [
        (with("deploy?", ""), "other questions"),
        (with("ok?", "sha256:1"), "another action"),
        (terms(|a| a.quorum = 3), "a quorum"),
        (
            terms(|a| a.allowed_channels = vec!["console".into()]),
            "allowed channels",
        ),
        (terms(skip), "default answers"),
    ] {
        let reused = backend.register(other).await.map(|r| r.rpc_id);
        assert!(
            matches!(reused, Err(Error::RequestIdReused)),
            "pending, {why}: {reused:?}"
        );
    }
    let retry = backend.register(with("ok?", "")).await.expect("join");
    assert_eq!(retry.rpc_id, first.rpc_id, "the same ask joins");
    backend
        .claim(&key("s"), &first.rpc_id, answered())
        .await
        .expect("claim");
    assert_eq!(retry.outcome.await.expect("outcome").as_ref(), &answered());
    for (other, why) in [
        (with("deploy?", ""), "other questions"),
        (terms(|a| a.quorum = 3), "a quorum"),
    ] {
        let reused = backend.register(other).await.map(|r| r.rpc_id);
        assert!(
            matches!(reused, Err(Error::RequestIdReused)),
            "ended, {why}: {reused:?}"
        );
    }
    let late = backend.register(with("ok?", "")).await.expect("recorded");
    assert_eq!(late.outcome.await.expect("outcome").as_ref(), &answered());

    use crate::backend::{RequestAbort, events};
    let aborted = events::resolved(&key("s"), "rpc-unasked", &Outcome::aborted());
    let recorded = backend
        .abort_request(&key("s"), "req-2", aborted)
        .await
        .expect("abort first");
    assert_eq!(recorded, RequestAbort::Recorded);
    let mut after = with("anything?", "");
    after.request_id = "req-2".into();
    let after = backend.register(after).await.expect("the abort's record");
    let outcome = after.outcome.await.expect("outcome");
    assert_eq!(outcome.resolution, Resolution::Aborted);
}

/// Rule 10 comes before rule 8: a retry by request_id finds its ask, pending or
/// ended, whoever follows the session. NO_PROVIDER is for new asks only: an agent whose
/// call dropped and who retries after the human left still gets the answer it was given.
pub async fn rule_10_a_retry_finds_its_ask_whoever_follows(make: impl Make) {
    let (backend, _guard) = with_short_grace(make).await;
    let fail = |request_id: &str| {
        ask_with("s", |a| {
            a.if_unattended = Unattended::Fail;
            a.request_id = request_id.into();
        })
    };
    let events = subscribe(&backend, "s").await;
    let first = backend.register(fail("req-1")).await.expect("attended");
    drop(events);
    until_unattended(&backend, || fail("")).await;

    let retry = backend
        .register(fail("req-1"))
        .await
        .expect("a retry joins its pending ask, followed or not");
    assert_eq!(retry.rpc_id, first.rpc_id);
    backend
        .claim(&key("s"), &first.rpc_id, answered())
        .await
        .expect("claim");
    assert_eq!(retry.outcome.await.expect("outcome").as_ref(), &answered());

    let late = backend
        .register(fail("req-1"))
        .await
        .expect("a retry gets its recorded outcome, followed or not");
    assert_eq!(late.rpc_id, first.rpc_id);
    assert_eq!(late.outcome.await.expect("outcome").as_ref(), &answered());
    assert!(
        matches!(
            backend.register(fail("req-2")).await,
            Err(Error::NoProvider)
        ),
        "a new request is still refused"
    );
}

/// A backend whose sessions stay attended 200 ms after their last subscriber left.
async fn with_short_grace(make: impl Make) -> Made {
    backend(
        make,
        StateConfig {
            reconnect_grace: Duration::from_millis(200),
            ..Default::default()
        },
    )
    .await
}

/// Registers `ask()` until the backend refuses it NO_PROVIDER: the reconnect grace of
/// the session's last subscriber has passed on the store's clock (at most 10 s).
async fn until_unattended(backend: &Arc<dyn Backend>, ask: impl Fn() -> NewAsk) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match backend.register(ask()).await {
            Err(Error::NoProvider) => return,
            Ok(_) => {}
            Err(e) => panic!("{e}"),
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the grace never ended"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// An Abort by request_id that arrives before its Ask is recorded as that ask's
/// outcome: the Ask then gets ABORTED at once, and no subscriber ever sees it. An
/// abort of a pending ask finds it; one of an ask already ended finds that.
pub async fn an_abort_that_overtakes_its_ask_ends_it_unseen(make: impl Make) {
    use crate::backend::{RequestAbort, events};
    let (backend, _guard) = default_backend(make).await;
    let mut events = subscribe(&backend, "s").await;
    replay(&mut events).await;
    let unasked = events::resolved(&key("s"), "rpc-unasked", &Outcome::aborted());
    let aborted = backend
        .abort_request(&key("s"), "req-early", unasked.clone())
        .await
        .expect("abort");
    assert_eq!(aborted, RequestAbort::Recorded);
    let late = backend
        .register(ask_with("s", |a| a.request_id = "req-early".into()))
        .await
        .expect("the recorded outcome");
    assert_eq!(late.rpc_id, "rpc-unasked");
    assert_eq!(
        late.outcome.await.expect("outcome").resolution,
        Resolution::Aborted
    );
    assert!(
        backend
            .list_pending(&key("s"))
            .await
            .expect("list")
            .is_empty()
    );

    // Pending: the abort finds it (the caller claims it); ended: it says so.
    let pending = backend
        .register(ask_with("s", |a| a.request_id = "req-later".into()))
        .await
        .expect("register");
    assert!(matches!(next(&mut events).await, Event::Requested(_)));
    let found = backend
        .abort_request(&key("s"), "req-later", unasked.clone())
        .await
        .expect("abort");
    assert_eq!(found, RequestAbort::Pending(pending.rpc_id.clone()));
    backend
        .claim(&key("s"), &pending.rpc_id, Outcome::aborted())
        .await
        .expect("claim");
    assert!(matches!(next(&mut events).await, Event::Resolved(_)));
    let ended = backend
        .abort_request(&key("s"), "req-later", unasked)
        .await
        .expect("abort");
    assert_eq!(ended, RequestAbort::Ended);
    // The early one was never broadcast.
    let quiet = tokio::time::timeout(Duration::from_millis(100), events.next()).await;
    assert!(
        quiet.is_err(),
        "no event for the ask that was aborted first"
    );
}

pub async fn rule_10_an_abandoned_ask_is_aborted(make: impl Make) {
    let (backend, _guard) = default_backend(make).await;
    let registered = backend.register(ask("s")).await.expect("register");
    let rpc_id = registered.rpc_id.clone();
    drop(registered);
    backend.abandon(&key("s"), &rpc_id).await.expect("abandon");
    let err = backend.claim(&key("s"), &rpc_id, answered()).await;
    assert!(matches!(err, Err(Error::NotPending { .. })));
}

/// Rule 10 comes before the caps: a retry by request_id finds its ask, pending or
/// ended, even while its tenant holds its most pending asks (the retry adds none).
pub async fn rule_10_a_retry_finds_its_ask_at_a_full_tenant(make: impl Make) {
    let (backend, _guard) = backend(
        make,
        StateConfig {
            max_pending_per_tenant: 1,
            ..Default::default()
        },
    )
    .await;
    let with_id =
        |session: &str, request_id: &str| ask_with(session, |a| a.request_id = request_id.into());
    let first = backend
        .register(with_id("s1", "req-1"))
        .await
        .expect("register");
    let full = backend.register(with_id("s2", "req-2")).await.map(|_| ());
    assert!(matches!(full, Err(Error::TooManyPending(_))), "{full:?}");
    let retry = backend
        .register(with_id("s1", "req-1"))
        .await
        .expect("a retry joins its pending ask at a full tenant");
    assert_eq!(retry.rpc_id, first.rpc_id);
    backend
        .claim(&key("s1"), &first.rpc_id, answered())
        .await
        .expect("claim");
    assert_eq!(retry.outcome.await.expect("outcome").as_ref(), &answered());

    let _other = backend
        .register(with_id("s2", "req-2"))
        .await
        .expect("room again");
    let late = backend
        .register(with_id("s1", "req-1"))
        .await
        .expect("a retry gets its recorded outcome at a full tenant");
    assert_eq!(late.rpc_id, first.rpc_id);
    assert_eq!(late.outcome.await.expect("outcome").as_ref(), &answered());
}
