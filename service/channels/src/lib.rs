//! askgate's human channels: every way an ask reaches a person and an answer comes
//! back besides the gRPC API and MCP (docs/architecture.md, "Adding a channel").
//! - [`webhooks`]: the [`webhooks::channel::Channel`] trait every channel implements,
//!   the registry of them ([`webhooks::Channels`]), and the machinery they share
//!   (intake, durable delivery with leases and retries, reminders, the admin calls);
//!   the outbound side of each channel (plain webhooks, Slack, Telegram, email, ntfy);
//! - the inbound endpoints, each an [`ingress::Ingress`] the server mounts on its port:
//!   [`slack`] (interactivity), [`telegram`] (updates), [`links`] (the pages of mailed
//!   links), answering through [`resolve::Resolutions`], which the questions use case
//!   implements;
//! - [`observe`]: what the machinery reports to the node's metrics and traces;
//! - [`egress`]: the guarded HTTP sender every outbound channel uses, and IANA's
//!   special-purpose address registries behind its guard;
//! - [`sealed`] and [`secret`]: the tenants' secrets a channel keeps (bot tokens,
//!   signing secrets), sealed with the server's key, and secret values that never show.

pub mod egress;
pub mod ingress;
pub mod links;
pub mod observe;
pub mod resolve;
pub mod sealed;
pub mod secret;
pub mod slack;
pub mod telegram;
pub mod webhooks;

pub(crate) use askgate_core::{backend, domain, protojson};
