//! The writes of an ask's life, each one script on the session's slot: REGISTER (with,
//! on a cluster, the tenant's admission before and its part after), NOTICE, CLAIM and
//! ABORT_REQUEST.

use askgate_core::{
    backend::RequestAbort,
    domain::{Error, Fingerprint, SessionKey},
};
use askgate_proto::v1::{Requested, Resolved, subscribe_response::Event};
use prost::Message as _;

use super::{
    Claimed, Listing, RedisStore, Registration, SessionKeys, TenantKeys, TenantPart, decode,
    model::{encode_notice, live_message},
    now_ms, parse_settled,
    replies::{AbortReply, ClaimReply, NoticeReply, Refusal, RegisterReply},
    scripts::{self, *},
    unavailable,
};
use crate::redis_engine::keys::{node_waits_key, wait_member};

impl RedisStore {
    /// Stores a new ask (or finds the one its request_id names) and publishes its
    /// `requested` event, atomically.
    ///
    /// With `listing` (on one Redis; a cluster keeps the node's wait list in another
    /// slot, so [`Self::list_waiter`] runs before) the same script puts the new ask on
    /// the node's wait list and, for an ask that must be attended, checks that someone
    /// follows the session (Semantics 8): one round trip for all of it.
    /// `fingerprint` is the ask's when it has a request_id: the id names that ask only.
    pub async fn register(
        &self,
        key: &SessionKey,
        requested: &Requested,
        request_id: &str,
        fingerprint: Option<Fingerprint>,
        listing: Option<&Listing<'_>>,
    ) -> Result<Registration, Error> {
        let keys = SessionKeys::new(key);
        let tenant = TenantKeys::new(&key.tenant);
        let cluster = self.conn.is_cluster();
        let now = now_ms();
        let bytes = requested.encode_to_vec();
        if cluster
            && let Err(refused) = self.admit_on_cluster(key, &tenant, now, bytes.len()).await
            && !self.request_known(&keys, request_id).await?
        {
            // A retry of a known request adds nothing: REGISTER finds it (rule 10
            // before the caps, as on one Redis, where one script does both). A request
            // whose record expires in between comes in as a new ask, one over the cap,
            // as concurrent admissions may be.
            return Err(refused);
        }
        let call = Call {
            key,
            keys: &keys,
            tenant: &tenant,
            requested,
            request_id,
            fingerprint: fingerprint.map(Fingerprint::to_hex).unwrap_or_default(),
            bytes: &bytes,
            now,
        };
        let invocation = self.register_invocation(&call, listing);
        let registered: RegisterReply = invocation
            .invoke_async(&mut self.acked())
            .await
            .map_err(unavailable)?;
        match registered {
            RegisterReply::New { seq, epoch, held } => {
                if cluster {
                    let part = TenantPart {
                        claimed: false,
                        key: key.clone(),
                        time_us: held.unwrap_or_default(),
                        message: live_message(&epoch, seq, b'Q', &bytes),
                        session_emptied: false,
                        size: bytes.len(),
                    };
                    self.tenant_part(part, true).await;
                }
                Ok(Registration::New { seq, epoch })
            }
            RegisterReply::Joined { rpc_id, event } => {
                if let Some(event) = event {
                    let part = TenantPart {
                        claimed: false,
                        key: key.clone(),
                        message: live_message(&event.epoch, event.seq, b'Q', &event.requested),
                        time_us: event.time_us,
                        session_emptied: false,
                        size: event.requested.len(),
                    };
                    self.tenant_part(part, false).await;
                }
                Ok(Registration::Joined { rpc_id })
            }
            RegisterReply::Recorded { rpc_id, resolved } => Ok(Registration::Recorded {
                rpc_id,
                resolved: Box::new(decode(&resolved)?),
            }),
            RegisterReply::Refused(refusal) => Err(self.refused(refusal)),
        }
    }

