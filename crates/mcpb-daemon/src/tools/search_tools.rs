//! `broker.search_tools`: ranked visible tools for a request in plain words, or one server's
//! whole list; resources and prompts ranked the same way.

use mcpb_protocol::BrokerRpcError;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{Answer, Apply, BrokerTool, Ctx, Naming, done, tool_error, tool_result};
use crate::view::{Catalog, Source};

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
#[schemars(transform = require_query)]
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

fn require_query(schema: &mut schemars::Schema) {
    mcpb_facade::schema::require(schema, &["query"]);
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

pub struct SearchTools;

impl BrokerTool for SearchTools {
    const VERB: &'static str = super::names::SEARCH_TOOLS.verb;
    const MUTATES: bool = false;
    const NEEDS_EXEC: bool = false;
    type Args = Args;

    fn description(n: Naming) -> String {
        format!(
            "Find tools by what you want to do. Returns ranked names with one-line descriptions (no schemas); then {}, then {}. Empty query with server lists that server's tools.",
            super::names::DESCRIBE_TOOL.under(n),
            super::names::CALL_TOOL.under(n)
        )
    }
}

impl Apply for SearchTools {
    async fn apply(ctx: Ctx<'_>, args: Args) -> Result<Answer, BrokerRpcError> {
        done(match args.kind.unwrap_or_default() {
            Kind::Tool => search(ctx.catalog, &args).await,
            kind @ (Kind::Resource | Kind::Prompt) => {
                search_content(ctx.catalog, &args, kind).await
            }
        })
    }
}
/// The first sentence of a description's first line, at most 200 characters.
pub(crate) fn one_line(description: &str) -> String {
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
async fn search_content(view: Catalog<'_>, args: &Args, kind: Kind) -> Value {
    let items = match kind {
        Kind::Resource => view.all_resources(Source::Known).await,
        Kind::Tool | Kind::Prompt => view.all_prompts(Source::Known).await,
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

/// The index's best `limit` tools for `query` (of `server` only, when given), best first: the
/// order `broker.search_tools` answers in, and the console's Tools page shows.
pub(crate) async fn ranked(
    view: Catalog<'_>,
    index: &std::sync::Arc<crate::view::ProfileIndex>,
    query: &str,
    limit: usize,
    server: Option<&str>,
) -> Vec<usize> {
    let keep = |i: usize| server.is_none_or(|s| index.tools[i].upstream.name() == s);
    if index.index.reranks() {
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
    }
}

async fn search(view: Catalog<'_>, args: &Args) -> Value {
    let query = args.query();
    let limit = args.limit();
    let server = args.server.as_deref().filter(|s| !s.is_empty());
    let known: Vec<String> = view
        .servers()
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
    let picked: Vec<usize> = if query.trim().is_empty() {
        if server.is_none() {
            return tool_error("give a query, or a server to list its tools");
        }
        (0..index.tools.len())
            .filter(|i| server.is_none_or(|s| index.tools[*i].upstream.name() == s))
            .collect()
    } else {
        ranked(view, &index, query, limit, server).await
    };
    let results: Vec<Value> = picked
        .into_iter()
        .map(|i| {
            let t = &index.tools[i];
            let def = t.definition().to_value();
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
    let n = Naming::of(view.profile());
    let hint = if results.is_empty() {
        format!(
            "no match; try other words or {}",
            super::names::LIST_SERVERS.under(n)
        )
    } else {
        format!(
            "{} {{\"name\": ...}} shows the input schema; {} {{\"name\": ..., \"arguments\": {{...}}}} runs it",
            super::names::DESCRIBE_TOOL.under(n),
            super::names::CALL_TOOL.under(n)
        )
    };
    let mut out = json!({"results": results, "hint": hint});
    let starting = view.still_starting().into_iter().map(|server| {
        let error = "still starting; search again when it is up".to_string();
        (server, error)
    });
    let unavailable: Vec<(String, String)> =
        view.unavailable().into_iter().chain(starting).collect();
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
