//! What the askgate server and every SDK must compute alike, written once: the
//! `ask_user_question` tool (its definition, the parser of a model's arguments, its
//! result text), RFC 8785 canonical JSON, the answers JSON, the action and answers
//! digests, and the claims of receipts and signed audit heads with their checks.
//!
//! It depends on nothing of askgate's but the wire types (`askgate-proto`): the server
//! and the Rust SDK both build on it, and the Python and TypeScript SDKs are pinned to
//! it by `tests/contract/vectors.json`, which this crate's tests check too.

use std::time::Duration;

pub mod answers;
pub mod canonical;
pub mod digest;
pub mod ijson;
pub mod receipt;
pub mod tool;

/// How long an ask stays answerable after its caller's call went away (the agent, or
/// `askgate mcp`, exited or lost its connection), for a reattach under the same
/// request id: the SDKs' default, and the MCP server's.
pub const DEFAULT_REATTACH_GRACE: Duration = Duration::from_secs(10);
