//! `broker.list_servers`: the profile's upstreams with their state; starts nothing.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::FacadeTool;

#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct Args {}

pub fn description(sep: &str) -> String {
    format!(
        "List the MCP servers behind this broker: name, description, tags, tool count, state. Then {} to find tools.",
        FacadeTool::SearchTools.name(sep)
    )
}
