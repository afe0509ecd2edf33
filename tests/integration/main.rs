//! askgate integration tests: real servers on ephemeral ports, real gRPC clients and
//! real `askgate` processes. One test binary (one link) with a module per area.

#[macro_use]
mod support;
#[macro_use]
mod conformance;

mod abort;
mod agents;
mod answers;
mod approvals;
mod approvers;
mod audit;
mod chaos;
mod cli;
mod docs;
mod durability;
mod email;
mod errors;
mod fanout;
mod first_hour;
mod first_wins;
mod grpc_web;
mod hardening;
mod hook;
mod intent;
mod jwks;
mod lagging;
mod nodes;
mod ntfy;
mod policy;
mod proof;
mod quotas;
mod reattach;
mod replay;
mod resume;
mod rolling;
mod scenarios;
mod secrets;
mod security;
mod service;
mod shutdown;
mod slack;
mod telegram;
mod tls;
mod tool;
mod traces;
mod tui;
mod unattended;
mod webhooks;