    /// Whether `request_id` names an ask of the session, pending or recorded.
    async fn request_known(&self, keys: &SessionKeys, request_id: &str) -> Result<bool, Error> {
        if request_id.is_empty() {
            return Ok(false);
        }
        let state: Option<String> = redis::cmd("HGET")
            .arg(keys.request(request_id))
            .arg("state")
            .query_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)?;
        Ok(matches!(state.as_deref(), Some("P" | "D")))
    }

    /// On a cluster the tenant's keys live in another slot: its caps are checked
    /// before REGISTER (ADMIT_ASK), the ask counted after (TENANT_REGISTERED).
    async fn admit_on_cluster(
        &self,
        key: &SessionKey,
        tenant: &TenantKeys,
        now: u64,
        bytes: usize,
    ) -> Result<(), Error> {
        let idle_ms = self.idle_ttl_secs() * 1000;
        let admitted: String = self
            .admit_ask
            .key(tenant.pending())
            .key(tenant.held_sessions())
            .key(tenant.pending_bytes())
            .key(tenant.outcome_bytes())
            .key(tenant.outcomes())
            .arg(&*key.session_id)
            .arg(now)
            .arg(now + idle_ms)
            .arg(self.config.max_sessions_per_tenant)
            .arg(idle_ms)
            .arg(self.config.max_pending_per_tenant)
            .arg(bytes)
            .arg(self.config.max_pending_bytes_per_tenant)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)?;
        if admitted != "ok" {
            return Err(match Refusal::of(&admitted) {
                Some(refusal) => self.refused(refusal),
                None => Error::Internal(format!(
                    "unexpected reply of the admission script: {admitted:?}"
                )),
            });
        }
        Ok(())
    }

    /// REGISTER's keys and arguments (scripts/register.lua reads them in this order).
    fn register_invocation<'a>(
        &'a self,
        call: &Call<'_>,
        listing: Option<&Listing<'_>>,
    ) -> redis::ScriptInvocation<'a> {
        let mut invocation = self.register.prepare_invoke();
        invocation
            .key(call.keys.asks())
            .key(call.keys.order())
            .key(call.keys.rids())
            .key(call.keys.events())
            .key(call.keys.head())
            .key(call.keys.epoch())
            .key(call.keys.request(if call.request_id.is_empty() {
                "-"
            } else {
                call.request_id
            }));
        if !self.conn.is_cluster() {
            invocation
                .key(call.tenant.sessions())
                .key(call.tenant.pending())
                .key(call.tenant.held_sessions());
        }
        // On a cluster the node's wait list and who follows live in other slots: the
        // node listed the ask and looked before the script.
        let listed_here = listing.filter(|_| !self.conn.is_cluster());
        if let Some(listing) = listed_here {
            invocation
                .key(node_waits_key(listing.node_id))
                .key(call.keys.wait_mark(&call.requested.rpc_id))
                .key(call.keys.attended())
                .key(call.tenant.attended());
        }
        invocation
            .arg(&call.requested.rpc_id)
            .arg(call.bytes)
            .arg(call.request_id)
            .arg(self.config.history_len.max(1))
            .arg(self.config.max_pending_per_session)
            .arg(uuid::Uuid::now_v7().simple().to_string())
            .arg(call.keys.channel())
            .arg(call.tenant.channel())
            .arg(&*call.key.session_id)
            .arg(self.idle_ttl_secs())
            .arg(self.config.max_pending_per_tenant)
            .arg(self.conn.publish_command())
            .arg(call.now)
            .arg(self.config.max_sessions_per_tenant)
            .arg(call.keys.pending_bytes())
            .arg(self.config.max_pending_bytes_per_session)
            .arg(if self.conn.is_cluster() {
                String::new()
            } else {
                call.tenant.pending_bytes()
            })
            .arg(self.config.max_pending_bytes_per_tenant);
        if let Some(listing) = listed_here {
            invocation
                .arg(wait_member(call.key, &call.requested.rpc_id))
                .arg(listing.node_id)
                .arg(listing.grace.as_millis() as u64)
                .arg(listing.mark_ttl.as_millis() as u64);
        } else {
            for _ in 0..4 {
                invocation.arg("");
            }
        }
        // A new ask that must be attended is refused unless someone follows: the
        // script looks, or the node did (then only its finding that nobody does).
        let refuse_unattended =
            listing.is_some_and(|l| l.must_be_attended && l.attended != Some(true));
        invocation.arg(if refuse_unattended { "1" } else { "0" });
        for arg in self.outbox_args(call.keys, call.key) {
            invocation.arg(arg);
        }
        invocation
            .arg(call.keys.events_bytes())
            .arg(self.config.history_bytes);
        for key in [call.tenant.outcome_bytes(), call.tenant.outcomes()] {
            invocation.arg(if self.conn.is_cluster() {
                String::new()
            } else {
                key
            });
        }
        invocation.arg(&call.fingerprint);
        invocation
    }

    /// The error of a refused registration.
    fn refused(&self, refusal: Refusal) -> Error {
        match refusal {
            Refusal::SessionFull => Error::TooManyPending(format!(
                "at most {} pending asks per session",
                self.config.max_pending_per_session
            )),
            Refusal::TenantFull => self.tenant_full(),
            Refusal::SessionBytesFull => {
                Error::pending_bytes_full("session", self.config.max_pending_bytes_per_session)
            }
            Refusal::TenantBytesFull => self.tenant_bytes_full(),
            Refusal::SessionsFull => self.sessions_full(),
            Refusal::NoProvider => Error::NoProvider,
            Refusal::RequestIdReused => Error::RequestIdReused,
        }
    }

    /// Appends a notice about a pending ask to its session's history and publishes
    /// it: where it went and the ask's encoded `Requested`, or `None` when the ask is
    /// no longer pending.
    pub async fn notice(
        &self,
        key: &SessionKey,
        rpc_id: &str,
        notice: &Event,
    ) -> Result<Option<Claimed>, Error> {
        let keys = SessionKeys::new(key);
        let tenant = TenantKeys::new(&key.tenant);
        let cluster = self.conn.is_cluster();
        let bytes = encode_notice(notice);
        // One mark per kind (per approver, for approvals), ranked so that a notice sent
        // again after its node died is not sent twice.
        let (kind, rank) = match notice {
            Event::Reminder(reminder) => ("reminder".to_owned(), u64::from(reminder.count)),
            Event::Approval(approval) => (format!("approval:{}", approval.subject), 1),
            _ => ("escalated".to_owned(), 1),
        };
        let noticed: NoticeReply = NOTICE
            .key(keys.asks())
            .key(keys.events())
            .key(keys.head())
            .key(keys.epoch())
            .arg(rpc_id)
            .arg(&bytes)
            .arg(self.config.history_len.max(1))
            .arg(keys.channel())
            .arg(self.conn.publish_command())
            .arg(if cluster {
                String::new()
            } else {
                tenant.channel()
            })
            .arg(self.idle_ttl_secs())
            .arg(keys.notice_mark(rpc_id, &kind))
            .arg(rank)
            .arg(keys.events_bytes())
            .arg(self.config.history_bytes)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)?;
        // Sent before, by a node that died before it recorded so: not again on the
        // stream; the caller goes on from it (its webhooks, the next due time).
        let NoticeReply::Sent {
            first,
            seq,
            epoch,
            asked,
        } = noticed
        else {
            return Ok(None);
        };
        if cluster && first {
            let message = live_message(&epoch, seq, b'N', &bytes);
            let published = redis::cmd("SPUBLISH")
                .arg(tenant.channel())
                .arg(message)
                .query_async::<()>(&mut self.conn.clone())
                .await;
            if let Err(e) = published {
                tracing::warn!(tenant = %key.tenant, "publishing a notice to the tenant failed: {e}");
            }
        }
        Ok(Some(Claimed { seq, epoch, asked }))
    }

    /// First wins: removes the pending ask, records how it ended and publishes its
    /// `resolved` event, atomically. A later claim gets NOT_PENDING with the first's
    /// resolution while it is remembered.
    pub async fn claim(&self, key: &SessionKey, resolved: &Resolved) -> Result<Claimed, Error> {
        let keys = SessionKeys::new(key);
        let settled = format!(
            "{} {}",
            resolved.reason().as_str_name(),
            resolved.resolved_by
        );
        let tenant = TenantKeys::new(&key.tenant);
        let cluster = self.conn.is_cluster();
        let bytes = resolved.encode_to_vec();
        let mut invocation = self.claim.prepare_invoke();
        invocation
            .key(keys.asks())
            .key(keys.order())
            .key(keys.rids())
            .key(keys.events())
            .key(keys.head())
            .key(keys.epoch())
            .key(keys.settled());
        if !cluster {
            invocation
                .key(tenant.sessions())
                .key(tenant.pending())
                .key(tenant.held_sessions());
        }
        let claim: ClaimReply = invocation
            .arg(&resolved.rpc_id)
            .arg(&bytes)
            .arg(settled)
            .arg(self.config.history_len.max(1))
            .arg(self.config.request_retention.as_secs().max(1))
            .arg(keys.channel())
            .arg(keys.request(""))
            .arg(tenant.channel())
            .arg(&*key.session_id)
            .arg(self.idle_ttl_secs())
            .arg(self.conn.publish_command())
            .arg(keys.wait_mark(&resolved.rpc_id))
            .arg(now_ms())
            .arg(keys.settled_order())
            .arg(keys.pending_bytes())
            .arg(if cluster {
                String::new()
            } else {
                tenant.pending_bytes()
            })
            .arg(&self.outbox_args(&keys, key))
            .arg(keys.votes(&resolved.rpc_id))
            .arg(keys.events_bytes())
            .arg(self.config.history_bytes)
            .arg(if cluster {
                String::new()
            } else {
                tenant.outcome_bytes()
            })
            .arg(if cluster {
                String::new()
            } else {
                tenant.outcomes()
            })
            .invoke_async(&mut self.acked())
            .await
            .map_err(unavailable)?;
        match claim {
            ClaimReply::Won {
                seq,
                epoch,
                asked,
                session_left,
                held,
                outcome_bytes,
            } => {
                if cluster {
                    let part = TenantPart {
                        claimed: true,
                        key: key.clone(),
                        time_us: held.unwrap_or_default(),
                        message: live_message(&epoch, seq, b'R', &bytes),
                        session_emptied: session_left.as_deref() == Some("0"),
                        size: asked.len(),
                    };
                    self.tenant_part(part, true).await;
                    if outcome_bytes > 0 {
                        let held = OutcomeHold::Hold(outcome_bytes, &resolved.rpc_id);
                        if let Err(e) = self.tenant_outcome(&tenant, held).await {
                            tracing::warn!(tenant = %key.tenant, "counting an outcome failed: {e}");
                        }
                    }
                }
                Ok(Claimed { seq, epoch, asked })
            }
            ClaimReply::Gone { settled } => Err(Error::NotPending {
                settled: parse_settled(&settled),
            }),
        }
    }

    /// How the ask ended as far as the store knows once every write before this call
    /// is as durable as the wait policy asks (the read goes with a write the policy's
    /// `WAIT` covers): its `resolved` event (`None` if not recorded, or no longer) and
    /// whether it is pending. An outcome a failover lost shows so.
    pub async fn confirm(
        &self,
        key: &SessionKey,
        rpc_id: &str,
    ) -> Result<(Option<Resolved>, bool), Error> {
        let keys = SessionKeys::new(key);
        let (settled, pending): (Vec<u8>, i64) = scripts::CONFIRM
            .key(keys.settled())
            .key(keys.asks())
            .key(keys.barrier())
            .arg(rpc_id)
            .invoke_async(&mut self.acked())
            .await
            .map_err(unavailable)?;
        let settled = match settled.is_empty() {
            true => None,
            false => Some(super::decode(&settled)?),
        };
        Ok((settled, pending == 1))
    }

    /// Whether acknowledging writes wait for replicas or fsync.
    pub fn waits(&self) -> bool {
        self.acked.waits()
    }

    /// [`askgate_core::backend::Backend::abort_request`] on this store (one script on the
    /// session's slot, so it is atomic with REGISTER and CLAIM).
    pub async fn abort_request(
        &self,
        key: &SessionKey,
        request_id: &str,
        resolved: &Resolved,
    ) -> Result<RequestAbort, Error> {
        let tenant = TenantKeys::new(&key.tenant);
        let encoded = resolved.encode_to_vec();
        // The abort may be recorded as the outcome of an ask not made yet: it must fit
        // the tenant's budget first, and is taken off again if it was not recorded.
        let size = encoded.len() as u64;
        self.tenant_outcome(&tenant, OutcomeHold::Admit(size, &resolved.rpc_id))
            .await?;
        let aborted = scripts::ABORT_REQUEST
            .key(SessionKeys::new(key).request(request_id))
            .arg(&resolved.rpc_id)
            .arg(encoded)
            .arg(self.config.request_retention.as_secs().max(1))
            .invoke_async::<AbortReply>(&mut self.acked())
            .await
            .map_err(unavailable);
        if !matches!(aborted, Ok(AbortReply::Recorded)) {
            let release = OutcomeHold::Release(size, &resolved.rpc_id);
            if let Err(e) = self.tenant_outcome(&tenant, release).await {
                tracing::warn!(tenant = %key.tenant, "uncounting an abort failed: {e}");
            }
        }
        Ok(match aborted? {
            AbortReply::Pending(rpc_id) => RequestAbort::Pending(rpc_id),
            AbortReply::Ended => RequestAbort::Ended,
            AbortReply::Recorded => RequestAbort::Recorded,
        })
    }

    /// A recorded outcome on its tenant's byte budget (TENANT_OUTCOME).
    async fn tenant_outcome(
        &self,
        tenant: &TenantKeys,
        hold: OutcomeHold<'_>,
    ) -> Result<(), Error> {
        let (mode, bytes, id) = match hold {
            OutcomeHold::Hold(bytes, id) => ("hold", bytes, id),
            OutcomeHold::Admit(bytes, id) => ("admit", bytes, id),
            OutcomeHold::Release(bytes, id) => ("release", bytes, id),
        };
        let now = now_ms();
        let retention =
            u64::try_from(self.config.request_retention.as_millis()).unwrap_or(u64::MAX);
        let reply: String = TENANT_OUTCOME
            .key(tenant.pending_bytes())
            .key(tenant.outcome_bytes())
            .key(tenant.outcomes())
            .arg(mode)
            .arg(now)
            .arg(bytes)
            .arg(now.saturating_add(retention.max(1000)))
            .arg(id)
            .arg(self.config.max_pending_bytes_per_tenant)
            .invoke_async(&mut self.acked())
            .await
            .map_err(unavailable)?;
        match reply.as_str() {
            "ok" => Ok(()),
            _ => Err(self.tenant_bytes_full()),
        }
    }
}

/// What TENANT_OUTCOME does with an outcome of so many bytes, named by its rpc_id.
enum OutcomeHold<'a> {
    /// Count it, never refused.
    Hold(u64, &'a str),
    /// Count it if it fits the budget.
    Admit(u64, &'a str),
    /// Take it off: it was not recorded.
    Release(u64, &'a str),
}

/// What one REGISTER call is about.
struct Call<'a> {
    key: &'a SessionKey,
    keys: &'a SessionKeys,
    tenant: &'a TenantKeys,
    requested: &'a Requested,
    request_id: &'a str,
    /// Hex, empty for none.
    fingerprint: String,
    bytes: &'a [u8],
    now: u64,
}
