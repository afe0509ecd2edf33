//! The hook store: where webhook endpoints, Slack apps, deliveries and reminder
//! timers live: in this process (the memory engine's `MemoryHookStore`) or in Redis,
//! shared by every node (the redis engine's `RedisHookStore`). Both keep the same
//! records and honour the same contract, which `conformance` below checks on each.
//!
//! Deliveries and timers are handed out with a lease: a claimed one is due again at
//! `lease_until`, so a node that dies holding it loses nothing (a survivor claims it
//! then), and no other node takes it while the lease runs.

pub mod records;

use async_trait::async_trait;

use self::records::{
    DeliveryRecord, EndpointRecord, GrantRecord, PersonRecord, PolicySetRecord, Status, TimerRecord,
};
use crate::{backend::audit::AuditEntry, domain::Error};

/// The per-tenant bounds a store enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreLimits {
    /// Endpoints one tenant may have.
    pub max_endpoints: usize,
    /// Pending deliveries one tenant may have queued.
    pub max_queued: usize,
    /// Finished (delivered or failed) deliveries kept per tenant, newest first.
    pub keep_finished: usize,
    /// People one tenant may have.
    pub max_people: usize,
}

/// People a tenant may have unless told otherwise.
pub const DEFAULT_MAX_PEOPLE: usize = 10_000;

/// How a node's delivery slots are shared: a tenant may hold `per_tenant` of them and
/// an endpoint `per_endpoint`, counting what the node has in flight already, so that
/// one tenant's slow endpoints delay only that tenant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Shares {
    pub per_tenant: usize,
    pub per_endpoint: usize,
    /// Attempts in flight on this node, by tenant and by endpoint id.
    pub tenants: std::collections::HashMap<String, usize>,
    pub endpoints: std::collections::HashMap<String, usize>,
}

impl Shares {
    /// Due deliveries one claim looks at, at most: past several tenants' full queues
    /// of slow deliveries (`--webhook-max-queued`, 1,000 by default), and a bound on
    /// the claim's cost.
    pub const SCAN: usize = 4096;

    /// Unlimited shares, for tests of the store alone.
    pub fn unlimited() -> Self {
        Self {
            per_tenant: usize::MAX,
            per_endpoint: usize::MAX,
            ..Self::default()
        }
    }

    /// Takes a slot for a delivery of `tenant` to `endpoint`, if both have room.
    pub fn take(&mut self, tenant: &str, endpoint: &str) -> bool {
        let tenant_used = self.tenants.get(tenant).copied().unwrap_or(0);
        let endpoint_used = self.endpoints.get(endpoint).copied().unwrap_or(0);
        if tenant_used >= self.per_tenant || endpoint_used >= self.per_endpoint {
            return false;
        }
        *self.tenants.entry(tenant.to_owned()).or_default() += 1;
        *self.endpoints.entry(endpoint.to_owned()).or_default() += 1;
        true
    }
}

