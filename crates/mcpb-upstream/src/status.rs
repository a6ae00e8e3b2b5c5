//! What an upstream reports about itself: its state, processes, counters and last error.

use mcpb_config::Lifecycle;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UpstreamState {
    Stopped,
    Starting,
    Running,
    Failed,
    Disabled,
}

#[derive(Debug, Clone, Serialize)]
pub struct UpstreamStatus {
    pub name: String,
    pub lifecycle: Lifecycle,
    pub state: UpstreamState,
    /// The shared instance's process (the group leader).
    pub pid: Option<u32>,
    /// Every running instance's process, whatever the lifecycle.
    pub pids: Vec<u32>,
    /// Running per-session instances.
    pub session_count: usize,
    /// Calls in flight on this upstream, from admission to answer, whatever its lifecycle
    /// (a per-call listing counts too).
    pub active_call_count: usize,
    pub protocol_version: Option<String>,
    /// What the upstream said it offers at its last start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<serde_json::Value>,
    pub tool_count: Option<usize>,
    pub started_at_unix: Option<u64>,
    pub starts: u32,
    /// Unexpected exits and failed starts since the daemon started.
    pub failures: u32,
    /// Set while calls fail at once after repeated failures.
    pub failfast_until_unix: Option<u64>,
    pub last_error: Option<String>,
    /// Tools of the last list that were refused one by one (bad name, unreadable definition).
    pub rejected_tools: Vec<RejectedTool>,
    pub stderr_tail: Vec<String>,
    /// The sandbox the server runs in, as its last start set it up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxView>,
    /// A local server: whether the daemon's settings run it in the sandbox (a daemon started
    /// with another environment may resolve the default differently from a shell). `None`
    /// for a remote one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandboxed: Option<bool>,
    /// Why a stopped server is not running: it starts on first use, or it was stopped after
    /// being idle (and starts again on its next call).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped_because: Option<String>,
}

/// A sandboxed server's grants, for `status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SandboxView {
    pub read: Vec<std::path::PathBuf>,
    pub write: Vec<std::path::PathBuf>,
    pub network: bool,
}

/// A tool left out of an upstream's list, and why; the rest of the list is kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RejectedTool {
    /// The tool's name as sent, with control characters escaped; `#N` when it has none.
    pub tool: String,
    pub reason: String,
}
