//! One type for every channel. A channel (plain webhooks, Slack, Telegram, email,
//! ntfy) is what the delivery machinery sends an ask and its outcome through
//! ([`Channel`]), and what the admin API connects, lists and disconnects
//! ([`Connector`]); everything around that (queueing, leases, retries, audit records,
//! the admin calls' checks) is written once, in [`crate::delivery`], for all of them.
//! The registry of them, [`crate::Channels`], is at the crate's root: built in one
//! place, the list every "for each channel" is taken from. [`chat`] and [`clock`] are
//! what the chat channels build on alike.

pub mod chat;
pub mod clock;

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use crate::{
    backend::hooks::{
        HookStore,
        records::{DeliveryRecord, EndpointRecord},
    },
    domain::{Error, Limits},
    egress::send::{Sender, Target},
};

/// What a channel is, as a constant of its module: what the registry lists
/// ([`crate::REGISTRY`]) before, or without, a node's channels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct About {
    /// The channel's name: the channel answers through it carry (`slack`), what
    /// `allowed_channels` and the metrics name it by.
    pub name: &'static str,
    /// What one connection of it is called, in messages (`Slack app`).
    pub noun: &'static str,
    /// Whether people answer through it. Such a channel shows an ask to whoever reads
    /// the chat, mailbox or phone, so it never collects a secret answer (it links to
    /// the console instead), and no client may take its name.
    pub answered_through: bool,
    /// Whether it tells which person answered (a Slack user, a Telegram user, a mail
    /// recipient), so that an ask with approvers may be answered through it. An ntfy
    /// topic does not: whoever holds it presses its buttons.
    pub knows_who: bool,
}

/// What the delivery machinery needs of a channel.
#[async_trait]
pub trait Channel: Send + Sync {
    /// What the channel is (its module's `ABOUT`).
    fn about(&self) -> &'static About;

    /// [`About::name`].
    fn name(&self) -> &'static str {
        self.about().name
    }

    /// [`About::noun`].
    fn noun(&self) -> &'static str {
        self.about().noun
    }

    /// [`About::answered_through`].
    fn answered_through(&self) -> bool {
        self.about().answered_through
    }

    /// Whether `record` is one of its connections.
    fn holds(&self, record: &EndpointRecord) -> bool;

    /// One attempt of `delivery` through `connection`, one of its own: `Ok` once
    /// delivered; an error is recorded and the delivery retried until its retry
    /// period ends. An attempt may run twice (a node died after sending, before it
    /// recorded the outcome): each channel says in its docs what that can double.
    async fn deliver(
        &self,
        out: &Outbound<'_>,
        connection: &EndpointRecord,
        delivery: &DeliveryRecord,
    ) -> Result<(), String>;

    /// What it does once `connection` is disconnected (Telegram stops sending its
    /// updates here); nothing by default.
    async fn disconnected(&self, _connection: &EndpointRecord) {}
}

/// What an attempt may use besides its channel: the store (where a channel notes what
/// it sent, so that a retry does not send it again) and the guarded HTTP sender.
pub struct Outbound<'a> {
    pub store: &'a dyn HookStore,
    pub sender: &'a Sender,
}

/// The admin side of a channel: the request that connects one, and a connection as the
/// admin API shows it. Connecting, listing and disconnecting are written once for
/// every connector (in `admin.rs`).
#[async_trait]
pub trait Connector: Channel {
    /// `ConnectSlackRequest`, ...
    type Request: Send + 'static;
    /// `SlackApp`, ...
    type Connection: Send;

    /// The audit record's kinds of a connection made and removed
    /// (`slack.connected`, `slack.disconnected`).
    const CONNECTED: &'static str;
    const DISCONNECTED: &'static str;

    /// Checks `request` (with the service itself where it can: a token, an address)
    /// and makes the connection's record, its secrets sealed.
    async fn connect(
        &self,
        tenant: &str,
        request: Self::Request,
        checks: &Checks<'_>,
    ) -> Result<EndpointRecord, Error>;

    /// `record` as the admin API shows it, if it is one of this channel's; `fresh`:
    /// just connected (a webhook's signing secret is shown then, and only then).
    fn shown(&self, record: &EndpointRecord, fresh: bool) -> Option<Self::Connection>;

    /// What the audit record of a new connection keeps of it (never a secret).
    fn details(&self, connection: &Self::Connection) -> Value;
}

/// What a connect request is checked against: the server's limits, and whether a
/// server the tenant names can be reached.
pub struct Checks<'a> {
    pub limits: &'a Limits,
    pub(super) sender: &'a Sender,
    pub(super) timeout: Duration,
}

impl Checks<'_> {
    /// A server a tenant names (a webhook's, an ntfy server's) must resolve, and only
    /// to public addresses unless the server allows private ones (as for every
    /// delivery): refused at connect, naming `field`, rather than at every delivery.
    pub async fn reachable(&self, field: &str, target: &Target) -> Result<(), Error> {
        let resolved = tokio::time::timeout(self.timeout, self.sender.resolve(target))
            .await
            .unwrap_or_else(|_| Err(format!("resolving {} timed out", target.host)));
        resolved
            .map(|_| ())
            .map_err(|e| Error::bad_request(field, e))
    }
}
