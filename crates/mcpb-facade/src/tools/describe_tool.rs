//! `broker.describe_tool`: the full definitions of tools, by the names search returned.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Names described in one call; more are ignored.
pub const MAX_NAMES: usize = 20;

#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct Args {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_NAMES))]
    pub names: Vec<String>,
}

impl Args {
    /// Every name asked for, `names` first, at most MAX_NAMES.
    pub fn into_names(self) -> Vec<String> {
        let mut names = self.names;
        names.extend(self.name);
        names.truncate(MAX_NAMES);
        names
    }
}

pub fn description(_sep: &str) -> String {
    "Full definition (input schema, annotations) of one or more tools, by the names search returned.".to_string()
}
