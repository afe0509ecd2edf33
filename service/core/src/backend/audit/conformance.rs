//! The rules every [`AuditStore`](super::AuditStore) keeps, written once against the
//! trait and stamped into `#[tokio::test]`s per store by
//! [`audit_store_conformance_suite!`](crate::audit_store_conformance_suite), as the
//! backend suite is.

use std::{any::Any, future::Future, sync::Arc};

/// Two nodes' handles on one log (the same store twice, for an engine of one
/// node), and a guard that keeps what they need (a Redis server) alive.
pub type Made = (
    Arc<dyn AuditStore>,
    Arc<dyn AuditStore>,
    Box<dyn Any + Send>,
);

/// Makes a fresh log: an async fn of the engine's tests.
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
/// log `$make` (an async fn of the calling module) makes.
#[macro_export]
macro_rules! audit_store_conformance_suite {
    ($make:ident) => {
        mod audit_store_conformance {
            $crate::__stamp_audit_store_conformance!(
                super::$make;
                appends_from_every_node_chain_into_one_log_per_tenant,
                a_receipt_is_consumed_once_whichever_node_is_asked,
            );
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __stamp_audit_store_conformance {
    ($make:expr; $($name:ident,)*) => {
        $(
            #[tokio::test]
            async fn $name() {
                use $crate::backend::audit::conformance::Make as _;
                let (one, two, _kept) = $make.make().await;
                $crate::backend::audit::conformance::$name(one, two).await;
            }
        )*
    };
}

use serde_json::json;

use super::*;

pub fn entry(tenant: &str, id: &str) -> AuditEntry {
    let Value::Object(fields) = json!({
        "kind": "ask.resolved", "rpc_id": id, "subject": "ana", "at": at(SystemTime::now()),
    }) else {
        unreachable!("an object")
    };
    AuditEntry {
        tenant: tenant.into(),
        id: id.into(),
        fields,
    }
}

/// `one` and `two` are two nodes' handles on the same log (the same store, for an
/// engine of one node): appends from both chain into one log per tenant, in
/// order, each id once; tenants do not see each other's records.
pub async fn appends_from_every_node_chain_into_one_log_per_tenant(
    one: Arc<dyn AuditStore>,
    two: Arc<dyn AuditStore>,
) {
    one.append(vec![
        entry("acme", "a1"),
        entry("acme", "a2"),
        entry("other", "o1"),
    ])
    .await
    .expect("append");
    // Reported again (an outbox taken twice): not appended twice.
    two.append(vec![entry("acme", "a2"), entry("acme", "a3")])
        .await
        .expect("append again");
    let acme = one.export("acme", 0, 100).await.expect("export");
    let ids: Vec<_> = acme
        .iter()
        .map(|r| serde_json::from_str::<Value>(&r.body_json).expect("json")["rpc_id"].clone())
        .collect();
    assert_eq!(ids, [json!("a1"), json!("a2"), json!("a3")]);
    assert_eq!(verify(&acme), Ok(3));
    assert_eq!(acme[0].seq, 1);
    assert_eq!(acme[0].prev_hash, "");
    let other = two.export("other", 0, 100).await.expect("export");
    assert_eq!(other.len(), 1);
    assert!(other[0].body_json.contains(r#""tenant":"other""#));
    // Pages: after a seq, at most a limit.
    let page = two.export("acme", 1, 1).await.expect("export");
    assert_eq!(page.iter().map(|r| r.seq).collect::<Vec<_>>(), [2]);
    assert!(
        one.export("nobody", 0, 10)
            .await
            .expect("export")
            .is_empty()
    );

    // Many appends at once from both handles: one chain without gaps.
    let mut tasks = Vec::new();
    for i in 0..20 {
        let store = if i % 2 == 0 { one.clone() } else { two.clone() };
        tasks.push(tokio::spawn(async move {
            store
                .append(vec![
                    entry("acme", &format!("c{i}")),
                    entry("acme", &format!("d{i}")),
                ])
                .await
        }));
    }
    for task in tasks {
        task.await.expect("join").expect("append");
    }
    let all = one.export("acme", 0, 1000).await.expect("export");
    assert_eq!(all.len(), 43);
    assert_eq!(verify(&all), Ok(43));

    // Retention keeps the newest record, so the chain goes on from it.
    one.prune(Duration::ZERO).await.expect("prune");
    let kept = one.export("acme", 0, 1000).await.expect("export");
    assert_eq!(kept.iter().map(|r| r.seq).collect::<Vec<_>>(), [43]);
    two.append(vec![entry("acme", "after")])
        .await
        .expect("append");
    let kept = one.export("acme", 0, 1000).await.expect("export");
    assert_eq!(verify(&kept), Ok(2));
    assert_eq!(kept[1].prev_hash, all[42].hash);
    // The head is the last record, seen from either handle.
    let head = two.head("acme").await.expect("head");
    assert_eq!((head.seq, head.hash.as_str()), (44, kept[1].hash.as_str()));
    assert_eq!(one.head("nobody").await.expect("head"), Head::default());
    assert_eq!(verify_export(&kept, &head, Some(&all[41].hash)), Ok(2));
}

/// A receipt is consumed once, whichever handle is asked, and the first use is
/// recorded in its tenant's log; another tenant's receipt of the same id is its own.
pub async fn a_receipt_is_consumed_once_whichever_node_is_asked(
    one: Arc<dyn AuditStore>,
    two: Arc<dyn AuditStore>,
) {
    let until = SystemTime::now() + Duration::from_secs(600);
    let record = |tenant: &str| consumption(tenant, "r-1", "s", "exec", "approved");
    let Consumed::Now(first) = one
        .consume(record("payco"), "r-1", until)
        .await
        .expect("consume")
    else {
        panic!("the first use consumes")
    };
    for store in [&one, &two] {
        let again = store
            .consume(record("payco"), "r-1", until)
            .await
            .expect("consume");
        assert_eq!(again, Consumed::Before(first), "the use is remembered");
    }
    assert!(matches!(
        two.consume(record("shopco"), "r-1", until)
            .await
            .expect("consume"),
        Consumed::Now(_)
    ));
    let log = one.export("payco", 0, 100).await.expect("export");
    let kinds: Vec<Value> = log
        .iter()
        .map(|r| serde_json::from_str::<Value>(&r.body_json).expect("json")["kind"].clone())
        .collect();
    assert_eq!(
        kinds,
        [json!("receipt.consumed")],
        "one record, of the first use"
    );
    // Racing uses: one wins.
    let mut tasks = Vec::new();
    for i in 0..8 {
        let store = if i % 2 == 0 { one.clone() } else { two.clone() };
        tasks.push(tokio::spawn(async move {
            store
                .consume(
                    consumption("payco", "r-2", "s", "exec", "approved"),
                    "r-2",
                    until,
                )
                .await
        }));
    }
    let mut won = 0;
    for task in tasks {
        if matches!(
            task.await.expect("join").expect("consume"),
            Consumed::Now(_)
        ) {
            won += 1;
        }
    }
    assert_eq!(won, 1);
    // Past its keep_until, a use is forgotten by pruning.
    let gone = SystemTime::now() - Duration::from_secs(1);
    one.consume(
        consumption("payco", "r-3", "s", "exec", "approved"),
        "r-3",
        gone,
    )
    .await
    .expect("consume");
    one.prune(Duration::from_secs(3600)).await.expect("prune");
    assert!(matches!(
        two.consume(
            consumption("payco", "r-3", "s", "exec", "approved"),
            "r-3",
            until
        )
        .await
        .expect("consume"),
        Consumed::Now(_)
    ));
    assert!(matches!(
        two.consume(record("payco"), "r-1", until)
            .await
            .expect("consume"),
        Consumed::Before(_)
    ));
}
