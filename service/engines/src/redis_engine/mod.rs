//! The Redis engine: askgate's state shared between nodes in Redis (one server, a
//! primary watched by Sentinels, or a Redis Cluster). docs/architecture.md describes the path of an ask, the keys, the
//! scripts and the leases.
//!
//! - `connection`: where Redis is and the connection every kind (server, Sentinels,
//!   cluster) shares; `sentinel`: the one that follows the Sentinels' failovers;
//! - `keys`: every key name;
//! - `store`: the storage layer, the one module that sends Redis commands (its scripts
//!   are the `.lua` files of `scripts/`);
//! - `fanout`: carries the events the scripts publish to the nodes that care;
//! - `engine`: the `Backend` on both, with what a node keeps for itself.

mod cluster;
mod connection;
mod engine;
mod fanout;
mod keys;
mod sentinel;
mod store;

pub use connection::{RedisTarget, redacted_url};
pub use engine::{RedisBackend, RedisConfig};
pub use store::{RedisAuditStore, RedisHookStore, WaitPolicy};
