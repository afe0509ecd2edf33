//! What the delivery machinery reports: the node's metrics and traces, which the
//! server keeps (Prometheus, OpenTelemetry) and hands in as an [`Observer`].

use tracing::Span;

use crate::backend::hooks::records::DeliveryRecord;

/// Where the channels' counts and spans go.
pub trait Observer: Send + Sync {
    /// `count` deliveries of `tenant` ended `outcome` (`delivered`, `retried`,
    /// `failed`, `dropped`; an empty tenant when it is not known).
    fn deliveries(&self, tenant: &str, outcome: &str, count: u64);

    /// A reminder or escalation notice (`kind`) went out for `tenant`.
    fn notice(&self, tenant: &str, kind: &str);

    /// The span of one delivery attempt, a child of its ask's.
    fn delivery_span(&self, delivery: &DeliveryRecord) -> Span;
}
