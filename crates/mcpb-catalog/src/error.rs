use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("cannot access {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a valid {what}: {reason}")]
    Corrupt {
        path: PathBuf,
        what: &'static str,
        reason: String,
    },
}

impl CatalogError {
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        Self::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}
