//! askgate: a gRPC service through which AI agents ask humans structured questions and
//! wait for the answer. See docs/protocol.md for the contract, docs/architecture.md for
//! how it is built, and README.md for the tour.
//!
//! Layout (imports point downward only):
//! - [`cli`]: the `askgate` command line: `serve` and the client subcommands;
//! - [`server`]: assembles the gRPC server and runs it until shutdown;
//! - [`api`]: tonic handlers, thin; [`api::status`] maps errors to `tonic::Status`;
//! - [`auth`]: credentials to a tenant-scoped principal, and what each role may do;
//! - [`questions`]: the use cases (ask, answer, cancel, subscribe) over a backend;
//! - [`domain`]: pure rules: validation, answer normalisation, the error type;
//! - [`backend`]: the `Backend` trait and its in-memory implementation;
//! - [`mcp`]: askgate as an MCP server (the `ask_user_question` tool);
//! - [`metrics`]: Prometheus metrics and their listener;
//! - [`testing`]: a real redis-server for tests and benchmarks.

pub mod api;
pub mod auth;
pub mod backend;
pub mod cli;
pub mod domain;
pub mod mcp;
pub mod metrics;
pub mod questions;
pub mod server;
pub mod testing;
pub mod web;

pub use server::{ServerConfig, run};
