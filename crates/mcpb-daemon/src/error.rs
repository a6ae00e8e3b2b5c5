//! The daemon's own failures (at start), and the two conversions every answer path shares: an
//! upstream's failure as the broker's JSON-RPC error, a JSON value as a response frame.

use std::path::PathBuf;

use mcpb_protocol::BrokerRpcError;
use mcpb_protocol::message::{response_line, to_raw};
use mcpb_upstream::UpstreamError;
use serde_json::Value;
use serde_json::value::RawValue;

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("another mcp-broker daemon is already running for {root}")]
    AlreadyRunning { root: PathBuf },
    #[error("cannot prepare the runtime directory {path}: {source}")]
    Runtime {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot listen on {path}: {source}")]
    Bind {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("socket path {path} is {len} bytes long; Unix sockets allow at most 107")]
    SocketPathTooLong { path: PathBuf, len: usize },
    #[error("cannot install signal handlers: {0}")]
    Signals(std::io::Error),
    #[error("{0}")]
    Http(String),
}

#[expect(
    clippy::wildcard_enum_match_arm,
    reason = "every error but a time limit is the upstream being unavailable"
)]
pub(crate) fn rpc_error(e: UpstreamError) -> BrokerRpcError {
    match e {
        UpstreamError::Timeout { upstream, ms } => BrokerRpcError::Timeout { upstream, ms },
        UpstreamError::HardLimit { upstream, ms } => BrokerRpcError::HardLimit { upstream, ms },
        other => BrokerRpcError::UpstreamUnavailable {
            upstream: other.upstream().to_string(),
            reason: other.to_string(),
        },
    }
}

pub(crate) fn json_line(id: &RawValue, value: &Value) -> Vec<u8> {
    match to_raw(value) {
        Ok(raw) => response_line(id, &raw),
        Err(e) => BrokerRpcError::Internal(e.to_string()).to_line(Some(id)),
    }
}
