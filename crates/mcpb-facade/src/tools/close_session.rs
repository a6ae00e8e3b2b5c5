//! `broker.close_session`: stops the caller's own per-session upstream processes.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct Args {}

pub fn description(_sep: &str) -> String {
    "Stop the server processes started for this session only. Shared servers keep running."
        .to_string()
}
