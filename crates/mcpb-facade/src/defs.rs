//! The facade's tool definitions. Every word here is paid for in every client's context, so the
//! descriptions are short and exact; a test holds the whole set to 1,200 o200k_base tokens.

use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FacadeTool {
    ListServers,
    SearchTools,
    DescribeTool,
    CallTool,
    GetArtifact,
    Status,
    CloseSession,
}

impl FacadeTool {
    pub const ALL: [FacadeTool; 7] = [
        FacadeTool::ListServers,
        FacadeTool::SearchTools,
        FacadeTool::DescribeTool,
        FacadeTool::CallTool,
        FacadeTool::GetArtifact,
        FacadeTool::Status,
        FacadeTool::CloseSession,
    ];

    pub fn verb(self) -> &'static str {
        match self {
            FacadeTool::ListServers => "list_servers",
            FacadeTool::SearchTools => "search_tools",
            FacadeTool::DescribeTool => "describe_tool",
            FacadeTool::CallTool => "call_tool",
            FacadeTool::GetArtifact => "get_artifact",
            FacadeTool::Status => "status",
            FacadeTool::CloseSession => "close_session",
        }
    }

    /// `broker<sep><verb>`: the facade follows the profile's name style like every tool.
    pub fn name(self, sep: &str) -> String {
        format!("broker{sep}{}", self.verb())
    }

    pub fn from_name(sep: &str, name: &str) -> Option<Self> {
        let verb = name.strip_prefix("broker")?.strip_prefix(sep)?;
        Self::ALL.into_iter().find(|t| t.verb() == verb)
    }

    fn read_only(self) -> bool {
        !matches!(self, FacadeTool::CallTool | FacadeTool::CloseSession)
    }
}

/// The definitions for a profile with separator `sep`. `result_size_chars` is declared on
/// call_tool for clients that honour `anthropic/maxResultSizeChars`.
pub fn definitions(sep: &str, result_size_chars: Option<u64>) -> Vec<Value> {
    let n = |t: FacadeTool| t.name(sep);
    let search = n(FacadeTool::SearchTools);
    let describe = n(FacadeTool::DescribeTool);
    let call = n(FacadeTool::CallTool);
    let artifact = n(FacadeTool::GetArtifact);
    FacadeTool::ALL
        .into_iter()
        .map(|tool| {
            let (description, schema) = match tool {
                FacadeTool::ListServers => (
                    format!("List the MCP servers behind this broker: name, description, tags, tool count, state. Then {search} to find tools."),
                    json!({"type": "object", "properties": {}}),
                ),
                FacadeTool::SearchTools => (
                    format!("Find tools by what you want to do. Returns ranked names with one-line descriptions (no schemas); then {describe}, then {call}. Empty query with server lists that server's tools."),
                    json!({"type": "object", "properties": {
                        "query": {"type": "string", "description": "What you want to do, in plain words"},
                        "server": {"type": "string", "description": "Only tools of this server"},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Default 8"}
                    }, "required": ["query"]}),
                ),
                FacadeTool::DescribeTool => (
                    "Full definition (input schema, annotations) of one or more tools, by the names search returned.".to_string(),
                    json!({"type": "object", "properties": {
                        "name": {"type": "string"},
                        "names": {"type": "array", "items": {"type": "string"}, "maxItems": 20}
                    }}),
                ),
                FacadeTool::CallTool => (
                    format!("Call a tool by name with arguments matching its input schema. projection trims the result before you see it. A result over the budget comes back as a preview plus an artifact id for {artifact}."),
                    json!({"type": "object", "properties": {
                        "name": {"type": "string"},
                        "arguments": {"type": "object"},
                        "projection": {"type": "object", "properties": {
                            "paths": {"type": "array", "items": {"type": "string"}, "description": "Keep only these JSON paths, e.g. items[].name, meta.total"},
                            "max_array_items": {"type": "integer", "minimum": 0},
                            "max_chars": {"type": "integer", "minimum": 1}
                        }}
                    }, "required": ["name"]}),
                ),
                FacadeTool::GetArtifact => (
                    "Read a stored large result by artifact id, a page at a time.".to_string(),
                    json!({"type": "object", "properties": {
                        "id": {"type": "string"},
                        "offset": {"type": "integer", "minimum": 0, "description": "In characters, default 0"},
                        "length": {"type": "integer", "minimum": 1, "description": "In characters"}
                    }, "required": ["id"]}),
                ),
                FacadeTool::Status => (
                    "State of each server (running, stopped, failed), last error and whether it needs credentials. Starts nothing.".to_string(),
                    json!({"type": "object", "properties": {}}),
                ),
                FacadeTool::CloseSession => (
                    "Stop the server processes started for this session only. Shared servers keep running.".to_string(),
                    json!({"type": "object", "properties": {}}),
                ),
            };
            let mut def = json!({
                "name": n(tool),
                "description": description,
                "inputSchema": schema,
                "annotations": {"readOnlyHint": tool.read_only()},
            });
            if tool == FacadeTool::CallTool
                && let Some(size) = result_size_chars
            {
                def["_meta"] = json!({"anthropic/maxResultSizeChars": size.min(500_000)});
            }
            def
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_style_and_round_trip() {
        for sep in [".", "__"] {
            for t in FacadeTool::ALL {
                assert_eq!(FacadeTool::from_name(sep, &t.name(sep)), Some(t));
            }
        }
        assert_eq!(FacadeTool::from_name(".", "broker.nope"), None);
        assert_eq!(FacadeTool::from_name(".", "broker__status"), None);
        let defs = definitions("__", Some(900_000));
        assert_eq!(defs[3]["name"], "broker__call_tool");
        assert_eq!(defs[3]["_meta"]["anthropic/maxResultSizeChars"], 500_000);
    }
}
