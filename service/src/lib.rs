//! askgate: a gRPC service through which AI agents ask humans structured questions and
//! wait for the answer. See docs/protocol.md for the contract, docs/architecture.md for
//! how it is built, and README.md for the tour.
//!
//! Layout, top to bottom (each module imports only the ones below it; docs/architecture.md
//! draws the layers):
//! - [`cli`]: the `askgate` command line: `serve` and the client subcommands;
//! - [`server`]: assembles the node and runs it until shutdown;
//! - the ingresses, side by side: [`api`] (tonic handlers, thin), [`mcp`] (askgate as
//!   an MCP server), [`slack`] (Slack's interactivity endpoint); [`dispatch`] puts the
//!   node's gRPC services behind one match on the request's path; [`web`] is CORS and
//!   the console's files; [`origin`] the Host/Origin policy in front of every HTTP
//!   entry; [`listener`] accepts connections, bounded;
//! - the use cases: [`questions`] (ask, answer, cancel, subscribe) and [`webhooks`]
//!   (signed webhooks, reminders and Slack posts, delivered durably);
//! - [`auth`]: credentials to a tenant-scoped principal, what each role may do, and the
//!   [`auth::Gate`] every ingress passes; [`metrics`]: Prometheus metrics;
//! - [`backend`]: the `Backend` and `HookStore` traits and their engines, memory and
//!   Redis;
//! - [`domain`]: pure rules: validation, answer normalisation, the error type and its
//!   wire form ([`domain::status`]);
//! - [`protojson`]: protobuf JSON (the CLI's files, webhook payloads);

pub mod api;
pub mod auth;
pub mod cli;
pub mod dispatch;
pub mod listener;
pub mod mcp;
pub mod metrics;
pub mod origin;
pub mod protojson;
pub mod questions;
pub mod server;
pub mod slack;
pub mod web;
pub mod webhooks;

pub use askgate_core::{backend, domain};
pub use server::{ServerConfig, run};
