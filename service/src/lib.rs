//! askgate: a gRPC service through which AI agents ask humans structured questions and
//! wait for the answer. See docs/protocol.md for the contract, docs/architecture.md for
//! how it is built, and README.md for the tour.
//!
//! Layout (the core layers import downward only; webhooks, Slack and MCP still import
//! across, see docs/architecture.md):
//! - [`cli`]: the `askgate` command line: `serve` and the client subcommands;
//! - [`server`]: assembles the gRPC server and runs it until shutdown;
//! - [`api`]: tonic handlers, thin; [`domain::status`] maps errors to `tonic::Status`;
//! - [`auth`]: credentials to a tenant-scoped principal, and what each role may do;
//! - [`questions`]: the use cases (ask, answer, cancel, subscribe) over a backend;
//! - [`domain`]: pure rules: validation, answer normalisation, the error type;
//! - [`backend`]: the `Backend` trait and its two engines, memory and Redis;
//! - [`listener`]: accepting connections, bounded (count, idleness, descriptors);
//! - [`mcp`]: askgate as an MCP server (the `ask_user_question` tool);
//! - [`webhooks`]: signed webhooks with durable delivery, and reminders;
//! - [`slack`]: questions posted to Slack, and its interactivity endpoint;
//! - [`dispatch`]: the node's gRPC services behind one match on the request's path;
//! - [`web`]: CORS for web apps and the browser console's files;
//! - [`protojson`]: protobuf JSON (the CLI's files, webhook payloads);
//! - [`metrics`]: Prometheus metrics and their listener;
//! - [`origin`]: the Host/Origin policy in front of every HTTP entry;
//! - `testing`: real redis-server and `askgate serve` processes, for `askgate bench`
//!   and the tests; public only with the `testing` feature (the integration tests
//!   turn it on), so it is not part of the library's default surface.

pub mod api;
pub mod auth;
pub mod backend;
pub mod cli;
pub mod dispatch;
pub mod domain;
pub mod listener;
pub mod mcp;
pub mod metrics;
pub mod origin;
pub mod protojson;
pub mod questions;
pub mod server;
pub mod slack;
#[cfg(feature = "testing")]
pub mod testing;
#[cfg(not(feature = "testing"))]
#[allow(dead_code, unreachable_pub)]
pub(crate) mod testing;
pub mod web;
pub mod webhooks;

pub use server::{ServerConfig, run};
