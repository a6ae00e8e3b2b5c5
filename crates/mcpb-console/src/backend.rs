//! What the console asks of the daemon. The console holds no state of the broker's own: every
//! page is built from these answers, and every action goes through them, so an action here is
//! one the CLI has too (`pins approve`, `measure`, `upstream restart`).

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

/// What can be done to one upstream (`mcp-broker upstream start|stop|restart`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamAction {
    Start,
    Stop,
    Restart,
}

impl UpstreamAction {
    pub const ALL: [Self; 3] = [Self::Start, Self::Stop, Self::Restart];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Start => "start",
            Self::Stop => "stop",
            Self::Restart => "restart",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.as_str() == text)
    }
}

/// How an action went, in the words the CLI would print.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub ok: bool,
    pub text: String,
}

/// One tool of the catalog as the Tools page lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRow {
    /// The name the profile shows it by.
    pub name: String,
    pub server: String,
    /// Its first sentence.
    pub description: String,
    pub mutating: bool,
    /// Every profile that sees it.
    pub profiles: Vec<String>,
}

/// Calls of one upstream in one minute.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Bucket {
    /// The minute's start, in seconds since the epoch.
    pub minute: u64,
    pub calls: u32,
    pub errors: u32,
    /// Sum of the calls' durations, for the minute's mean.
    pub ms_sum: f64,
    pub ms_max: f64,
}

/// An upstream's calls over the last hour, oldest minute first.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub upstream: String,
    pub buckets: Vec<Bucket>,
}

pub trait Backend: Send + Sync + 'static {
    /// What `mcp-broker status --json` prints.
    fn status(&self) -> serde_json::Value;
    /// Every profile, with the clients mapped to it.
    fn profiles(&self) -> Vec<(String, Vec<String>)>;
    /// The profile's visible tools matching `query` (ranked by the index `broker.search_tools`
    /// uses), or all of them for an empty query.
    fn tools(
        &self,
        profile: &str,
        query: &str,
    ) -> impl Future<Output = Result<Vec<ToolRow>, String>> + Send;
    /// One tool's definition as the profile shows it.
    fn tool(
        &self,
        profile: &str,
        name: &str,
    ) -> impl Future<Output = Option<serde_json::Value>> + Send;
    /// `mcp-broker upstream <action> <name>`.
    fn upstream(&self, name: &str, action: UpstreamAction) -> impl Future<Output = Outcome> + Send;
    /// The CLI, set up for this daemon's configuration: the console's approvals and
    /// measurements are the CLI's own code.
    fn cli(&self) -> tokio::process::Command;
    /// The audit log, when calls are audited.
    fn audit_log(&self) -> Option<PathBuf>;
    /// Each call's audit line, as it is recorded.
    fn live(&self) -> tokio::sync::broadcast::Receiver<Arc<str>>;
    /// Calls per upstream per minute over the last hour.
    fn series(&self) -> Vec<Series>;
}
