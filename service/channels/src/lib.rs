//! askgate's human channels: every way an ask reaches a person and an answer comes
//! back besides the gRPC API and MCP (docs/architecture.md, "Adding a channel").
//!
//! A channel is one folder: [`webhook`], [`slack`], [`telegram`], [`email`], [`ntfy`].
//! Each implements [`channel::Channel`] (one delivery attempt of an ask or its
//! outcome) and [`channel::Connector`] (its admin side: the request that connects one,
//! the connection as the admin API shows it); a channel that people answer through
//! has its inbound endpoint in its folder too, an [`ingress::Ingress`] the server
//! mounts on its port, answering through [`resolve::Resolutions`] (the questions use
//! case, which the server implements). [`Channels`], below, is the registry: every
//! channel, built in one place, the list every "for each channel" is taken from.
//!
//! What every channel shares is written once: [`delivery`] (the intake of committed
//! events, durable delivery with leases and retries, reminders, the admin calls),
//! [`links`] (signed single-use links, for mail and pushes), [`egress`] (the guarded
//! HTTP sender), [`sealed`] and [`secret`] (tenants' secrets, sealed with the server's
//! key), and [`observe`] (what the machinery reports to the node's metrics and traces).

pub mod channel;
pub mod delivery;
pub mod egress;
pub mod email;
pub mod ingress;
pub mod links;
pub mod ntfy;
pub mod observe;
pub mod resolve;
pub mod sealed;
pub mod secret;
pub mod slack;
pub mod telegram;
pub mod webhook;

pub(crate) use askgate_core::{backend, domain, protojson};

use self::{
    channel::{About, Channel},
    email::Email,
    links::Signer,
    ntfy::Ntfy,
    slack::Slack,
    telegram::Telegram,
    webhook::Webhook,
};
use crate::backend::hooks::records::EndpointRecord;

/// What every channel is, in the order of [`Channels::all`]: the registry as the server
/// needs it before (or without) a node's channels, to keep clients from taking a
/// channel's name and chats from collecting secret answers. A test holds it to the
/// channels themselves.
pub const REGISTRY: [&About; 5] = [
    &webhook::ABOUT,
    &slack::ABOUT,
    &telegram::ABOUT,
    &email::ABOUT,
    &ntfy::ABOUT,
];

/// Whether `name` is a channel people answer through (a chat, a mailbox, a phone).
pub fn is_chat(name: &str) -> bool {
    REGISTRY
        .iter()
        .any(|about| about.answered_through && about.name == name)
}

/// Every channel's name.
pub fn names() -> impl Iterator<Item = &'static str> {
    REGISTRY.iter().map(|about| about.name)
}

/// Every channel a node sends through, and what signs the links of mail and pushes:
/// the registry, built in one place (the server's `ServerConfig::channels`).
pub struct Channels {
    pub webhook: Webhook,
    pub slack: Slack,
    pub telegram: Telegram,
    pub email: Email,
    pub ntfy: Ntfy,
    pub links: Signer,
}

impl Channels {
    /// Every channel.
    pub fn all(&self) -> [&dyn Channel; 5] {
        [
            &self.webhook,
            &self.slack,
            &self.telegram,
            &self.email,
            &self.ntfy,
        ]
    }

    /// The channel `record` is a connection of.
    pub fn of(&self, record: &EndpointRecord) -> Option<&dyn Channel> {
        self.all().into_iter().find(|channel| channel.holds(record))
    }
}

#[cfg(test)]
mod tests {
    use std::{sync::Arc, time::Duration};

    use super::*;
    use crate::sealed::SealingKey;

    #[test]
    fn the_names_are_the_registrys() {
        let key = Some(Arc::new(SealingKey::ephemeral().expect("a key")));
        let links = || Signer::new(key.clone(), Some("https://askgate.example"));
        let timeout = Duration::from_secs(1);
        let channels = Channels {
            webhook: Webhook,
            slack: Slack::new("https://slack.example/api", timeout, key.clone()).expect("slack"),
            telegram: Telegram::new("https://telegram.example", timeout, None, key.clone())
                .expect("telegram"),
            email: Email::new(None, links()).expect("email"),
            ntfy: Ntfy::new(links(), key.clone()),
            links: links(),
        };
        let registry: Vec<&About> = channels.all().iter().map(|c| c.about()).collect();
        assert_eq!(registry, REGISTRY);
        assert!(is_chat("slack") && is_chat("ntfy"));
        assert!(!is_chat("webhook") && !is_chat("console") && !is_chat("tui"));
    }
}
