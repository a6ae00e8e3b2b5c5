//! The code-execution tools: `run_code` (one shot) and the long form `exec_open`,
//! `exec_upload`, `exec_run`, `exec_close`. Only profiles with `exec` configured list them.

use mcpb_config::{ExecLimits, Language};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What every run states besides its program.
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct RunOptions {
    /// python (default) or javascript
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<Language>,
    /// Tool name globs the program may call, e.g. ["github.get_*"]
    #[serde(default)]
    pub allow: Vec<String>,
    /// Refuse tools that may change something
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
    /// Only lower than the profile's (ms, KiB, MiB as named)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = super::terse_limits)]
    pub limits: Option<ExecLimits>,
}

#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = super::require_code)]
pub struct RunCode {
    /// The program. Python: `from mcp_sdk import call_tool, ToolError, save_artifact, result`.
    /// JavaScript: `await callTool(name, args)`, `saveArtifact`, `result`.
    #[serde(default)]
    pub code: String,
    #[serde(flatten)]
    pub run: RunOptions,
}

#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct ExecOpen {
    /// Keep it after exec_close
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub persist: bool,
}

#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = super::require_upload)]
pub struct ExecUpload {
    #[serde(default)]
    pub exec_id: String,
    /// Relative to the workspace
    #[serde(default)]
    pub path: String,
    #[serde(default)]
    pub content: String,
}

#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = super::exec_run_schema)]
pub struct ExecRun {
    #[serde(default)]
    pub exec_id: String,
    /// The program, or `entry`: a workspace file to run
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry: Option<String>,
    #[serde(flatten)]
    pub run: RunOptions,
}

#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = super::require_exec_id)]
pub struct ExecClose {
    #[serde(default)]
    pub exec_id: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub discard: bool,
}

pub fn run_code_description(sep: &str) -> String {
    format!(
        "Run a short sandboxed program that calls tools and returns only what it chooses: \
         fetch, filter and store in one step instead of many large results. It may call only \
         the tools its `allow` globs name (as broker{sep}search_tools names them). \
         `call_tool(\"srv{sep}tool\", {{...}})` returns the structured result or raises \
         ToolError; `result(x)` sets the answer. No network; files only in /work."
    )
}

pub fn exec_open_description(_sep: &str) -> String {
    "Open a workspace for several runs; gives exec_id.".to_string()
}

pub fn exec_upload_description(_sep: &str) -> String {
    "Write a file in an exec workspace.".to_string()
}

pub fn exec_run_description(sep: &str) -> String {
    format!("Run code (or workspace file `entry`) in an exec workspace, as broker{sep}run_code.")
}

pub fn exec_close_description(_sep: &str) -> String {
    "Close an exec workspace (kept if persisted, unless `discard`).".to_string()
}
