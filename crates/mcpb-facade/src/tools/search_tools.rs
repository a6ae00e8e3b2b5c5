//! `broker.search_tools`: ranked tools for a request in plain words, or one server's list.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::FacadeTool;

/// Results when the caller gives no limit.
pub const DEFAULT_LIMIT: usize = 8;
pub const MAX_LIMIT: usize = 50;
/// Longest query searched; a longer one is cut, not refused.
pub const MAX_QUERY_BYTES: usize = 1024;

/// What a search looks for.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    #[default]
    Tool,
    Resource,
    Prompt,
}

#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = super::require_query)]
pub struct Args {
    /// What you want to do, in plain words
    #[serde(default)]
    pub query: String,
    /// Only tools of this server
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// Default 8
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = MAX_LIMIT))]
    pub limit: Option<usize>,
    /// tool (default), resource or prompt
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<Kind>,
}

impl Args {
    /// The limit to apply: the default when none is given, within 1..=MAX_LIMIT.
    pub fn limit(&self) -> usize {
        self.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT)
    }

    /// The query cut to MAX_QUERY_BYTES on a character boundary.
    pub fn query(&self) -> &str {
        let mut end = self.query.len().min(MAX_QUERY_BYTES);
        while !self.query.is_char_boundary(end) {
            end -= 1;
        }
        &self.query[..end]
    }
}

pub fn description(sep: &str) -> String {
    format!(
        "Find tools by what you want to do. Returns ranked names with one-line descriptions (no schemas); then {}, then {}. Empty query with server lists that server's tools.",
        FacadeTool::DescribeTool.name(sep),
        FacadeTool::CallTool.name(sep)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_and_long_queries() {
        let mut a = Args::default();
        assert_eq!(a.limit(), DEFAULT_LIMIT);
        a.limit = Some(0);
        assert_eq!(a.limit(), 1);
        a.limit = Some(10_000);
        assert_eq!(a.limit(), MAX_LIMIT);
        a.query = "é".repeat(MAX_QUERY_BYTES);
        assert!(a.query().len() <= MAX_QUERY_BYTES);
        assert!(a.query().len() >= MAX_QUERY_BYTES - 1);
    }
}
