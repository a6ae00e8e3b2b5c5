//! A tool as the catalog sees it: the searchable text of its definition, by field.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
pub struct ToolDoc {
    /// Stable id, e.g. `upstream.tool`.
    pub id: String,
    pub server: String,
    pub name: String,
    pub description: String,
    /// Parameter names, in schema order.
    pub params: Vec<String>,
    /// Parameter descriptions, joined.
    pub param_text: String,
    /// Upstream description, title and tags, joined.
    pub server_text: String,
}

impl ToolDoc {
    /// What the static embedding of the tool reads: its upstream, its name in words, its
    /// description and its parameters (names and descriptions). The upstream and parameters
    /// measured better than the name and description alone on all three data sets.
    pub fn embed_text(&self) -> String {
        format!(
            "{} {}. {}. {}. {} {}",
            crate::text::words(&self.server).join(" "),
            self.server_text,
            crate::text::words(&self.name).join(" "),
            self.description,
            self.params.join(" "),
            self.param_text
        )
    }

    /// From a tool definition as an upstream lists it.
    pub fn from_definition(id: &str, server: &str, server_text: &str, tool: &Value) -> Self {
        let props = tool
            .get("inputSchema")
            .and_then(|s| s.get("properties"))
            .and_then(Value::as_object);
        let params = props
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();
        let param_text = props
            .map(|p| {
                p.values()
                    .filter_map(|v| v.get("description").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        let mut description = tool
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if let Some(title) = tool.get("title").and_then(Value::as_str) {
            description = format!("{title}. {description}");
        }
        Self {
            id: id.to_string(),
            server: server.to_string(),
            name: tool
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            description,
            params,
            param_text,
            server_text: server_text.to_string(),
        }
    }
}
