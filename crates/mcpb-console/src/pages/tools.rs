//! Tools: the catalog a profile sees, searched with the index `broker.search_tools` uses; each
//! tool's schema, whether it mutates, and which profiles see it.

use maud::{Markup, html};
use serde_json::Value;

use super::json_block;
use crate::backend::ToolRow;

pub(crate) fn render(
    profiles: &[(String, Vec<String>)],
    profile: &str,
    query: &str,
    found: &Result<Vec<ToolRow>, String>,
) -> Markup {
    html! {
        form.search method="get" action="tools" {
            label { "profile "
                select name="profile" {
                    @for (p, _) in profiles {
                        option value=(p) selected[p == profile] { (p) }
                    }
                }
            }
            input type="search" name="q" value=(query) placeholder="what do you want to do?" autofocus;
            button type="submit" { "search" }
        }
        @match found {
            Err(e) => p.error { (e) },
            Ok(rows) => {
                p.summary { (rows.len()) " tool(s)" @if !query.is_empty() { " matching “" (query) "”" } }
                table #tools {
                    thead { tr { th { "tool" } th { "server" } th { "mutating" } th { "seen by" } th { "description" } } }
                    tbody {
                        @for r in rows {
                            tr {
                                td.name { a href={ "tool?profile=" (enc(profile)) "&name=" (enc(&r.name)) } { (r.name) } }
                                td { (r.server) }
                                td { @if r.mutating { span.mutating { "yes" } } @else { "no" } }
                                td { (r.profiles.join(", ")) }
                                td { (r.description) }
                            }
                        }
                    }
                }
            }
        }
    }
}

pub(crate) fn render_one(profile: &str, name: &str, definition: Option<&Value>) -> Markup {
    html! {
        p { a href={ "tools?profile=" (enc(profile)) } { "← all tools of " (profile) } }
        h2 { (name) }
        @match definition {
            Some(d) => {
                @if let Some(desc) = d.get("description").and_then(Value::as_str) {
                    p.description { (desc) }
                }
                h3 { "input schema" }
                (json_block(d.get("inputSchema").unwrap_or(&Value::Null)))
                @if let Some(a) = d.get("annotations") {
                    h3 { "annotations" }
                    (json_block(a))
                }
            },
            None => p.error { "profile " (profile) " shows no tool of that name" },
        }
    }
}

/// A query string's value.
pub(crate) fn enc(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}
