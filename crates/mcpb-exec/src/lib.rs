//! Code runs: workspaces (exec ids that are UUIDs and nothing else, uploads confined to the
//! workspace), the limits of a run, the SDK channel through which a program calls tools, the
//! Python runtime, and the answer a run gives. It starts the sandbox (mcpb-sandbox) and reaches
//! tools only through the [`ToolHost`] the daemon hands it, which is the same profile view every
//! other call goes through; it never reads the config or talks MCP itself.

mod answer;
mod conclude;
mod job;
pub mod js;
mod output;
mod pool;
pub mod python;
mod run;
mod sdk;
mod spawn;
pub mod workspace;

pub use answer::{ArtifactRecord, CallRecord, RunAnswer, Status, Usage};
pub use conclude::Ran;
pub use run::{RunRequest, Runner};
pub use sdk::{CallOutcome, MAX_FRAME_BYTES, ToolHost};
pub use workspace::{Lease, Persisted, WorkspaceInfo, Workspaces};

#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("unknown exec id '{0}'")]
    UnknownExec(String),
    #[error("bad workspace path {0}")]
    BadPath(String),
    #[error("exec '{0}' is running; wait for its run to end")]
    Busy(String),
    #[error(
        "this profile already has {0} open workspaces\nhint: close one with exec_close {{exec_id}}, or run `mcp-broker exec list` to see them"
    )]
    TooMany(u32),
    #[error(
        "this profile already keeps {0} persisted workspaces\nhint: remove one with exec_close {{exec_id, discard: true}}, or run `mcp-broker exec prune --all` (`mcp-broker exec list` shows them)"
    )]
    TooManyPersisted(u32),
    #[error("upload refused: {0}")]
    Quota(String),
    #[error("workspace: {0}")]
    Io(String),
}
