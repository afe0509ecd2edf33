//! askgate's storage engines, over the core's storage traits
//! ([`Backend`](askgate_core::backend::Backend) for asks,
//! [`HookStore`](askgate_core::backend::hooks::HookStore) for webhooks and Slack apps):
//! - [`memory`]: everything in this process, sharded by session; nothing kept across restarts;
//! - [`sqlite`]: the memory engine's structures written through to an embedded SQLite
//!   store, so one node keeps what it acknowledged across a crash; the default;
//! - [`redis_engine`]: state in Redis (one server or a Cluster) shared by every node,
//!   so any node serves any call and a node's death loses nothing it acknowledged.
//!
//! All three pass the core's conformance suites, stamped into their tests.

pub mod memory;
pub mod redis_engine;
pub mod sqlite;
