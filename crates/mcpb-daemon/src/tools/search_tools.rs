//! `broker.search_tools`: ranked visible tools for a request, or one server's whole list.

use mcpb_facade::FacadeTool;
pub(super) use mcpb_facade::tools::search_tools::Args;
use serde_json::{Value, json};

use super::{tool_error, tool_result};
use crate::view::ProfileView;

/// The first sentence of a description's first line, at most 200 characters.
fn one_line(description: &str) -> String {
    let first = description
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    let end = first.find(". ").map_or(first.len(), |i| i + 1);
    let mut out = first[..end].to_string();
    mcpb_facade::projection::cut_chars(&mut out, 200);
    out
}

pub(super) async fn apply(view: &ProfileView, args: Args) -> Value {
    let query = args.query();
    let limit = args.limit();
    let server = args.server.as_deref().filter(|s| !s.is_empty());
    let known: Vec<String> = view
        .upstreams()
        .iter()
        .map(|u| u.name().to_string())
        .collect();
    if let Some(s) = server
        && !known.iter().any(|k| k == s)
    {
        return tool_error(format!(
            "unknown server '{s}'; known servers: {}",
            known.join(", ")
        ));
    }
    let index = view.search_index().await;
    let keep = |i: usize| server.is_none_or(|s| index.tools[i].upstream.name() == s);
    let picked: Vec<usize> = if query.trim().is_empty() {
        if server.is_none() {
            return tool_error("give a query, or a server to list its tools");
        }
        (0..index.tools.len()).filter(|i| keep(*i)).collect()
    } else {
        index
            .index
            .search(query, limit, &keep)
            .iter()
            .map(|h| h.doc)
            .collect()
    };
    let results: Vec<Value> = picked
        .into_iter()
        .map(|i| {
            let t = &index.tools[i];
            let def = t.definition();
            let required = def
                .get("inputSchema")
                .and_then(|s| s.get("required"))
                .cloned()
                .unwrap_or_else(|| json!([]));
            json!({
                "name": t.exposed,
                "description": one_line(def.get("description").and_then(Value::as_str).unwrap_or("")),
                "server": t.upstream.name(),
                "tags": t.upstream.settings().tags,
                "mutating": t.mutating,
                "required": required,
            })
        })
        .collect();
    let sep = view.sep();
    let hint = if results.is_empty() {
        format!(
            "no match; try other words or {}",
            FacadeTool::ListServers.name(sep)
        )
    } else {
        format!(
            "{} {{\"name\": ...}} shows the input schema; {} {{\"name\": ..., \"arguments\": {{...}}}} runs it",
            FacadeTool::DescribeTool.name(sep),
            FacadeTool::CallTool.name(sep)
        )
    };
    let mut out = json!({"results": results, "hint": hint});
    let unavailable = view.unavailable();
    if !unavailable.is_empty() {
        out["unavailable"] = unavailable
            .iter()
            .map(|(server, error)| json!({"server": server, "error": error}))
            .collect();
    }
    tool_result(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_line_keeps_the_first_sentence() {
        assert_eq!(
            super::one_line("\n  Reads a file. Then more.\nNext"),
            "Reads a file."
        );
        assert_eq!(super::one_line("No full stop"), "No full stop");
        assert!(super::one_line(&"x".repeat(500)).chars().count() <= 201);
    }
}
