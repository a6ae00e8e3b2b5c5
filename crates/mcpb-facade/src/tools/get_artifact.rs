//! `broker.get_artifact`: a page of a stored large result.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Page length when neither the call nor the profile's budget gives one.
pub const DEFAULT_PAGE_CHARS: usize = 20_000;

#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = super::require_id)]
pub struct Args {
    #[serde(default)]
    pub id: String,
    /// In characters, default 0
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<usize>,
    /// In characters
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub length: Option<usize>,
}

pub fn description(_sep: &str) -> String {
    "Read a stored large result by artifact id, a page at a time.".to_string()
}
