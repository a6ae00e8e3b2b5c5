//! The one place where broker failures become JSON-RPC errors.
//!
//! Errors that come from an upstream are never mapped: they are forwarded as the upstream sent them.
//! Only failures the broker itself detects get a code here, so that a client sees the same code for
//! the same situation on every path.

use serde_json::value::RawValue;

use crate::message::RpcCode;

/// Failures the broker reports to a client in place of an upstream's answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BrokerRpcError {
    #[error("parse error: {0}")]
    Parse(String),
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    #[error("method not found: {0}")]
    MethodNotFound(String),
    /// Deliberately the same answer for a tool that does not exist and one the profile hides, so a
    /// client cannot probe for hidden tools.
    #[error("Unknown tool: {0}")]
    UnknownTool(String),
    /// The same answer, with the closest names the client may see in `data.did_you_mean`.
    #[error("Unknown tool: {name}")]
    UnknownToolNear { name: String, near: Vec<String> },
    #[error("invalid params: {0}")]
    InvalidParams(String),
    /// A URI no upstream of the profile serves, or one of an upstream the profile hides.
    #[error("Resource not found: {0}")]
    UnknownResource(String),
    /// Like an unknown tool: absent and hidden prompts get the same answer.
    #[error("Unknown prompt: {0}")]
    UnknownPrompt(String),
    #[error("upstream '{upstream}' is unavailable: {reason}")]
    UpstreamUnavailable { upstream: String, reason: String },
    #[error("upstream '{upstream}' did not answer within {ms} ms")]
    Timeout { upstream: String, ms: u64 },
    #[error(
        "upstream '{upstream}' kept reporting progress but did not finish within max_call_ms ({ms} ms)"
    )]
    HardLimit { upstream: String, ms: u64 },
    #[error("{0}")]
    Overloaded(String),
    #[error("internal error: {0}")]
    Internal(String),
}

impl BrokerRpcError {
    pub fn code(&self) -> RpcCode {
        match self {
            BrokerRpcError::Parse(_) => RpcCode::ParseError,
            BrokerRpcError::InvalidRequest(_) => RpcCode::InvalidRequest,
            BrokerRpcError::MethodNotFound(_) => RpcCode::MethodNotFound,
            BrokerRpcError::UnknownTool(_)
            | BrokerRpcError::UnknownToolNear { .. }
            | BrokerRpcError::InvalidParams(_)
            | BrokerRpcError::UnknownPrompt(_) => RpcCode::InvalidParams,
            BrokerRpcError::UnknownResource(_) => RpcCode::ResourceNotFound,
            BrokerRpcError::UpstreamUnavailable { .. } => RpcCode::UpstreamUnavailable,
            BrokerRpcError::Timeout { .. } | BrokerRpcError::HardLimit { .. } => {
                RpcCode::RequestTimeout
            }
            BrokerRpcError::Overloaded(_) => RpcCode::Overloaded,
            BrokerRpcError::Internal(_) => RpcCode::InternalError,
        }
    }

    /// The complete response frame for a request with this id. Its text may carry what an
    /// upstream said (its stderr, its error): secrets are taken out here, on the one way every
    /// broker error reaches a client.
    #[expect(
        clippy::wildcard_enum_match_arm,
        reason = "every other error has no data to add"
    )]
    pub fn to_line(&self, id: Option<&RawValue>) -> Vec<u8> {
        let text = self.to_string();
        let text = mcpb_redact::redact(&text);
        match self {
            BrokerRpcError::UnknownToolNear { near, .. } if !near.is_empty() => {
                let data = serde_json::json!({ "did_you_mean": near });
                crate::message::error_line_with_data(id, self.code(), &text, &data)
            }
            _ => crate::message::error_line(id, self.code(), &text),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_and_hidden_tools_share_one_answer() {
        let e = BrokerRpcError::UnknownTool("example.secret".into());
        let line = e.to_line(Some(&RawValue::from_string("3".into()).unwrap()));
        let v: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(v["error"]["code"], -32602);
        assert_eq!(v["error"]["message"], "Unknown tool: example.secret");
        assert_eq!(v["id"], 3);
        let near = BrokerRpcError::UnknownToolNear {
            name: "example.ech".into(),
            near: vec!["example.echo".into()],
        };
        let v: serde_json::Value = serde_json::from_slice(&near.to_line(None)).unwrap();
        assert_eq!(v["error"]["message"], "Unknown tool: example.ech");
        assert_eq!(v["error"]["data"]["did_you_mean"][0], "example.echo");
    }
}
