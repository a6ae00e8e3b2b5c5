//! Context: what each profile (and so each client mapped to it) puts into a model's context,
//! before (every tool of its upstreams) and after (what the profile exposes), in tool
//! definitions and o200k tokens: `mcp-broker measure`'s figures, run from here on request.

use std::collections::HashMap;

use maud::{Markup, html};
use serde_json::Value;

use super::charts;
use super::csrf_field;

/// A profile's last measurement: what `measure --json` printed, or why it failed.
pub(crate) type Measured = HashMap<String, Result<Value, String>>;

fn before(m: &Value) -> (u64, u64) {
    m["upstreams"].as_array().map_or((0, 0), |ups| {
        ups.iter().fold((0, 0), |(t, k), u| {
            (
                t + u["tools"].as_u64().unwrap_or(0),
                k + u["tokens"].as_u64().unwrap_or(0),
            )
        })
    })
}

pub(crate) fn render(
    profiles: &[(String, Vec<String>)],
    measured: &Measured,
    csrf: &str,
) -> Markup {
    html! {
        p { "Measuring starts the upstreams whose tool lists are not known yet." }
        @for (profile, clients) in profiles {
            section.profile id={ "profile-" (profile) } {
                h2 { (profile) }
                p.summary {
                    "clients: "
                    @if clients.is_empty() { "none mapped (any client may ask for it by name)" }
                    @else { (clients.join(", ")) }
                }
                @match measured.get(profile) {
                    None => p { "not measured yet" },
                    Some(Err(e)) => p.error { (e) },
                    Some(Ok(m)) => {
                        @let (tools_before, tokens_before) = before(m);
                        @let tools_after = m["after"]["tools"].as_u64().unwrap_or(0);
                        @let tokens_after = m["after"]["tokens"].as_u64().unwrap_or(0);
                        table.context {
                            thead { tr { th { "" } th { "tool definitions" } th { "o200k tokens" } } }
                            tbody {
                                tr { td { "before (every upstream tool)" } td { (tools_before) } td.before { (tokens_before) } }
                                tr { td { "after (what the profile exposes)" } td { (tools_after) } td.after { (tokens_after) } }
                            }
                        }
                        (charts::pair(tokens_before as f64, tokens_after as f64, "tokens before", "tokens after"))
                        details {
                            summary { "per upstream" }
                            table {
                                thead { tr { th { "upstream" } th { "tools" } th { "tokens" } } }
                                tbody {
                                    @for u in m["upstreams"].as_array().into_iter().flatten() {
                                        tr { td { (super::text(u, "name")) } td { (u["tools"]) } td { (u["tokens"]) } }
                                    }
                                }
                            }
                        }
                    }
                }
                form method="post" action="context" {
                    (csrf_field(csrf))
                    input type="hidden" name="profile" value=(profile);
                    button type="submit" { "measure" }
                }
            }
        }
    }
}
