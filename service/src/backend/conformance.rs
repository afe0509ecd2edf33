//! The backend conformance suite: the semantics every [`Backend`] must meet (docs/protocol.md
//! "Semantics" 1-6), written once against the trait and instantiated per backend with
//! [`backend_conformance_suite!`]. The integration tests check the same rules end to end
//! through gRPC; these pin them at the trait, where a new backend is built.
//!
//! [`Backend`]: super::Backend

/// Instantiates the suite for a backend. `$make` is an async fn taking the sizes to
/// use (`MemoryConfig`, mapped by the backend to its own settings) and returning the
/// backend and a guard that keeps what it needs (a Redis server) alive.
#[cfg(test)]
macro_rules! backend_conformance_suite {
    ($make:expr) => {
        mod conformance {
            use std::{sync::Arc, time::Duration};

            use askgate_proto::v1::{
                AgentRef, Question, QuestionAnswer, Resolution, Unattended,
                subscribe_response::Event,
            };
            use tokio_stream::StreamExt;

            use super::*;
            use crate::backend::{Backend, EventStream, Scope, SubscribeOptions};
            use crate::domain::{AskError, NewAsk, Outcome, SessionKey, Settled};

            async fn backend(
                config: $crate::backend::memory::MemoryConfig,
            ) -> (Arc<dyn Backend>, Box<dyn std::any::Any + Send>) {
                ($make)(config).await
            }

            async fn default_backend() -> (Arc<dyn Backend>, Box<dyn std::any::Any + Send>) {
                backend($crate::backend::memory::MemoryConfig::default()).await
            }

            fn key(session: &str) -> SessionKey {
                SessionKey::new("tenant", session)
            }

            fn ask(session: &str) -> NewAsk {
                NewAsk {
                    key: key(session),
                    questions: vec![Question {
                        id: "q".into(),
                        question: "ok?".into(),
                        ..Default::default()
                    }],
                    agent: None,
                    labels: Default::default(),
                    expires_at: None,
                    request_id: String::new(),
                    if_unattended: Unattended::Hold,
                    reattach_grace: Duration::ZERO,
                }
            }

            fn ask_with(session: &str, change: impl FnOnce(&mut NewAsk)) -> NewAsk {
                let mut ask = ask(session);
                change(&mut ask);
                ask
            }

            fn agent(agent_id: &str, incarnation: &str) -> Option<AgentRef> {
                Some(AgentRef {
                    agent_id: agent_id.into(),
                    incarnation: incarnation.into(),
                })
            }

            fn answered() -> Outcome {
                Outcome::answered(
                    vec![QuestionAnswer {
                        id: "q".into(),
                        ..Default::default()
                    }],
                    "tester",
                )
            }

            async fn subscribe(backend: &Arc<dyn Backend>, session: &str) -> EventStream {
                backend
                    .subscribe(Scope::Session(key(session)), SubscribeOptions::default())
                    .await
                    .expect("subscribe")
            }

            async fn next(stream: &mut EventStream) -> Event {
                let message = tokio::time::timeout(Duration::from_secs(10), stream.next())
                    .await
                    .expect("an event within 10 s")
                    .expect("the stream ended")
                    .expect("the stream failed");
                message.event.clone().expect("an event")
            }

            /// Events up to `synced`, and whether it resumed.
            async fn replay(stream: &mut EventStream) -> (Vec<Event>, bool) {
                let mut events = Vec::new();
                loop {
                    match next(stream).await {
                        Event::Synced(s) => return (events, s.resumed),
                        event => events.push(event),
                    }
                }
            }

            fn requested_ids(events: &[Event]) -> Vec<String> {
                events
                    .iter()
                    .filter_map(|e| match e {
                        Event::Requested(r) => Some(r.rpc_id.clone()),
                        _ => None,
                    })
                    .collect()
            }

            #[tokio::test]
            async fn register_stores_then_broadcasts_and_a_claim_wins_once() {
                let (backend, _guard) = default_backend().await;
                let mut events = subscribe(&backend, "s").await;
                assert!(replay(&mut events).await.0.is_empty());
                let registered = backend.register(ask("s")).await.expect("register");
                let Event::Requested(requested) = next(&mut events).await else {
                    panic!("expected requested");
                };
                assert_eq!(requested.rpc_id, registered.rpc_id);
                let questions = backend.questions(&key("s"), &registered.rpc_id).await;
                assert_eq!(questions.expect("pending")[0].id, "q");

                backend
                    .claim(&key("s"), &registered.rpc_id, answered())
                    .await
                    .expect("first claim wins");
                assert_eq!(registered.outcome.await.expect("outcome"), answered());
                let Event::Resolved(resolved) = next(&mut events).await else {
                    panic!("expected resolved");
                };
                assert_eq!(resolved.reason(), Resolution::Answered);

                let again = backend
                    .claim(&key("s"), &registered.rpc_id, Outcome::cancelled(None, "x"))
                    .await;
                assert_eq!(
                    again,
                    Err(AskError::NotPending {
                        settled: Some(Settled {
                            resolution: Resolution::Answered,
                            resolved_by: "tester".into(),
                        })
                    })
                );
                let wrong_session = backend.claim(&key("t"), &registered.rpc_id, answered()).await;
                assert!(matches!(wrong_session, Err(AskError::NotPending { .. })));
            }

            /// docs/protocol.md "Vocabulary": (tenant, session) pairs that would read alike if
            /// joined naively (`acme` + `x/s` and `acme/x` + `s`, braces, escapes)
            /// share nothing: no event, no listing, no claim crosses between them. The
            /// storage layer is tested with names the credential checks would refuse,
            /// so that it stays safe on its own.
            #[tokio::test]
            async fn adversarial_tenant_and_session_pairs_share_nothing() {
                let (backend, _guard) = default_backend().await;
                let pairs = [
                    (("acme", "x/s"), ("acme/x", "s")),
                    (("a{b", "c}d"), ("a", "b}c{d")),
                    (("acme%2F", "s"), ("acme/", "s")),
                    (("acme", "s"), ("acme%", "s")),
                ];
                for ((victim_tenant, victim_session), (other_tenant, other_session)) in pairs {
                    let victim = SessionKey::new(victim_tenant, victim_session);
                    let other = SessionKey::new(other_tenant, other_session);
                    let mut watching = backend
                        .subscribe(Scope::Session(other.clone()), SubscribeOptions::default())
                        .await
                        .expect("subscribe");
                    assert!(replay(&mut watching).await.0.is_empty());
                    let mut all = backend
                        .subscribe(Scope::Tenant(other.tenant.clone()), SubscribeOptions::default())
                        .await
                        .expect("subscribe all");
                    assert!(replay(&mut all).await.0.is_empty());

                    let mut new = ask("unused");
                    new.key = victim.clone();
                    let registered = backend.register(new).await.expect("register");
                    let pair = format!("{victim} vs {other}");
                    assert!(backend.list_pending(&other).await.expect("list").is_empty(), "{pair}");
                    assert_eq!(
                        backend.questions(&other, &registered.rpc_id).await,
                        Err(AskError::not_pending()),
                        "{pair}"
                    );
                    let stolen = backend.claim(&other, &registered.rpc_id, answered()).await;
                    assert!(matches!(stolen, Err(AskError::NotPending { .. })), "{pair}");

                    backend
                        .claim(&victim, &registered.rpc_id, Outcome::cancelled(None, "owner"))
                        .await
                        .expect("the victim's own claim");
                    assert_eq!(registered.outcome.await.expect("outcome").resolved_by, "owner");
                    // A marker ask of the other pair: the first event either stream
                    // sees must be its own, never the victim's.
                    let mut marker = ask("unused");
                    marker.key = other.clone();
                    let marker = backend.register(marker).await.expect("marker");
                    for stream in [&mut watching, &mut all] {
                        let Event::Requested(seen) = next(stream).await else {
                            panic!("{pair}: expected the marker's requested");
                        };
                        assert_eq!(seen.rpc_id, marker.rpc_id, "{pair}");
                    }
                    backend
                        .claim(&other, &marker.rpc_id, answered())
                        .await
                        .expect("marker claim");
                }
            }

            /// docs/protocol.md "Security": per-tenant caps on the sessions holding state, the
            /// attached agents and the `all_sessions` streams, each refused with its
            /// RESOURCE_EXHAUSTED reason; other tenants are not affected.
            #[tokio::test]
            async fn per_tenant_caps_on_sessions_agents_and_all_sessions_streams() {
                let (backend, _guard) = backend($crate::backend::memory::MemoryConfig {
                    max_sessions_per_tenant: 2,
                    max_agents_per_tenant: 2,
                    max_all_sessions_per_tenant: 1,
                    ..Default::default()
                })
                .await;
                // Sessions: two hold pending asks; a third is refused, to an ask and
                // to a subscription, while the held ones stay usable.
                let _first = backend.register(ask("s1")).await.expect("s1");
                let _second = backend.register(ask("s2")).await.expect("s2");
                for refused in [
                    backend.register(ask("s3")).await.map(|_| ()),
                    backend
                        .subscribe(Scope::Session(key("s3")), SubscribeOptions::default())
                        .await
                        .map(|_| ()),
                ] {
                    assert!(
                        matches!(refused, Err(AskError::TooManySessions(_))),
                        "{refused:?}"
                    );
                }
                let _more = backend.register(ask("s1")).await.expect("a held session");
                let mut followed = subscribe(&backend, "s2").await;
                replay(&mut followed).await;
                let mut elsewhere = ask("s3");
                elsewhere.key = SessionKey::new("other", "s3");
                backend.register(elsewhere).await.expect("another tenant");

                // Agents: two; a third is refused; re-attaching one is not a new one;
                // a detached one makes room.
                let a = backend.attach("tenant", "a", "", &holder("w")).await.expect("a");
                let b = backend.attach("tenant", "b", "", &holder("w")).await.expect("b");
                let refused = backend.attach("tenant", "c", "", &holder("w")).await;
                assert!(matches!(refused, Err(AskError::TooManyAgents(_))), "{refused:?}");
                let _a_again = backend.attach("tenant", "a", "", &holder("w")).await.expect("a again");
                backend.attach("other", "c", "", &holder("w")).await.expect("another tenant");
                backend.detach("tenant", "b", &b.incarnation).await;
                backend.attach("tenant", "c", "", &holder("w")).await.expect("room after a detach");
                drop(a);

                // all_sessions streams: one; a second is refused until the first ends.
                let all = || backend.subscribe(Scope::Tenant("tenant".into()), SubscribeOptions::default());
                let first_all = all().await.expect("one all_sessions stream");
                let refused = all().await.map(|_| ());
                assert!(matches!(refused, Err(AskError::TooManySubscribers(_))), "{refused:?}");
                drop(first_all);
                let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
                loop {
                    match all().await {
                        Ok(_) => break,
                        Err(AskError::TooManySubscribers(_)) if tokio::time::Instant::now() < deadline => {
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                        Err(e) => panic!("the slot of an ended stream was not freed: {e:?}"),
                    }
                }
            }

            #[tokio::test]
            async fn concurrent_claims_have_exactly_one_winner() {
                let (backend, _guard) = default_backend().await;
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

            #[tokio::test]
            async fn replay_is_oldest_first_with_the_original_ids() {
                let (backend, _guard) = default_backend().await;
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

            #[tokio::test]
            async fn a_held_cursor_resumes_and_an_unknown_one_resets() {
                let (backend, _guard) = default_backend().await;
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
                backend.claim(&key("s"), &keeper.rpc_id, answered()).await.expect("claim");

                let options = SubscribeOptions {
                    after: Some(last_cursor),
                    exclusive: false,
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
                    exclusive: false,
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

            #[tokio::test]
            async fn a_lagging_subscriber_gets_reset_and_the_snapshot() {
                let (backend, _guard) = backend($crate::backend::memory::MemoryConfig {
                    subscriber_buffer: 4,
                    ..Default::default()
                }).await;
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

            #[tokio::test]
            async fn one_exclusive_subscriber_per_session() {
                let (backend, _guard) = default_backend().await;
                let exclusive = SubscribeOptions {
                    after: None,
                    exclusive: true,
                };
                let first = backend
                    .subscribe(Scope::Session(key("s")), exclusive.clone())
                    .await
                    .expect("first");
                let second = backend.subscribe(Scope::Session(key("s")), exclusive.clone()).await;
                assert!(matches!(second, Err(AskError::DuplicateProvider)));
                drop(first);
                // Releasing may take a moment on a shared store: wait, within a bound.
                let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
                loop {
                    match backend.subscribe(Scope::Session(key("s")), exclusive.clone()).await {
                        Ok(_) => break,
                        Err(e) => {
                            assert!(matches!(e, AskError::DuplicateProvider), "{e}");
                            assert!(tokio::time::Instant::now() < deadline, "the hold was never released");
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                    }
                }
            }

            #[tokio::test]
            async fn the_pending_limit_is_per_session() {
                let (backend, _guard) = backend($crate::backend::memory::MemoryConfig {
                    max_pending_per_session: 2,
                    ..Default::default()
                }).await;
                backend.register(ask("s")).await.expect("first");
                backend.register(ask("s")).await.expect("second");
                let third = backend.register(ask("s")).await;
                assert!(matches!(third, Err(AskError::TooManyPending(_))));
                backend.register(ask("t")).await.expect("another session");
            }

            #[tokio::test]
            async fn dispose_resolves_everything_and_ends_every_stream() {
                let (backend, _guard) = default_backend().await;
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
                    Err(AskError::ShuttingDown)
                ));
                assert!(matches!(
                    backend
                        .subscribe(Scope::Session(key("s")), SubscribeOptions::default())
                        .await,
                    Err(AskError::ShuttingDown)
                ));
            }

            #[tokio::test]
            async fn rule_7_only_the_live_incarnation_may_ask() {
                let (backend, _guard) = default_backend().await;
                let never = ask_with("s", |a| a.agent = agent("ghost", "1"));
                assert!(matches!(backend.register(never).await, Err(AskError::CallerNotLive)));

                let first = backend.attach("tenant", "a", "", &holder("w")).await.expect("attach");
                let live = ask_with("s", |a| a.agent = agent("a", &first.incarnation));
                let pending = backend.register(live).await.expect("live agent asks");

                // A second attach supersedes the first: its asks are aborted and its
                // incarnation is stale.
                let second = backend.attach("tenant", "a", "", &holder("w")).await.expect("re-attach");
                assert_ne!(second.incarnation, first.incarnation);
                first.superseded.await.expect("the first lease is told");
                assert_eq!(
                    pending.outcome.await.expect("outcome").resolution,
                    Resolution::Aborted
                );
                let stale = ask_with("s", |a| a.agent = agent("a", &first.incarnation));
                assert!(matches!(backend.register(stale).await, Err(AskError::CallerNotLive)));

                // Detaching ends the lease and aborts what it asked.
                let current = ask_with("s", |a| a.agent = agent("a", &second.incarnation));
                let pending = backend.register(current).await.expect("asks");
                backend.detach("tenant", "a", &second.incarnation).await;
                assert_eq!(
                    pending.outcome.await.expect("outcome").resolution,
                    Resolution::Aborted
                );
                let detached = ask_with("s", |a| a.agent = agent("a", &second.incarnation));
                assert!(matches!(backend.register(detached).await, Err(AskError::CallerNotLive)));
            }

            fn holder(subject: &str) -> crate::backend::Holder {
                crate::backend::Holder {
                    subject: subject.into(),
                    may_take_over: false,
                }
            }

            /// docs/protocol.md "Security": a live lease belongs to the subject that attached it.
            /// Another subject of the tenant is refused without touching it; an admin
            /// may replace it (its asks are then ABORTED as on any re-attach); once the
            /// lease ends, anyone may attach the id.
            #[tokio::test]
            async fn a_lease_belongs_to_its_subject() {
                let (backend, _guard) = default_backend().await;
                let owned = backend.attach("tenant", "a", "", &holder("owner")).await.expect("attach");
                let asked = ask_with("s", |a| a.agent = agent("a", &owned.incarnation));
                let pending = backend.register(asked).await.expect("asks");

                let stolen = backend.attach("tenant", "a", "", &holder("intruder")).await;
                assert!(
                    matches!(stolen, Err(AskError::PermissionDenied(_))),
                    "{stolen:?}"
                );
                // Untouched: the owner's incarnation still asks, its ask still pending.
                let still = ask_with("s", |a| a.agent = agent("a", &owned.incarnation));
                let still = backend.register(still).await.expect("the owner still asks");
                assert_eq!(backend.list_pending(&key("s")).await.expect("list").len(), 2);
                // Another tenant's agent of the same id is another agent.
                backend
                    .attach("other", "a", "", &holder("intruder"))
                    .await
                    .expect("another tenant's agent");

                let admin = crate::backend::Holder {
                    subject: "root".into(),
                    may_take_over: true,
                };
                let replaced = backend.attach("tenant", "a", "", &admin).await.expect("admin");
                for outcome in [pending.outcome, still.outcome] {
                    assert_eq!(outcome.await.expect("outcome").resolution, Resolution::Aborted);
                }
                // The admin now holds it; once it detaches, anyone may attach.
                assert!(matches!(
                    backend.attach("tenant", "a", "", &holder("owner")).await,
                    Err(AskError::PermissionDenied(_))
                ));
                backend.detach("tenant", "a", &replaced.incarnation).await;
                backend
                    .attach("tenant", "a", "", &holder("intruder"))
                    .await
                    .expect("a free id");
            }

            #[tokio::test]
            async fn rule_7_a_child_of_a_live_parent_is_delegated() {
                let (backend, _guard) = default_backend().await;
                let parent = backend.attach("tenant", "parent", "", &holder("w")).await.expect("parent");
                let child = backend.attach("tenant", "child", "parent", &holder("w")).await.expect("child");
                let child_ask = || ask_with("s", |a| a.agent = agent("child", &child.incarnation));
                assert!(matches!(
                    backend.register(child_ask()).await,
                    Err(AskError::DelegatedCaller)
                ));
                // Only the live link counts: once the parent detaches, the child may ask.
                backend.detach("tenant", "parent", &parent.incarnation).await;
                backend.register(child_ask()).await.expect("the orphan asks");
                // Another tenant's agent of the same name is a different agent.
                let other = ask_with("s", |a| {
                    a.key = SessionKey::new("other", "s");
                    a.agent = agent("child", &child.incarnation);
                });
                assert!(matches!(backend.register(other).await, Err(AskError::CallerNotLive)));
            }

            #[tokio::test]
            async fn rule_8_fail_needs_a_subscriber_now_or_within_the_grace() {
                let (backend, _guard) = backend($crate::backend::memory::MemoryConfig {
                    reconnect_grace: Duration::from_millis(200),
                    ..Default::default()
                }).await;
                let fail = || ask_with("s", |a| a.if_unattended = Unattended::Fail);
                assert!(matches!(backend.register(fail()).await, Err(AskError::NoProvider)));
                backend.register(ask("s")).await.expect("HOLD is always accepted");

                let events = subscribe(&backend, "s").await;
                backend.register(fail()).await.expect("attended");
                drop(events);
                backend.register(fail()).await.expect("within the reconnect grace");
                // Once the grace has passed (on the store's clock), nobody attends.
                let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
                loop {
                    match backend.register(fail()).await {
                        Err(AskError::NoProvider) => break,
                        Ok(_) => {}
                        Err(e) => panic!("{e}"),
                    }
                    assert!(tokio::time::Instant::now() < deadline, "the grace never ended");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }

                let all = backend
                    .subscribe(Scope::Tenant("tenant".into()), SubscribeOptions::default())
                    .await
                    .expect("subscribe all");
                backend.register(fail()).await.expect("an all_sessions subscriber counts");
                drop(all);
            }

            #[tokio::test]
            async fn rule_10_a_retry_joins_the_pending_ask_then_gets_the_recorded_outcome() {
                let (backend, _guard) = default_backend().await;
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
                backend.claim(&key("s"), &retry.rpc_id, answered()).await.expect("claim");
                assert_eq!(retry.outcome.await.expect("outcome"), answered());
                assert!(matches!(next(&mut events).await, Event::Resolved(_)));

                let late = backend.register(with_id()).await.expect("recorded");
                assert_eq!(late.rpc_id, first.rpc_id);
                assert_eq!(late.outcome.await.expect("outcome"), answered());
                // No second requested for any of the retries.
                let quiet = tokio::time::timeout(Duration::from_millis(100), events.next()).await;
                assert!(quiet.is_err(), "no event after the resolution");
            }

            #[tokio::test]
            async fn rule_10_an_abandoned_ask_is_aborted() {
                let (backend, _guard) = default_backend().await;
                let registered = backend.register(ask("s")).await.expect("register");
                let rpc_id = registered.rpc_id.clone();
                drop(registered);
                backend.abandon(&key("s"), &rpc_id).await.expect("abandon");
                let err = backend.claim(&key("s"), &rpc_id, answered()).await;
                assert!(matches!(err, Err(AskError::NotPending { .. })));
            }
        }
    };
}
