//! The storage engines: [`memory`] (this process) and [`redis`] (shared by every node).
//! Each implements the core's storage traits, re-exported here: the ask store
//! ([`Backend`]) and the hook store ([`hooks::HookStore`]).

pub mod memory;
pub mod redis;

pub use askgate_core::backend::*;
