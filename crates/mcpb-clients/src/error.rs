use std::path::PathBuf;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum ClientsError {
    #[error("{path}:{line}:{column}: the file is not valid {format}: {reason}")]
    Broken {
        path: PathBuf,
        format: &'static str,
        line: usize,
        column: usize,
        reason: String,
    },
    #[error("{path}: {what}")]
    Shape { path: PathBuf, what: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("no backup {name} of {client}")]
    NoBackup { client: String, name: String },
    #[error(
        "{path} changed since the broker wrote it ({why}); putting back backup {backup} would lose those changes"
    )]
    Changed {
        path: PathBuf,
        backup: String,
        why: String,
    },
}

impl ClientsError {
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        ClientsError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}
