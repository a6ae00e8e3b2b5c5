//! Trust: quarantined tools with what the scanner found and how the definition changed, each
//! approved or rejected with one click (which runs `mcp-broker pins approve` or `pins reject`).

use maud::{Markup, html};
use serde_json::Value;

use super::{csrf_field, text};

/// `pins`: what `mcp-broker pins list --json` printed.
pub(crate) fn render(pins: &Result<Value, String>, csrf: &str) -> Markup {
    let pins = match pins {
        Ok(p) => p,
        Err(e) => return html! { p.error { (e) } },
    };
    let empty = Vec::new();
    let tools = pins["tools"].as_array().unwrap_or(&empty);
    let held = |t: &&Value| !t["quarantine"].is_null();
    let quarantined: Vec<&Value> = tools
        .iter()
        .filter(held)
        .filter(|t| t["rejected"] != true)
        .collect();
    let rejected: Vec<&Value> = tools
        .iter()
        .filter(held)
        .filter(|t| t["rejected"] == true)
        .collect();
    let flagged: Vec<&Value> = tools
        .iter()
        .filter(|t| {
            t["quarantine"].is_null() && t["findings"].as_array().is_some_and(|f| !f.is_empty())
        })
        .collect();
    html! {
        @if let Some(e) = pins["pin_store_error"].as_str() {
            p.error { "the pin store is unreadable, every tool is quarantined: " (e) }
            p { "hint: fix the file, or start over with " code { "mcp-broker pins approve --all --reset" } }
        }
        p.summary {
            (tools.len()) " tool(s) cached, " (quarantined.len()) " quarantined"
            @if !rejected.is_empty() { ", " (rejected.len()) " rejected" }
        }
        @if quarantined.is_empty() {
            p #no-quarantine { "Nothing is quarantined." }
        }
        @for t in &quarantined {
            @let name = text(t, "tool");
            section.quarantined id={ "q-" (name) } {
                h2 { (name) }
                p { "quarantined: " (t["why"].as_str().map_or_else(|| t["quarantine"].to_string(), str::to_string)) }
                (findings(t))
                @if let Some(d) = t["diff"].as_str().filter(|d| !d.is_empty()) {
                    details open {
                        summary { "definition: what changed" }
                        pre.diff { (d) }
                    }
                }
                (verdicts(name, text(t, "hash"), csrf, true))
            }
        }
        @if !rejected.is_empty() {
            h2 { "rejected" }
            p { "Hidden until their definition changes; approve one if you change your mind." }
            @for t in &rejected {
                @let name = text(t, "tool");
                section.rejected id={ "r-" (name) } {
                    h3 { (name) }
                    (findings(t))
                    (verdicts(name, text(t, "hash"), csrf, false))
                }
            }
        }
        @if !flagged.is_empty() {
            h2 { "approved, with findings" }
            @for t in &flagged {
                section.flagged { h3 { (text(t, "tool")) } (findings(t)) }
            }
        }
    }
}

/// The approve (and reject) buttons of one tool, for the definition shown (`hash`): a
/// definition that changed after the page was built is not approved unseen.
fn verdicts(name: &str, hash: &str, csrf: &str, reject: bool) -> Markup {
    html! {
        form.verdict method="post" action="trust" {
            (csrf_field(csrf))
            input type="hidden" name="tool" value=(name);
            input type="hidden" name="hash" value=(hash);
            button type="submit" name="verdict" value="approve" { "approve" }
            @if reject {
                button type="submit" name="verdict" value="reject" { "reject" }
            }
        }
    }
}

fn findings(t: &Value) -> Markup {
    let empty = Vec::new();
    let list = t["findings"].as_array().unwrap_or(&empty);
    html! {
        @if !list.is_empty() {
            ul.findings {
                @for f in list {
                    li {
                        @if f["severity"] == "note" { "note: " }
                        strong { (text(f, "kind")) } ": " (text(f, "detail"))
                    }
                }
            }
        }
    }
}
