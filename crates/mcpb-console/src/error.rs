use thiserror::Error;

/// Why the console could not start.
#[derive(Debug, Error)]
pub enum ConsoleError {
    #[error("the console listens on loopback only, not on {0}")]
    NotLoopback(String),
    #[error("cannot listen on {listen} for the console: {source}")]
    Bind {
        listen: String,
        source: std::io::Error,
    },
}
