//! `broker.search_tools`: ranked visible tools for a request, or one server's whole list.

use mcpb_facade::FacadeTool;
pub(super) use mcpb_facade::tools::search_tools::Args;
use mcpb_facade::tools::search_tools::Kind;
use serde_json::{Value, json};

use super::{tool_error, tool_result};
use crate::view::{ProfileView, Source};

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

/// Resources or prompts ranked like tools: the same index, built for this one search from the
/// profile's lists (they are short next to tool lists): a running upstream's own, else the
/// last one known, so a search starts only an upstream that never listed them.
async fn search_content(view: &ProfileView, args: &Args, kind: Kind) -> Value {
    let items = match kind {
        Kind::Resource => view.all_resources(Source::Known).await,
        _ => view.all_prompts(Source::Known).await,
    };
    let server = args.server.as_deref().filter(|s| !s.is_empty());
    let docs: Vec<mcpb_catalog::ToolDoc> = items
        .iter()
        .map(|(up, item)| {
            // A resource's URI carries words too (file names, paths): they count as its name.
            let mut def = item.clone();
            if let Some(uri) = item.get("uri").and_then(Value::as_str) {
                let named = item.get("name").and_then(Value::as_str).unwrap_or("");
                def["name"] = Value::String(format!("{named} {uri}"));
            }
            if let Some(Value::Array(a)) = item.get("arguments") {
                let props: serde_json::Map<String, Value> = a
                    .iter()
                    .filter_map(|arg| Some((arg.get("name")?.as_str()?.to_string(), arg.clone())))
                    .collect();
                def["inputSchema"] = json!({ "properties": props });
            }
            let id = item
                .get("uri")
                .or_else(|| item.get("name"))
                .and_then(Value::as_str)
                .unwrap_or("");
            mcpb_catalog::ToolDoc::from_definition(id, up, up, &def)
        })
        .collect();
    let index = mcpb_catalog::Index::build(&docs, view.search_weights());
    let keep = |i: usize| server.is_none_or(|s| items[i].0 == s);
    let query = args.query();
    let picked: Vec<usize> = if query.trim().is_empty() {
        (0..items.len())
            .filter(|i| keep(*i))
            .take(args.limit())
            .collect()
    } else {
        index
            .search(query, args.limit(), &keep)
            .iter()
            .map(|h| h.doc)
            .collect()
    };
    let results: Vec<Value> = picked
        .into_iter()
        .map(|i| {
            let (up, item) = &items[i];
            let description =
                one_line(item.get("description").and_then(Value::as_str).unwrap_or(""));
            if kind == Kind::Resource {
                return json!({"uri": item["uri"], "name": item["name"], "description": description,
                    "server": up, "mimeType": item.get("mimeType")});
            }
            let required: Vec<Value> = item
                .get("arguments")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter(|x| x.get("required") == Some(&Value::Bool(true)))
                        .filter_map(|x| x.get("name").cloned())
                        .collect()
                })
                .unwrap_or_default();
            json!({"name": item["name"], "description": description, "server": up, "required": required})
        })
        .collect();
    let hint = match (results.is_empty(), kind) {
        (true, _) => "no match; try other words",
        (false, Kind::Resource) => "read one with resources/read",
        (false, _) => "get one with prompts/get",
    };
    tool_result(json!({"results": results, "hint": hint}))
}

pub(super) async fn apply(view: &ProfileView, args: Args) -> Value {
    match args.kind.unwrap_or_default() {
        Kind::Tool => {}
        kind => return search_content(view, &args, kind).await,
    }
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
    } else if index.index.reranks() {
        // A transformer pass takes milliseconds: off the daemon's one thread, so the other
        // sessions' frames keep moving meanwhile.
        let (ix, q, only) = (index.clone(), query.to_string(), server.map(str::to_string));
        let hits = view
            .on_catalog_thread(move || {
                let keep = |i: usize| {
                    only.as_deref()
                        .is_none_or(|s| ix.tools[i].upstream.name() == s)
                };
                ix.index.search(&q, limit, &keep)
            })
            .await
            .unwrap_or_default();
        view.keep_deep_vectors();
        hits.iter().map(|h| h.doc).collect()
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
