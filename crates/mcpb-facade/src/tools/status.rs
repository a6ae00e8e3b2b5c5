//! `broker.status`: each upstream's state, last error and credential needs; starts nothing.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct Args {}

pub fn description(_sep: &str) -> String {
    "State of each server (running, stopped, failed), last error and whether it needs credentials. Starts nothing.".to_string()
}
