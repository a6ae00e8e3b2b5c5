#[derive(Debug, Clone, thiserror::Error)]
pub enum UpstreamError {
    #[error("upstream '{upstream}' could not start `{command}`: {reason}")]
    Spawn {
        upstream: String,
        command: String,
        reason: String,
    },
    #[error("upstream '{upstream}' cannot be reached: {reason}")]
    Connect { upstream: String, reason: String },
    #[error("upstream '{upstream}' needs {key}: {reason}")]
    Secret {
        upstream: String,
        key: String,
        reason: String,
    },
    #[error("upstream '{upstream}' failed its handshake: {reason}")]
    Handshake { upstream: String, reason: String },
    #[error("upstream '{upstream}' did not finish starting within {ms} ms")]
    StartTimeout { upstream: String, ms: u64 },
    #[error("upstream '{upstream}' exited ({status})")]
    Exited { upstream: String, status: String },
    #[error("upstream '{upstream}' did not answer within {ms} ms")]
    Timeout { upstream: String, ms: u64 },
    #[error(
        "upstream '{upstream}' kept reporting progress but did not finish within max_call_ms ({ms} ms)"
    )]
    HardLimit { upstream: String, ms: u64 },
    #[error("upstream '{upstream}' is disabled in the config")]
    Disabled { upstream: String },
    #[error("upstream '{upstream}' is stopping")]
    Stopping { upstream: String },
    #[error("upstream '{upstream}': {reason}")]
    Protocol { upstream: String, reason: String },
    #[error("upstream '{upstream}' is at capacity: {reason}")]
    AtCapacity { upstream: String, reason: String },
    #[error(
        "upstream '{upstream}' keeps failing; not retrying for {retry_in_s} s (last error: {last_error})"
    )]
    Failfast {
        upstream: String,
        retry_in_s: u64,
        last_error: String,
    },
}

impl UpstreamError {
    pub fn upstream(&self) -> &str {
        match self {
            UpstreamError::Spawn { upstream, .. }
            | UpstreamError::Connect { upstream, .. }
            | UpstreamError::Secret { upstream, .. }
            | UpstreamError::Handshake { upstream, .. }
            | UpstreamError::StartTimeout { upstream, .. }
            | UpstreamError::Exited { upstream, .. }
            | UpstreamError::Timeout { upstream, .. }
            | UpstreamError::HardLimit { upstream, .. }
            | UpstreamError::Disabled { upstream }
            | UpstreamError::Stopping { upstream }
            | UpstreamError::Protocol { upstream, .. }
            | UpstreamError::Failfast { upstream, .. }
            | UpstreamError::AtCapacity { upstream, .. } => upstream,
        }
    }
}
