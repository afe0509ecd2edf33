//! JSON input and output of the client subcommands.

use std::process::ExitCode;

use anyhow::Context as _;

pub use askgate_server::protojson::{from_json, to_json};

use super::common::fail_local;

/// Prints `message` (the protobuf message `name`) as one line of proto3 JSON.
pub fn print<T: prost::Message>(name: &str, message: &T) -> ExitCode {
    match to_json(name, message) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => fail_local(format!("{e:#}"), 1),
    }
}

/// Reads a whole file, or standard input for `-`.
pub fn read_input(path: &str) -> anyhow::Result<String> {
    if path == "-" {
        std::io::read_to_string(std::io::stdin()).context("failed to read standard input")
    } else {
        std::fs::read_to_string(path).with_context(|| format!("failed to read {path}"))
    }
}
