use thiserror::Error;

#[derive(Debug, Error)]
pub enum OAuthError {
    #[error("cannot reach {url}: {reason}")]
    Unreachable { url: String, reason: String },
    /// Said whole in one line (the SDK's error is not kept as a source, or it would be said
    /// twice).
    #[error("sign-in failed: {0}")]
    Auth(rmcp::transport::auth::AuthError),
    #[error("the sign-in was not finished within {secs} s")]
    TimedOut { secs: u64 },
    #[error("the authorization server refused: {0}")]
    Refused(String),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

impl From<rmcp::transport::auth::AuthError> for OAuthError {
    fn from(e: rmcp::transport::auth::AuthError) -> Self {
        OAuthError::Auth(e)
    }
}
