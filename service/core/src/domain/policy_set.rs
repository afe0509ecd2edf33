//! A tenant's policy set as the hook stores keep it (`service Policies`,
//! docs/policy.md): the Cedar text and schema as the admin put them, the mode, and a
//! version every node compares to know its compiled copy is current. Compiling and
//! deciding are the server's (`askgate_server::policy`).

use serde::{Deserialize, Serialize};

use super::Error;

/// How a tenant's policies act on its asks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Decisions apply: a forbid denies, an allowing permit allows, an asking one fills.
    #[default]
    Enforce,
    /// Decisions are recorded only (audit, metric, the ask's `policy`): every ask is asked.
    Shadow,
}

impl Mode {
    /// The wire name: `enforce` or `shadow`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Enforce => "enforce",
            Self::Shadow => "shadow",
        }
    }

    /// The mode `text` names (empty: enforce); BAD_REQUEST on `field` otherwise.
    pub fn parse(field: &str, text: &str) -> Result<Self, Error> {
        match text {
            "" | "enforce" => Ok(Self::Enforce),
            "shadow" => Ok(Self::Shadow),
            _ => Err(Error::bad_request(field, "is \"enforce\" or \"shadow\"")),
        }
    }
}

/// A tenant's policy set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicySetRecord {
    pub tenant: String,
    /// The policies, in Cedar's syntax (empty: none).
    pub text: String,
    /// The tenant's Cedar schema (empty: none; the policies are then only parsed).
    #[serde(default)]
    pub schema: String,
    #[serde(default)]
    pub mode: Mode,
    /// Counts the tenant's puts from 1 (the store sets it); 0: never put.
    #[serde(default)]
    pub version: u64,
    pub updated_ms: u64,
    /// Each policy's id, in the set's order (as compiled when it was put).
    #[serde(default)]
    pub policy_ids: Vec<String>,
}
