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

/// An action's `--arguments`: a JSON object, or `@FILE` (`@-` for stdin) holding one;
/// none: the empty object. Checked here, not by the server's BAD_REQUEST after the
/// connect.
pub fn arguments(flag: Option<&str>) -> Result<String, String> {
    let Some(arguments) = flag else {
        return Ok("{}".to_owned());
    };
    let text = match arguments.strip_prefix('@') {
        Some(path) => read_input(path).map_err(|e| format!("--arguments {arguments}: {e:#}"))?,
        None => arguments.to_owned(),
    };
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("--arguments is not JSON: {e}"))?;
    if !value.is_object() {
        return Err("--arguments must be a JSON object".into());
    }
    Ok(text)
}

/// Reads a whole file, or standard input for `-`.
pub fn read_input(path: &str) -> anyhow::Result<String> {
    if path == "-" {
        std::io::read_to_string(std::io::stdin()).context("failed to read standard input")
    } else {
        std::fs::read_to_string(path).with_context(|| format!("failed to read {path}"))
    }
}
