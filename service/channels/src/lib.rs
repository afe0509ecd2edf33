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

pub mod api;
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

use std::{path::PathBuf, sync::Arc, time::Duration};

use self::{
    api::{AdminGate, Administered, Mount},
    channel::{About, Channel},
    delivery::Hooks,
    email::Email,
    links::Signer,
    ntfy::Ntfy,
    resolve::Questions,
    sealed::SealingKey,
    slack::Slack,
    telegram::Telegram,
    webhook::Webhook,
};
use crate::backend::hooks::records::EndpointRecord;

/// The registry: one line per channel, `folder: Type`, the channel's folder (its
/// `ABOUT`) and its type (its [`Channel`], [`Registered`] and admin service). Everything
/// a node does for each channel is taken from here: [`REGISTRY`], [`Channels`] and its
/// [`Channels::all`], [`Channels::build`], [`Channels::mount`], [`Channels::ingresses`].
macro_rules! registry {
    ($($folder:ident: $ty:ident),+ $(,)?) => {
        /// What every channel is, in the order of [`Channels::all`]: the registry as
        /// the server needs it before (or without) a node's channels, to keep clients
        /// from taking a channel's name and chats from collecting secret answers.
        pub const REGISTRY: [&About; [$(stringify!($folder)),+].len()] = [$(&$folder::ABOUT),+];

        /// Every channel a node sends through, and what signs the links of mail and
        /// pushes.
        pub struct Channels {
            $(pub $folder: $ty,)+
            pub links: Signer,
        }

        impl Channels {
            /// Every channel.
            pub fn all(&self) -> [&dyn Channel; REGISTRY.len()] {
                [$(&self.$folder),+]
            }

            /// A node's channels, built from its settings.
            pub fn build(setup: &Setup<'_>) -> anyhow::Result<Self> {
                Ok(Self {
                    $($folder: <$ty as Registered>::build(setup)?,)+
                    links: setup.links(),
                })
            }

            /// Mounts every channel's admin service on `on`.
            pub fn mount<M: Mount>(
                on: M,
                hooks: &Hooks,
                gate: &Arc<dyn AdminGate>,
                limit: usize,
            ) -> M {
                $(let on = <$ty as Administered>::mount(on, hooks, gate, limit);)+
                on
            }

            /// Every inbound endpoint of the channels people answer through.
            pub fn ingresses(
                &self,
                hooks: &Hooks,
                questions: &Questions,
            ) -> Vec<Arc<dyn ingress::Ingress>> {
                let mut ingresses: Vec<Arc<dyn ingress::Ingress>> = Vec::new();
                $(ingresses.extend(Registered::inbound(&self.$folder, hooks, questions));)+
                ingresses
            }
        }
    };
}

registry! {
    webhook: Webhook,
    slack: Slack,
    telegram: Telegram,
    email: Email,
    ntfy: Ntfy,
}

/// Whether `name` is a channel people answer through (a chat, a mailbox, a phone).
pub fn is_chat(name: &str) -> bool {
    REGISTRY
        .iter()
        .any(|about| about.answered_through && about.name == name)
}

/// Whether answers through `name` tell which person gave them ([`About::knows_who`]):
/// every channel but those of the registry that do not (the console, terminals and
/// SDKs answer with a credential, which names its subject).
pub fn knows_who(name: &str) -> bool {
    REGISTRY
        .iter()
        .find(|about| about.name == name)
        .is_none_or(|about| about.knows_who)
}

/// Every channel's name.
pub fn names() -> impl Iterator<Item = &'static str> {
    REGISTRY.iter().map(|about| about.name)
}

impl Channels {
    /// The channel `record` is a connection of.
    pub fn of(&self, record: &EndpointRecord) -> Option<&dyn Channel> {
        self.all().into_iter().find(|channel| channel.holds(record))
    }
}

/// Where the channels send: Slack's and Telegram's APIs, and the SMTP server of email
/// routes (a channel's own settings, each with its flag of `askgate serve`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelConfig {
    /// Slack's Web API (`--slack-api-url`).
    pub slack_api_url: String,
    /// Where the Telegram Bot API is (`--telegram-api-url`).
    pub telegram_api_url: String,
    /// The SMTP server email routes mail through (`--smtp-url`), its password
    /// (`--smtp-password-file`) and the sender (`--email-from`).
    pub smtp_url: Option<String>,
    pub smtp_password_file: Option<PathBuf>,
    pub email_from: Option<String>,
}

impl Default for ChannelConfig {
    fn default() -> Self {
        Self {
            slack_api_url: slack::api::DEFAULT_API_URL.to_owned(),
            telegram_api_url: telegram::api::DEFAULT_API_URL.to_owned(),
            smtp_url: None,
            smtp_password_file: None,
            email_from: None,
        }
    }
}

/// What a node's channels are built from.
pub struct Setup<'a> {
    pub config: &'a ChannelConfig,
    /// How long one call to an outside service may take (`--webhook-timeout`).
    pub timeout: Duration,
    /// The key that seals tenants' secrets (a channel's tokens), if the node has one.
    pub key: Option<Arc<SealingKey>>,
    /// The node's public origin (`--public-url`), for links back to it.
    pub public: Option<&'a str>,
}

impl Setup<'_> {
    /// What signs the links of mail and pushes.
    pub fn links(&self) -> Signer {
        Signer::new(self.key.clone(), self.public)
    }
}

/// What the registry needs of a channel besides its [`Channel`] and its admin service.
pub trait Registered: Sized {
    /// The channel, built from a node's settings; an error names the setting.
    fn build(setup: &Setup<'_>) -> anyhow::Result<Self>;

    /// Its inbound endpoint on the node's port, if people answer through it there.
    fn inbound(&self, _hooks: &Hooks, _questions: &Questions) -> Option<Arc<dyn ingress::Ingress>> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_names_are_the_registrys() {
        let config = ChannelConfig::default();
        let setup = Setup {
            config: &config,
            timeout: Duration::from_secs(1),
            key: Some(Arc::new(SealingKey::ephemeral().expect("a key"))),
            public: Some("https://askgate.example"),
        };
        let channels = Channels::build(&setup).expect("the default channels");
        let registry: Vec<&About> = channels.all().iter().map(|c| c.about()).collect();
        assert_eq!(registry, REGISTRY);
        assert!(is_chat("slack") && is_chat("ntfy"));
        assert!(!is_chat("webhook") && !is_chat("console") && !is_chat("tui"));
        assert!(knows_who("slack") && knows_who("telegram") && knows_who("email"));
        assert!(knows_who("console") && knows_who("grpc") && knows_who("tui"));
        assert!(!knows_who("ntfy") && !knows_who("webhook"));
    }
}
