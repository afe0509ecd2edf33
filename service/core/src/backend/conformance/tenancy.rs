//! Tenancy: tenants share nothing, and each is held to its caps.

use super::*;
use crate::backend::Budget;

/// docs/protocol.md "Vocabulary": (tenant, session) pairs that would read alike if
/// joined naively (`acme` + `x/s` and `acme/x` + `s`, braces, escapes)
/// share nothing: no event, no listing, no claim crosses between them. The
/// storage layer is tested with names the credential checks would refuse,
/// so that it stays safe on its own.
pub async fn adversarial_tenant_and_session_pairs_share_nothing(make: impl Make) {
    let (backend, _guard) = default_backend(make).await;
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
            .subscribe(
                Scope::Tenant(other.tenant.clone()),
                SubscribeOptions::default(),
            )
            .await
            .expect("subscribe all");
        assert!(replay(&mut all).await.0.is_empty());

        let mut new = ask("unused");
        new.key = victim.clone();
        let registered = backend.register(new).await.expect("register");
        let pair = format!("{victim} vs {other}");
        assert!(
            backend.list_pending(&other).await.expect("list").is_empty(),
            "{pair}"
        );
        assert_eq!(
            backend.pending(&other, &registered.rpc_id).await,
            Err(Error::not_pending()),
            "{pair}"
        );
        let stolen = backend.claim(&other, &registered.rpc_id, answered()).await;
        assert!(matches!(stolen, Err(Error::NotPending { .. })), "{pair}");

        backend
            .claim(
                &victim,
                &registered.rpc_id,
                Outcome::cancelled(None, "owner"),
            )
            .await
            .expect("the victim's own claim");
        assert_eq!(
            registered.outcome.await.expect("outcome").resolved_by,
            "owner"
        );
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
pub async fn per_tenant_caps_on_sessions_agents_and_all_sessions_streams(make: impl Make) {
    let (backend, _guard) = backend(
        make,
        StateConfig {
            max_sessions_per_tenant: 2,
            max_agents_per_tenant: 2,
            max_all_sessions_per_tenant: 1,
            ..Default::default()
        },
    )
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
            matches!(refused, Err(Error::TooManySessions(_))),
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
    let a = backend
        .attach("tenant", "a", "", &holder("w"))
        .await
        .expect("a");
    let b = backend
        .attach("tenant", "b", "", &holder("w"))
        .await
        .expect("b");
    let refused = backend.attach("tenant", "c", "", &holder("w")).await;
    assert!(
        matches!(refused, Err(Error::TooManyAgents(_))),
        "{refused:?}"
    );
    let _a_again = backend
        .attach("tenant", "a", "", &holder("w"))
        .await
        .expect("a again");
    backend
        .attach("other", "c", "", &holder("w"))
        .await
        .expect("another tenant");
    backend.detach("tenant", "b", &b.incarnation).await;
    backend
        .attach("tenant", "c", "", &holder("w"))
        .await
        .expect("room after a detach");
    drop(a);

    // all_sessions streams: one; a second is refused until the first ends.
    let all = || backend.subscribe(Scope::Tenant("tenant".into()), SubscribeOptions::default());
    let first_all = all().await.expect("one all_sessions stream");
    let refused = all().await.map(|_| ());
    assert!(
        matches!(refused, Err(Error::TooManySubscribers(_))),
        "{refused:?}"
    );
    drop(first_all);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match all().await {
            Ok(_) => break,
            Err(Error::TooManySubscribers(_)) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("the slot of an ended stream was not freed: {e:?}"),
        }
    }
}

/// docs/security.md "Per-tenant caps": a tenant holds at most `max` units of a budget,
/// another tenant and another budget are apart, and a dropped unit comes back (on Redis
/// once its release lands, so within a bounded wait).
pub async fn budgets_are_held_per_tenant_and_given_back(make: impl Make) {
    let (backend, _guard) = default_backend(make).await;
    let first = backend.hold("acme", Budget::Streams, 2).await.expect("one");
    let _second = backend.hold("acme", Budget::Streams, 2).await.expect("two");
    let refused = backend.hold("acme", Budget::Streams, 2).await.map(|_| ());
    assert!(
        matches!(refused, Err(Error::TooManySubscribers(ref m)) if m.contains("--max-streams-per-tenant")),
        "{refused:?}"
    );
    let _other_tenant = backend
        .hold("globex", Budget::Streams, 2)
        .await
        .expect("apart");
    let _other_budget = backend
        .hold("acme", Budget::McpSessions, 2)
        .await
        .expect("apart");
    drop(first);
    tokio::time::timeout(Duration::from_secs(10), async {
        while backend.hold("acme", Budget::Streams, 2).await.is_err() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the dropped unit comes back");
}

/// The bytes pending asks hold are budgeted per session and per tenant; a resolved ask
/// gives its bytes back.
pub async fn pending_bytes_are_budgeted_per_session_and_tenant(make: impl Make) {
    let sized = |session: &str, bytes: usize| {
        let mut new = ask(session);
        new.questions[0].detail = Some("x".repeat(bytes));
        new
    };
    let (backend, _guard) = backend(
        make,
        StateConfig {
            max_pending_bytes_per_session: 3_000,
            max_pending_bytes_per_tenant: 5_000,
            ..Default::default()
        },
    )
    .await;
    let first = backend.register(sized("s1", 2_000)).await.expect("fits");
    let over_session = backend.register(sized("s1", 2_000)).await.map(|_| ());
    assert!(
        matches!(over_session, Err(Error::TooManyPending(ref m)) if m.contains("per-session")),
        "{over_session:?}"
    );
    let _second = backend.register(sized("s2", 2_000)).await.expect("fits");
    let over_tenant = backend.register(sized("s3", 2_000)).await.map(|_| ());
    assert!(
        matches!(over_tenant, Err(Error::TooManyPending(ref m)) if m.contains("per-tenant")),
        "{over_tenant:?}"
    );
    backend
        .claim(&key("s1"), &first.rpc_id, answered())
        .await
        .expect("claim");
    backend
        .register(sized("s3", 2_000))
        .await
        .expect("the resolved ask's bytes came back");
}
