//! JSON input and output of the client subcommands.

use anyhow::Context as _;

pub use askgate_server::protojson::{from_json, to_json};

/// Reads a whole file, or standard input for `-`.
pub fn read_input(path: &str) -> anyhow::Result<String> {
    if path == "-" {
        std::io::read_to_string(std::io::stdin()).context("failed to read standard input")
    } else {
        std::fs::read_to_string(path).with_context(|| format!("failed to read {path}"))
    }
}
