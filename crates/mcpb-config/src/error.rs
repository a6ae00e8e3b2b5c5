//! Configuration errors, formatted the way compilers do: `file:line:col: path: message`, then
//! `hint:` lines.

use std::fmt;
use std::path::PathBuf;

/// One problem found in a config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigIssue {
    /// 1-based; 0 when unknown.
    pub line: u64,
    pub column: u64,
    /// Dotted key path, e.g. `upstreams.github.env.GITHUB_TOKEN`.
    pub path: String,
    pub message: String,
    pub hint: Option<String>,
}

impl ConfigIssue {
    pub fn render(&self, file: &str) -> String {
        let mut out = if self.line > 0 {
            format!("{file}:{}:{}: ", self.line, self.column)
        } else {
            format!("{file}: ")
        };
        if !self.path.is_empty() {
            out.push_str(&self.path);
            out.push_str(": ");
        }
        out.push_str(&self.message);
        if let Some(hint) = &self.hint {
            out.push_str("\n  hint: ");
            out.push_str(hint);
        }
        out
    }
}

/// The largest config file read: anything near it is not a config, and parsing a huge one costs
/// seconds and hundreds of megabytes.
pub const MAX_CONFIG_BYTES: u64 = 4 << 20;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "config {path} is larger than {max} MiB; a broker config is a few KiB\nhint: check that --config names the right file",
        max = MAX_CONFIG_BYTES >> 20
    )]
    TooLarge { path: PathBuf },
    #[error("{}", render_invalid(file, issues))]
    Invalid {
        file: String,
        issues: Vec<ConfigIssue>,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} already exists; not overwriting it")]
    Exists { path: PathBuf },
}

fn render_invalid(file: &str, issues: &[ConfigIssue]) -> String {
    let mut out = String::new();
    let n = issues.len();
    let _ = fmt::write(
        &mut out,
        format_args!(
            "invalid config {file}: {n} error{}",
            if n == 1 { "" } else { "s" }
        ),
    );
    for issue in issues {
        out.push('\n');
        out.push_str(&issue.render(file));
    }
    out
}

impl ConfigError {
    pub fn issues(&self) -> &[ConfigIssue] {
        match self {
            ConfigError::Invalid { issues, .. } => issues,
            ConfigError::Read { .. }
            | ConfigError::TooLarge { .. }
            | ConfigError::Write { .. }
            | ConfigError::Exists { .. } => &[],
        }
    }
}
