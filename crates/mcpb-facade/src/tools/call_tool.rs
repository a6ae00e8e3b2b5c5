//! `broker.call_tool`: calls a visible tool; the result is projected and held to the profile's
//! budget before the model sees it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::FacadeTool;
use crate::projection::Projection;

/// The most a profile may declare as `anthropic/maxResultSizeChars`.
pub const MAX_RESULT_SIZE_CHARS: u64 = 500_000;

#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = super::require_name)]
pub struct Args {
    #[serde(default)]
    pub name: String,
    // Kept as the client wrote it: it travels to the upstream byte for byte.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub arguments: Option<Box<RawValue>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub projection: Option<Projection>,
}

pub fn description(sep: &str) -> String {
    format!(
        "Call a tool by name with arguments matching its input schema. projection trims the result before you see it. A result over the budget comes back as a preview plus an artifact id for {}.",
        FacadeTool::GetArtifact.name(sep)
    )
}
