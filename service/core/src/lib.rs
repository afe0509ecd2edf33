//! askgate's core: what every other layer builds on and which builds on nothing of
//! askgate's but the wire types (docs/architecture.md, "Layers").
//! - [`domain`]: the pure rules: validation, answer normalisation, the model of an ask,
//!   the error every layer returns and its wire form ([`domain::status`]);
//! - [`backend`]: the storage traits, [`backend::Backend`] (asks, sessions, agents) and
//!   [`backend::hooks::HookStore`] (webhook endpoints, Slack apps, deliveries, timers),
//!   the events and settings both engines share, and, with the `conformance` feature,
//!   the suites every engine passes;
//! - [`protojson`]: protobuf's JSON through the compiled descriptors (the CLI's files,
//!   webhook payloads).

pub mod backend;
pub mod clock;
pub mod domain;
pub mod protojson;

/// The `tracing` target of the spans askgate exports as traces (and of nothing else):
/// the server's and, at debug level, the engines' calls to their stores.
pub const TRACE_TARGET: &str = "askgate::trace";
