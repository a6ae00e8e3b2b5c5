use std::path::PathBuf;

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
}