#[async_trait]
pub trait HookStore: Send + Sync + 'static {
    /// Adds an endpoint; TOO_MANY_WEBHOOKS past `max_endpoints`. `audit` is the
    /// change's audit record: kept in the same write, until [`Self::audited`] (so an
    /// admin change is never durable without its record).
    async fn create_endpoint(
        &self,
        endpoint: &EndpointRecord,
        audit: &AuditEntry,
    ) -> Result<(), Error>;

    /// The tenant's endpoints, oldest first.
    async fn endpoints(&self, tenant: &str) -> Result<Vec<EndpointRecord>, Error>;

    async fn endpoint(&self, tenant: &str, id: &str) -> Result<Option<EndpointRecord>, Error>;

    /// Whether one of the tenant's endpoints provides for an ask in `session` with
    /// `labels` (Semantics 8): it counts as someone who will answer. An unreadable
    /// store provides nothing.
    async fn provides(
        &self,
        tenant: &str,
        session: &str,
        labels: &std::collections::HashMap<String, String>,
    ) -> bool {
        match self.endpoints(tenant).await {
            Ok(endpoints) => endpoints
                .iter()
                .any(|e| e.provides && e.wants(records::EventType::Requested, session, labels)),
            Err(e) => {
                tracing::warn!("reading webhook endpoints failed: {e}");
                false
            }
        }
    }

    /// Removes an endpoint; whether it was there (and `audit` kept with the change,
    /// as for [`Self::create_endpoint`]). Its pending deliveries end FAILED at their
    /// next attempt.
    async fn delete_endpoint(
        &self,
        tenant: &str,
        id: &str,
        audit: &AuditEntry,
    ) -> Result<bool, Error>;

    /// Queues new pending deliveries of one tenant, as many as its queue has room
    /// for; returns how many were queued.
    async fn enqueue(&self, tenant: &str, deliveries: &[DeliveryRecord]) -> Result<usize, Error>;

    /// Hands out up to `limit` deliveries due at `now_ms`, oldest first, each with its
    /// attempts bumped and leased until `lease_until_ms`; one whose tenant or endpoint
    /// has used its share of the node's slots (see [`Shares`]) is passed over and
    /// stays due. At most [`Shares::SCAN`] due deliveries are looked at.
    async fn claim_deliveries(
        &self,
        now_ms: u64,
        lease_until_ms: u64,
        limit: usize,
        shares: &Shares,
    ) -> Result<Vec<DeliveryRecord>, Error>;

    /// Records the outcome of an attempt: `record` as updated by the node that made
    /// it (status, error, next attempt). Dropped when the delivery was handed out
    /// again meanwhile (its attempts moved on), or is gone; `Ok(false)` then.
    async fn finish_attempt(&self, record: &DeliveryRecord) -> Result<bool, Error>;

    /// The tenant's deliveries, newest first.
    async fn deliveries(
        &self,
        tenant: &str,
        endpoint_id: Option<&str>,
        status: Option<Status>,
        limit: usize,
    ) -> Result<Vec<DeliveryRecord>, Error>;

    /// Makes a delivery of the tenant pending again, due at once, retried until
    /// `retry_until_ms` (and keeps `audit`, as [`Self::create_endpoint`] does).
    /// NOT_FOUND when the tenant has no such delivery; TOO_MANY_WEBHOOKS when its
    /// queue is full. A pending one only becomes due now.
    async fn redeliver(
        &self,
        tenant: &str,
        id: &str,
        now_ms: u64,
        retry_until_ms: u64,
        audit: &AuditEntry,
    ) -> Result<DeliveryRecord, Error>;

    /// The audit records of admin changes that are not in the audit log yet, at most
    /// `limit`, oldest first.
    async fn unaudited(&self, limit: usize) -> Result<Vec<AuditEntry>, Error>;

    /// The records `ids` are in the audit log now: forgets them.
    async fn audited(&self, ids: &[String]) -> Result<(), Error>;

    /// Adds an ask's reminder timer, due at `due_ms`; an ask's timer is added once.
    async fn schedule(&self, timer: &TimerRecord, due_ms: u64) -> Result<(), Error>;

    /// Hands out up to `limit` timers due at `now_ms`, leased until `lease_until_ms`.
    async fn claim_timers(
        &self,
        now_ms: u64,
        lease_until_ms: u64,
        limit: usize,
    ) -> Result<Vec<TimerRecord>, Error>;

    /// Stores a timer's progress and its next due time, or removes it (`None`).
    async fn finish_timer(&self, timer: &TimerRecord, next_ms: Option<u64>) -> Result<(), Error>;

    /// Removes an ask's timer (its ask was resolved).
    async fn cancel_timer(&self, timer_id: &str) -> Result<(), Error>;

    /// Keeps `value` under `key` for `ttl_ms` (where a Slack message was posted, a
    /// request seen); with `only_new`, only if the key is not there yet. Whether it
    /// was stored.
    async fn put_note(
        &self,
        key: &str,
        value: &str,
        ttl_ms: u64,
        only_new: bool,
    ) -> Result<bool, Error>;

    /// A note's value, while it lasts.
    async fn note(&self, key: &str) -> Result<Option<String>, Error>;

    /// Adds a person, or replaces the one with their id (and `audit` kept with the
    /// change, as for [`Self::create_endpoint`]). BAD_REQUEST naming the identity when
    /// one of theirs belongs to another person of the tenant; TOO_MANY_WEBHOOKS past
    /// `max_people` (the tenant's admin records are bounded alike).
    async fn put_person(&self, person: &PersonRecord, audit: &AuditEntry) -> Result<(), Error>;

    /// The tenant's people, by id.
    async fn people(&self, tenant: &str) -> Result<Vec<PersonRecord>, Error>;

    /// Removes a person; whether they were there (with `audit`, as above).
    async fn delete_person(
        &self,
        tenant: &str,
        id: &str,
        audit: &AuditEntry,
    ) -> Result<bool, Error>;

    /// The person of the tenant whose identity `identity` is (normalised), if any.
    async fn person_of(&self, tenant: &str, identity: &str) -> Result<Option<PersonRecord>, Error>;

    /// Replaces the tenant's policy set with `set` (its version the one after the
    /// stored set's; `audit` kept with the change, as for [`Self::create_endpoint`]);
    /// returns the set as stored.
    async fn put_policies(
        &self,
        set: &PolicySetRecord,
        audit: &AuditEntry,
    ) -> Result<PolicySetRecord, Error>;

    /// The tenant's policy set, if it was ever put.
    async fn policies(&self, tenant: &str) -> Result<Option<PolicySetRecord>, Error>;

    /// The version of the tenant's policy set (0: never put): what a node compares with
    /// its compiled copy, often, so cheaper than [`Self::policies`] where it can be.
    async fn policies_version(&self, tenant: &str) -> Result<u64, Error> {
        Ok(self.policies(tenant).await?.map_or(0, |set| set.version))
    }

    /// Adds a standing grant (and `audit`, as for [`Self::create_endpoint`]), first
    /// dropping the tenant's grants that expired by `grant.created_ms`;
    /// TOO_MANY_WEBHOOKS when the tenant holds
    /// [`MAX_GRANTS_PER_TENANT`](crate::domain::policy_set::MAX_GRANTS_PER_TENANT)
    /// already.
    async fn put_grant(&self, grant: &GrantRecord, audit: &AuditEntry) -> Result<(), Error>;

    /// The tenant's grants (some may have expired), newest first.
    async fn grants(&self, tenant: &str) -> Result<Vec<GrantRecord>, Error>;

    /// Ends the grant `id` of the tenant; whether it was there (with `audit`, as above).
    async fn revoke_grant(&self, tenant: &str, id: &str, audit: &AuditEntry)
    -> Result<bool, Error>;

    /// Counts the changes of the tenant's grants (0: none ever, on this store's
    /// memory): what a node compares with the copy it judges asks by.
    async fn grants_version(&self, tenant: &str) -> Result<u64, Error>;
}

/// Why `person` cannot be put beside `others` (the tenant's people): an identity of
/// theirs that another person holds.
pub fn identity_taken(person: &PersonRecord, others: &[PersonRecord]) -> Option<Error> {
    person
        .identities
        .iter()
        .enumerate()
        .find_map(|(i, identity)| {
            others
                .iter()
                .find(|o| o.id != person.id && o.identities.contains(identity))
                .map(|o| {
                    Error::bad_request(
                        format!("identities[{i}]"),
                        format!(
                            "{} belongs to person {} already",
                            crate::domain::echo(identity),
                            crate::domain::echo(&o.id)
                        ),
                    )
                })
        })
}

#[cfg(feature = "conformance")]
pub mod conformance;
