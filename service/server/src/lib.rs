//! The askgate server: the use cases, the ingresses and the composition of a node
//! (docs/architecture.md, "Layers"). Top to bottom, each module imports only the ones
//! below it:
//! - [`server`]: assembles the node and runs it until shutdown;
//! - the ingresses, side by side: [`api`] (tonic handlers, thin), [`mcp`] (askgate as
//!   an MCP server), [`a2a`] (askgate as an A2A agent), and the channels' inbound
//!   endpoints and admin services (in `askgate-channels`, taken from its registry),
//!   served through [`ingress`] and [`dispatch`] (the node's gRPC services behind one
//!   match on the request's path); [`web`] is CORS and the console's files; [`origin`]
//!   the Host/Origin policy in front of every HTTP entry; [`listener`] accepts
//!   connections, bounded;
//! - the use cases: [`questions`] (ask, answer, cancel, subscribe) and [`approvals`]
//!   (audit, receipts, secrets);
//! - [`auth`]: credentials to a tenant-scoped principal, what each role may do, and the
//!   [`auth::Gate`] every ingress passes; [`metrics`]: Prometheus metrics;
//!
//! Below them, in crates of their own: `askgate-channels` (every human channel, the
//! delivery machinery they share, re-exported here as [`channels`]),
//! `askgate-engines` (the storage engines) and `askgate-core` (the rules, the error and
//! the storage traits, and protobuf JSON, re-exported here as [`domain`], [`backend`]
//! and [`protojson`]).

pub mod a2a;
pub mod api;
pub mod approvals;
pub mod auth;
pub mod dispatch;
pub mod ingress;
pub mod listener;
pub mod mcp;
pub mod metrics;
pub mod origin;
pub mod policy;
pub mod questions;
pub mod server;
pub mod telemetry;
pub mod web;

pub use askgate_channels::{self as channels, egress};
pub use askgate_core::{backend, domain, protojson};
pub use server::{ServerConfig, run};
