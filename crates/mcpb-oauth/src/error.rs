use thiserror::Error;

#[derive(Debug, Error)]
pub enum OAuthError {
    #[error("{url} asks for no sign-in: it answered without a token")]
    NotNeeded { url: String },
    #[error("cannot reach {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("sign-in failed: {0}")]
    Auth(#[from] rmcp::transport::auth::AuthError),
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
