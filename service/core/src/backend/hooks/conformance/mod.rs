//! The contract every hook store must keep, written once against the trait and
//! stamped into `#[tokio::test]`s per store by
//! [`hook_store_conformance_suite!`](crate::hook_store_conformance_suite), as the
//! backend suite is (memory, sqlite; Redis on one server, a cluster and through
//! Sentinels).

use std::{any::Any, collections::HashMap, future::Future, sync::Arc};

use super::*;
use crate::backend::hooks::records::EventType;

/// A store under test, sized by [`LIMITS`], and a guard that keeps what it needs (a
/// Redis server, a data directory) alive.
pub type Made = (Arc<dyn HookStore>, Box<dyn Any + Send>);

/// Makes a fresh store: an async fn of the engine's tests.
pub trait Make: Copy {
    fn make(self) -> impl Future<Output = Made>;
}

impl<F, Fut> Make for F
where
    F: Fn() -> Fut + Copy,
    Fut: Future<Output = Made>,
{
    fn make(self) -> impl Future<Output = Made> {
        self()
    }
}

/// Stamps the suite into a store's tests: one `#[tokio::test]` per rule, each on a
/// store `$make` (an async fn of the calling module) makes.
#[macro_export]
macro_rules! hook_store_conformance_suite {
    ($make:ident) => {
        mod hook_store_conformance {
            $crate::__stamp_hook_store_conformance!(
                super::$make;
                endpoints_are_per_tenant_and_capped,
                admin_changes_keep_their_audit_records,
                deliveries_are_leased_finished_and_listed,
                failed_deliveries_are_redelivered_and_old_ones_trimmed,
                timers_are_leased_advanced_and_cancelled,
                notes_are_kept_once_and_expire,
                claims_keep_each_tenant_and_endpoint_to_its_share,
                people_hold_their_identities_alone,
                policy_sets_are_per_tenant_and_versioned,
                grants_are_per_tenant_revoked_and_versioned,
            );
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __stamp_hook_store_conformance {
    ($make:expr; $($name:ident,)*) => {
        $(
            #[tokio::test]
            async fn $name() {
                $crate::backend::hooks::conformance::run($make, |store| Box::pin(async move {
                    $crate::backend::hooks::conformance::$name(&*store).await
                }))
                .await;
            }
        )*
    };
}

/// Runs one rule on a store `make` makes; the rule's error fails the test.
pub async fn run(
    make: impl Make,
    rule: impl FnOnce(
        Arc<dyn HookStore>,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<(), Error>> + Send>>,
) {
    let (store, _kept) = make.make().await;
    if let Err(e) = rule(store).await {
        panic!("the store breaks the contract: {e}");
    }
}

pub const LIMITS: StoreLimits = StoreLimits {
    max_endpoints: 2,
    max_queued: 3,
    keep_finished: 2,
    max_people: 3,
};

pub fn endpoint(tenant: &str, id: &str) -> EndpointRecord {
    EndpointRecord {
        id: id.into(),
        tenant: tenant.into(),
        url: "https://hooks.example.com/in".into(),
        events: EventType::ALL.to_vec(),
        description: "d".into(),
        labels: HashMap::new(),
        secret: "whsec_c2VjcmV0".into(),
        provides: true,
        created_ms: 1,
        session_prefix: String::new(),
        slack: None,
        channel: None,
    }
}

/// A tenant whose deliveries are oldest takes no more than its share of a claim,
/// nor an endpoint more than its own; what the node has in flight counts; the
/// passed-over deliveries stay due for the next claim.
pub async fn claims_keep_each_tenant_and_endpoint_to_its_share(
    store: &dyn HookStore,
) -> Result<(), Error> {
    let at = |tenant: &str, endpoint: &str, id: &str, ms| DeliveryRecord {
        endpoint_id: endpoint.into(),
        ..delivery(tenant, id, ms)
    };
    // Older than the quiet tenant's, all of them.
    let noisy = [
        at("noisy", "slow-1", "n1-0", 0),
        at("noisy", "slow-2", "n2-0", 0),
        at("noisy", "slow-1", "n1-1", 1),
    ];
    store.enqueue("noisy", &noisy).await?;
    store
        .enqueue("quiet", &[at("quiet", "fast", "q-0", 10)])
        .await?;
    let shares = Shares {
        per_tenant: 2,
        per_endpoint: 1,
        ..Shares::default()
    };
    let claimed = store.claim_deliveries(100, 1000, 10, &shares).await?;
    let mut ids: Vec<&str> = claimed.iter().map(|d| d.id.as_str()).collect();
    ids.sort_unstable();
    // n1-0 (slow-1's one), n2-0 (slow-2's one: the tenant's two), and quiet's.
    assert_eq!(ids, ["n1-0", "n2-0", "q-0"]);
    // What is in flight counts: the noisy tenant has no room left.
    let busy = Shares {
        tenants: HashMap::from([("noisy".into(), 2)]),
        ..shares.clone()
    };
    assert!(
        store
            .claim_deliveries(100, 1000, 10, &busy)
            .await?
            .is_empty()
    );
    // Once it has room again, what was passed over is handed out.
    let free = store.claim_deliveries(100, 1000, 10, &shares).await?;
    assert_eq!(free.len(), 1);
    assert_eq!(free[0].id, "n1-1");
    Ok(())
}

pub fn delivery(tenant: &str, id: &str, created_ms: u64) -> DeliveryRecord {
    DeliveryRecord {
        id: id.into(),
        tenant: tenant.into(),
        endpoint_id: "e1".into(),
        event_type: EventType::Requested,
        session_id: "s".into(),
        rpc_id: "r".into(),
        body: "{}".into(),
        status: Status::Pending,
        attempts: 0,
        last_error: String::new(),
        created_ms,
        retry_until_ms: created_ms + 1_000_000,
        next_attempt_ms: created_ms,
        last_attempt_ms: 0,
        traceparent: String::new(),
    }
}

pub async fn endpoints_are_per_tenant_and_capped(store: &dyn HookStore) -> Result<(), Error> {
    store
        .create_endpoint(&endpoint("a", "e1"), &change("a", "1"))
        .await?;
    store
        .create_endpoint(&endpoint("a", "e2"), &change("a", "2"))
        .await?;
    let third = store
        .create_endpoint(&endpoint("a", "e3"), &change("a", "x"))
        .await;
    assert!(matches!(third, Err(Error::TooManyWebhooks(_))), "{third:?}");
    store
        .create_endpoint(&endpoint("b", "e1"), &change("b", "3"))
        .await?;
    let ids = |list: Vec<EndpointRecord>| list.into_iter().map(|e| e.id).collect::<Vec<_>>();
    assert_eq!(ids(store.endpoints("a").await?), ["e1", "e2"]);
    assert_eq!(ids(store.endpoints("b").await?), ["e1"]);
    assert!(store.endpoint("c", "e1").await?.is_none());
    assert!(!store.delete_endpoint("c", "e1", &change("c", "y")).await?);
    assert!(store.delete_endpoint("a", "e1", &change("a", "4")).await?);
    assert!(store.endpoint("a", "e1").await?.is_none());
    assert_eq!(store.endpoint("b", "e1").await?, Some(endpoint("b", "e1")));
    store
        .create_endpoint(&endpoint("a", "e3"), &change("a", "5"))
        .await?;
    Ok(())
}

/// An admin change's audit record, named `id`.
pub fn change(tenant: &str, id: &str) -> AuditEntry {
    crate::backend::audit::conformance::entry(tenant, id)
}

/// Each admin change that happened keeps its audit record until it is audited;
/// one that did not happen (refused, or nothing to delete) keeps none. A store
/// that writes the records to the audit log itself, in the change's own commit
/// (SQLite's), keeps none: its engine's tests check the log instead.
pub async fn admin_changes_keep_their_audit_records(store: &dyn HookStore) -> Result<(), Error> {
    let made = change("a", "made");
    store.create_endpoint(&endpoint("a", "e1"), &made).await?;
    if store.unaudited(10).await?.is_empty() {
        return Ok(());
    }
    store
        .create_endpoint(&endpoint("a", "e2"), &change("a", "made-2"))
        .await?;
    let refused = store
        .create_endpoint(&endpoint("a", "e3"), &change("a", "refused"))
        .await;
    assert!(refused.is_err());
    assert!(
        !store
            .delete_endpoint("a", "none", &change("a", "nothing"))
            .await?
    );
    assert!(
        store
            .delete_endpoint("a", "e2", &change("a", "deleted"))
            .await?
    );
    store.enqueue("a", &[delivery("a", "d1", 10)]).await?;
    let missing = store
        .redeliver("a", "d9", 50, 500, &change("a", "missing"))
        .await;
    assert!(missing.is_err());
    store
        .redeliver("a", "d1", 50, 500, &change("a", "redelivered"))
        .await?;
    let ids = |entries: Vec<AuditEntry>| entries.into_iter().map(|e| e.id).collect::<Vec<_>>();
    let kept = ids(store.unaudited(10).await?);
    assert_eq!(kept, ["made", "made-2", "deleted", "redelivered"]);
    assert_eq!(ids(store.unaudited(2).await?), ["made", "made-2"]);
    let kept_entry = &store.unaudited(1).await?[0];
    assert_eq!(kept_entry, &made, "kept whole");
    store.audited(&["made".into(), "deleted".into()]).await?;
    assert_eq!(ids(store.unaudited(10).await?), ["made-2", "redelivered"]);
    store
        .audited(&["made-2".into(), "redelivered".into(), "never".into()])
        .await?;
    assert!(store.unaudited(10).await?.is_empty());
    Ok(())
}

pub async fn deliveries_are_leased_finished_and_listed(store: &dyn HookStore) -> Result<(), Error> {
    let queued = store
        .enqueue(
            "a",
            &[
                delivery("a", "d1", 10),
                delivery("a", "d2", 20),
                delivery("a", "d3", 30),
            ],
        )
        .await?;
    assert_eq!(queued, 3);
    // The queue is full: nothing more goes in, and other tenants are not affected.
    assert_eq!(store.enqueue("a", &[delivery("a", "d4", 40)]).await?, 0);
    assert_eq!(store.enqueue("b", &[delivery("b", "x1", 40)]).await?, 1);

    // Due at 25: d1 and d2 (and not x1, due at 40). Leased until 100.
    let mut claimed = store
        .claim_deliveries(25, 100, 10, &Shares::unlimited())
        .await?;
    claimed.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(
        claimed.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(),
        ["d1", "d2"]
    );
    assert!(claimed.iter().all(|d| d.attempts == 1));
    // Leased: not handed out again before the lease ends.
    let again = store
        .claim_deliveries(50, 150, 10, &Shares::unlimited())
        .await?;
    assert_eq!(
        again.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(),
        ["d3", "x1"]
    );

    // d1 delivered; d2 retried at 120.
    let mut d1 = claimed[0].clone();
    d1.status = Status::Delivered;
    d1.last_attempt_ms = 60;
    assert!(store.finish_attempt(&d1).await?);
    let mut d2 = claimed[1].clone();
    d2.last_error = "HTTP 500".into();
    d2.next_attempt_ms = 120;
    assert!(store.finish_attempt(&d2).await?);
    // A queue slot is free again once d1 is delivered.
    assert_eq!(store.enqueue("a", &[delivery("a", "d4", 70)]).await?, 1);
    let fresh = store
        .claim_deliveries(110, 200, 10, &Shares::unlimited())
        .await?;
    assert_eq!(
        fresh.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(),
        ["d4"]
    );
    let retried = store
        .claim_deliveries(120, 200, 10, &Shares::unlimited())
        .await?;
    assert_eq!(retried.len(), 1);
    assert_eq!((retried[0].id.as_str(), retried[0].attempts), ("d2", 2));
    // The outcome of the first attempt, arriving late, is dropped.
    assert!(!store.finish_attempt(&d2).await?);

    let listed = store.deliveries("a", None, None, 10).await?;
    assert_eq!(
        listed.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(),
        ["d4", "d3", "d2", "d1"]
    );
    let delivered = store
        .deliveries("a", Some("e1"), Some(Status::Delivered), 10)
        .await;
    assert_eq!(delivered?, [d1.clone()]);
    assert!(
        store
            .deliveries("a", Some("other"), None, 10)
            .await?
            .is_empty()
    );
    assert_eq!(store.deliveries("a", None, None, 2).await?.len(), 2);
    assert_eq!(store.deliveries("b", None, None, 10).await?.len(), 1);
    Ok(())
}

pub async fn failed_deliveries_are_redelivered_and_old_ones_trimmed(
    store: &dyn HookStore,
) -> Result<(), Error> {
    store.enqueue("a", &[delivery("a", "d1", 10)]).await?;
    let mut d1 = store
        .claim_deliveries(10, 100, 10, &Shares::unlimited())
        .await?
        .remove(0);
    d1.status = Status::Failed;
    d1.last_error = "HTTP 500".into();
    assert!(store.finish_attempt(&d1).await?);
    assert!(
        store
            .claim_deliveries(1000, 2000, 10, &Shares::unlimited())
            .await?
            .is_empty()
    );

    // Another tenant cannot see or redeliver it.
    let foreign = store.redeliver("b", "d1", 50, 500, &change("b", "f")).await;
    assert!(matches!(foreign, Err(Error::NotFound(_))), "{foreign:?}");
    let again = store
        .redeliver("a", "d1", 50, 500, &change("a", "r"))
        .await?;
    assert_eq!(
        (again.status, again.next_attempt_ms, again.retry_until_ms),
        (Status::Pending, 50, 500)
    );
    let claimed = store
        .claim_deliveries(50, 1000, 10, &Shares::unlimited())
        .await?;
    assert_eq!((claimed[0].id.as_str(), claimed[0].attempts), ("d1", 2));

    // Finished deliveries beyond `keep_finished` are forgotten, oldest first.
    let mut finished = vec![claimed[0].clone()];
    for (i, id) in ["d2", "d3"].into_iter().enumerate() {
        store
            .enqueue("a", &[delivery("a", id, 20 + i as u64)])
            .await?;
    }
    finished.extend(
        store
            .claim_deliveries(100, 200, 10, &Shares::unlimited())
            .await?,
    );
    for (i, mut d) in finished.into_iter().enumerate() {
        d.status = Status::Delivered;
        d.last_attempt_ms = 100 + i as u64;
        assert!(store.finish_attempt(&d).await?);
    }
    let kept = store.deliveries("a", None, None, 10).await?;
    assert_eq!(kept.len(), 2, "{kept:?}");
    let missing = store
        .redeliver("a", "d1", 300, 400, &change("a", "m"))
        .await;
    assert!(matches!(missing, Err(Error::NotFound(_))), "{missing:?}");
    Ok(())
}

pub async fn timers_are_leased_advanced_and_cancelled(store: &dyn HookStore) -> Result<(), Error> {
    let timer = TimerRecord {
        tenant: "a".into(),
        session_id: "s".into(),
        rpc_id: "r".into(),
        asked_ms: 0,
        remind_after_ms: 100,
        remind_every_ms: 100,
        max_reminders: 0,
        escalate_after_ms: 0,
        reminders: 0,
        escalated: false,
        steps: Vec::new(),
        steps_done: 0,
    };
    store.schedule(&timer, 100).await?;
    // Scheduling the same ask again (a retried call) changes nothing.
    store.schedule(&timer, 5).await?;
    assert!(store.claim_timers(99, 1000, 10).await?.is_empty());
    let claimed = store.claim_timers(100, 1000, 10).await?;
    assert_eq!(claimed, std::slice::from_ref(&timer));
    assert!(store.claim_timers(500, 1000, 10).await?.is_empty());
    // A lease that runs out hands it out again (its node died).
    assert_eq!(store.claim_timers(1000, 2000, 10).await?.len(), 1);
    let advanced = TimerRecord {
        reminders: 1,
        ..timer.clone()
    };
    store.finish_timer(&advanced, Some(200)).await?;
    assert_eq!(
        store.claim_timers(200, 300, 10).await?,
        std::slice::from_ref(&advanced)
    );
    store.finish_timer(&advanced, Some(300)).await?;
    store.cancel_timer(&timer.id()).await?;
    assert!(store.claim_timers(10_000, 20_000, 10).await?.is_empty());
    store.schedule(&timer, 100).await?;
    store.finish_timer(&timer, None).await?;
    assert!(store.claim_timers(10_000, 20_000, 10).await?.is_empty());
    Ok(())
}

pub async fn notes_are_kept_once_and_expire(store: &dyn HookStore) -> Result<(), Error> {
    assert_eq!(store.note("a").await?, None);
    assert!(store.put_note("a", "1", 60_000, true).await?);
    assert!(!store.put_note("a", "2", 60_000, true).await?, "only new");
    assert_eq!(store.note("a").await?.as_deref(), Some("1"));
    assert!(store.put_note("a", "3", 60_000, false).await?, "overwrite");
    assert_eq!(store.note("a").await?.as_deref(), Some("3"));
    assert!(store.put_note("short", "x", 30, true).await?);
    let gone = tokio::time::timeout(std::time::Duration::from_secs(5), async {
        while store.note("short").await?.is_some() {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        Ok::<_, Error>(())
    })
    .await;
    assert!(matches!(gone, Ok(Ok(()))), "a note expires after its ttl");
    assert!(
        store.put_note("short", "y", 60_000, true).await?,
        "and may be set again"
    );
    Ok(())
}

fn person(tenant: &str, id: &str, identities: &[&str]) -> PersonRecord {
    PersonRecord {
        tenant: tenant.into(),
        id: id.into(),
        display_name: format!("Person {id}"),
        groups: vec!["ops".into()],
        identities: identities.iter().map(|i| (*i).to_owned()).collect(),
        delegate: None,
        updated_ms: 1,
    }
}

/// People are per tenant and capped; an identity belongs to one person of a tenant,
/// a replaced person's old identities are free again, and a deleted person's too.
pub async fn people_hold_their_identities_alone(store: &dyn HookStore) -> Result<(), Error> {
    let ana = person("a", "ana", &["ana", "slack:t1/u1"]);
    store.put_person(&ana, &change("a", "p1")).await?;
    store
        .put_person(&person("b", "ana", &["ana"]), &change("b", "p2"))
        .await?;
    assert_eq!(
        store.person_of("a", "slack:t1/u1").await?,
        Some(ana.clone())
    );
    assert_eq!(store.person_of("a", "telegram:1").await?, None);
    assert_eq!(store.person_of("c", "ana").await?, None, "per tenant");

    // Another person of the tenant cannot take ana's identity.
    let bo = person("a", "bo", &["bo", "slack:t1/u1"]);
    let taken = store.put_person(&bo, &change("a", "p3")).await;
    assert!(
        matches!(&taken, Err(Error::BadRequest(v)) if v[0].field == "identities[1]"),
        "{taken:?}"
    );
    assert_eq!(
        store.person_of("a", "bo").await?,
        None,
        "nothing of a refused put"
    );
    // Replaced, ana frees it; then bo may have it.
    let ana_again = person("a", "ana", &["ana", "email:ana@example.org"]);
    store.put_person(&ana_again, &change("a", "p4")).await?;
    assert_eq!(store.person_of("a", "slack:t1/u1").await?, None);
    store.put_person(&bo, &change("a", "p5")).await?;
    assert_eq!(store.person_of("a", "slack:t1/u1").await?, Some(bo.clone()));
    let ids = |people: Vec<PersonRecord>| people.into_iter().map(|p| p.id).collect::<Vec<_>>();
    assert_eq!(ids(store.people("a").await?), ["ana", "bo"]);

    // The cap counts people, not puts.
    store
        .put_person(&person("a", "cy", &["cy"]), &change("a", "p6"))
        .await?;
    let full = store
        .put_person(&person("a", "dee", &["dee"]), &change("a", "p7"))
        .await;
    assert!(matches!(full, Err(Error::TooManyWebhooks(_))), "{full:?}");
    store.put_person(&ana_again, &change("a", "p8")).await?;

    assert!(store.delete_person("a", "bo", &change("a", "p9")).await?);
    assert!(!store.delete_person("a", "bo", &change("a", "p10")).await?);
    assert_eq!(store.person_of("a", "slack:t1/u1").await?, None);
    assert_eq!(ids(store.people("a").await?), ["ana", "cy"]);
    assert_eq!(ids(store.people("b").await?), ["ana"]);
    Ok(())
}

mod rules;
pub use rules::*;
