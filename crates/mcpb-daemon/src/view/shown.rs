//! A server as the rest of the daemon may hold it outside the view: its name, settings, state
//! and capabilities. Never the upstream itself, whose `call` and `tools` would skip the view's
//! gate (pins, policy, the result budget, the audit): only the view's own modules reach it.

use std::sync::Arc;

use mcpb_config::UpstreamSettings;
use mcpb_upstream::{AuthSeen, Upstream, UpstreamStatus};
use serde_json::Value;

/// One server the profile shows.
#[derive(Clone)]
pub(crate) struct Shown(Arc<Upstream>);

impl Shown {
    pub(in crate::view) fn new(up: Arc<Upstream>) -> Self {
        Shown(up)
    }

    /// The upstream behind it, for the view's own calls.
    pub(in crate::view) fn upstream(&self) -> &Arc<Upstream> {
        &self.0
    }

    pub(crate) fn name(&self) -> &str {
        self.0.name()
    }

    pub(crate) fn settings(&self) -> &UpstreamSettings {
        self.0.settings()
    }

    pub(crate) fn status(&self) -> UpstreamStatus {
        self.0.status()
    }

    /// What its server said it offers at its last start (`None`: never started).
    pub(crate) fn capabilities(&self) -> Option<Value> {
        self.0.capabilities()
    }

    /// What its remote server said of the credentials it was sent.
    pub(crate) fn auth_seen(&self) -> AuthSeen {
        self.0.auth_seen()
    }
}
