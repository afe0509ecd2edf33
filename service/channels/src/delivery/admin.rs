//! The admin use cases of every channel's connections (the `Webhooks`, `Slack`,
//! `Telegram`, `Email` and `Ntfy` services): connect, list and disconnect, written once
//! for every [`Connector`]; and the deliveries, listed and sent again.

use askgate_proto::v1::{Delivery, DeliveryStatus, ListDeliveriesRequest};
use serde_json::json;
use tracing::{debug, warn};

use super::Hooks;
use crate::channel::{
    Checks, Connector,
    clock::{millis, now_ms, timestamp},
};
use crate::{
    backend::{
        audit_log::Audit,
        hooks::records::{DeliveryRecord, Status},
    },
    domain::{Error, Resolver},
};

/// Deliveries listed at most (and by default) per call.
const MAX_LISTED: usize = 1000;
const DEFAULT_LISTED: usize = 100;

impl Hooks {
    /// Connects one of `channel`'s connections for `tenant`: the request checked (and,
    /// where the channel can, its credentials with the service), the record stored with
    /// its audit record in one write. The connection as the admin API shows it.
    pub async fn connect<C: Connector>(
        &self,
        channel: &C,
        tenant: &str,
        request: C::Request,
        by: &Resolver,
    ) -> Result<C::Connection, Error> {
        let checks = Checks {
            limits: &self.inner.limits,
            sender: &self.inner.sender,
            timeout: self.inner.config.timeout,
        };
        let record = channel.connect(tenant, request, &checks).await?;
        let connection = channel
            .shown(&record, true)
            .ok_or_else(|| Error::Internal(format!("not a {}", channel.noun())))?;
        let details = channel.details(&connection);
        let audit = Audit::admin_entry(tenant, by, C::CONNECTED, details);
        self.inner.store.create_endpoint(&record, &audit).await?;
        debug!(id = %record.id, channel = channel.name(), "connected");
        self.audited().await;
        Ok(connection)
    }

    /// The tenant's connections of `channel`, oldest first, without their secrets.
    pub async fn list<C: Connector>(
        &self,
        channel: &C,
        tenant: &str,
    ) -> Result<Vec<C::Connection>, Error> {
        let records = self.inner.store.endpoints(tenant).await?;
        Ok(records
            .iter()
            .filter_map(|record| channel.shown(record, false))
            .collect())
    }

    /// Disconnects the connection `id` of `channel`: NOT_FOUND for another channel's,
    /// as for a missing one.
    pub async fn disconnect<C: Connector>(
        &self,
        channel: &C,
        tenant: &str,
        id: &str,
        by: &Resolver,
    ) -> Result<(), Error> {
        let not_found = || Error::NotFound(format!("no {} with that id", channel.noun()));
        let store = &self.inner.store;
        let record = match store.endpoint(tenant, id).await? {
            Some(record) if channel.holds(&record) => record,
            _ => return Err(not_found()),
        };
        let audit = Audit::admin_entry(tenant, by, C::DISCONNECTED, json!({ "id": id }));
        if !store.delete_endpoint(tenant, id, &audit).await? {
            return Err(not_found());
        }
        self.audited().await;
        channel.disconnected(&record).await;
        Ok(())
    }

    /// Appends the admin changes' records the store keeps (see [`Audit::drain`]). The
    /// change is made already: a record that cannot be appended now is appended by a
    /// later drain.
    async fn audited(&self) {
        if let Err(e) = self.inner.audit.drain(&*self.inner.store).await {
            warn!("an admin change's audit record waits to be appended: {e}");
        }
    }

    pub async fn list_deliveries(
        &self,
        tenant: &str,
        request: &ListDeliveriesRequest,
    ) -> Result<Vec<Delivery>, Error> {
        let status = match request.status() {
            DeliveryStatus::Unspecified => None,
            DeliveryStatus::Pending => Some(Status::Pending),
            DeliveryStatus::Delivered => Some(Status::Delivered),
            DeliveryStatus::Failed => Some(Status::Failed),
        };
        let limit = match request.limit as usize {
            0 => DEFAULT_LISTED,
            n => n.min(MAX_LISTED),
        };
        let endpoint = Some(request.endpoint_id.as_str()).filter(|e| !e.is_empty());
        Ok(self
            .inner
            .store
            .deliveries(tenant, endpoint, status, limit)
            .await?
            .iter()
            .map(delivery_of)
            .collect())
    }

    /// Sends a delivery again, with the same `webhook-id` and a fresh retry period.
    pub async fn redeliver(
        &self,
        tenant: &str,
        id: &str,
        by: &Resolver,
    ) -> Result<Delivery, Error> {
        let now = now_ms();
        let audit = Audit::admin_entry(tenant, by, "delivery.redelivered", json!({ "id": id }));
        let until = now + millis(self.inner.config.retry_for);
        let record = self
            .inner
            .store
            .redeliver(tenant, id, now, until, &audit)
            .await?;
        self.inner.wake.notify_one();
        self.audited().await;
        Ok(delivery_of(&record))
    }
}

fn delivery_of(record: &DeliveryRecord) -> Delivery {
    let status = match record.status {
        Status::Pending => DeliveryStatus::Pending,
        Status::Delivered => DeliveryStatus::Delivered,
        Status::Failed => DeliveryStatus::Failed,
    };
    Delivery {
        id: record.id.clone(),
        endpoint_id: record.endpoint_id.clone(),
        event_type: record.event_type.as_str().to_owned(),
        rpc_id: record.rpc_id.clone(),
        status: status.into(),
        attempts: record.attempts,
        last_error: record.last_error.clone(),
        next_attempt_at: (record.status == Status::Pending)
            .then(|| timestamp(record.next_attempt_ms)),
        session_id: record.session_id.clone(),
        created_at: Some(timestamp(record.created_ms)),
        last_attempt_at: (record.last_attempt_ms > 0).then(|| timestamp(record.last_attempt_ms)),
    }
}
