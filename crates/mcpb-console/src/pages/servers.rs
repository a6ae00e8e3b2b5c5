//! Servers: each upstream's state, lifecycle, sandbox, processes, calls and errors, its last
//! error and the tail of its stderr, with start / stop / restart.

use maud::{Markup, html};
use serde_json::Value;

use super::{csrf_field, ms, text};
use crate::backend::UpstreamAction;

pub(crate) fn render(status: &Value, csrf: &str) -> Markup {
    let empty = Vec::new();
    let upstreams = status
        .get("upstreams")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    let calls = &status["calls"]["upstreams"];
    let daemon = &status["daemon"];
    html! {
        p.summary {
            "daemon " (daemon["pid"]) " · version " (text(daemon, "version"))
            " · " (daemon["sessions"]) " session(s) · " (daemon["inflight_calls"]) " call(s) in flight"
            " · config " (text(daemon, "config"))
        }
        @if upstreams.is_empty() {
            p { "No upstream is configured." }
        }
        table #servers {
            thead { tr {
                th { "upstream" } th { "state" } th { "lifecycle" } th { "sandbox" }
                th { "processes" } th { "calls" } th { "errors" } th { "p50" } th { "p99" } th { "" }
            } }
            tbody {
                @for up in upstreams {
                    @let name = text(up, "name");
                    @let c = &calls[name];
                    tr id={ "server-" (name) } class={ "state-" (text(up, "state")) } {
                        td.name { (name) }
                        td.state title=[up["stopped_because"].as_str()] { (state_of(up)) }
                        td { (text(up, "lifecycle")) }
                        td { (sandbox(up)) }
                        td { (processes(up)) }
                        td { (c["calls"].as_u64().unwrap_or(0)) }
                        td { (c["errors"].as_u64().unwrap_or(0)) }
                        td { (ms(c["p50_ms"].as_f64())) }
                        td { (ms(c["p99_ms"].as_f64())) }
                        td.actions {
                            @for a in UpstreamAction::ALL {
                                form method="post" action="servers" {
                                    (csrf_field(csrf))
                                    input type="hidden" name="upstream" value=(name);
                                    button type="submit" name="action" value=(a.as_str()) { (a.as_str()) }
                                }
                            }
                        }
                    }
                    @let error = up["last_error"].as_str().or_else(|| c["last_error"].as_str());
                    @let tail = up["stderr_tail"].as_array().filter(|t| !t.is_empty());
                    @if error.is_some() || tail.is_some() {
                        tr.detail { td colspan="10" {
                            @if let Some(e) = error {
                                p.error { "last error: " (e) }
                            }
                            @if let Some(t) = tail {
                                details {
                                    summary { "stderr (last " (t.len()) " lines)" }
                                    pre.stderr { @for l in t { (l.as_str().unwrap_or("")) "\n" } }
                                }
                            }
                        } }
                    }
                }
            }
        }
    }
}

/// The state, with why a stopped server is not running (it starts on first use, or was idle).
fn state_of(up: &Value) -> String {
    let state = text(up, "state");
    if state != "stopped" {
        return state.to_string();
    }
    match up["stopped_because"].as_str() {
        Some(why) if why.starts_with("starts on first use") => "not started: starts on use".into(),
        Some(why) if why.starts_with("idle") => "stopped: idle".into(),
        Some(why) => format!("{state}: {why}"),
        None => state.to_string(),
    }
}

fn sandbox(up: &Value) -> String {
    match (
        up.get("sandboxed").and_then(Value::as_bool),
        up.get("sandbox"),
    ) {
        (_, Some(s)) if s.is_object() => format!(
            "yes: {} read, {} write, network {}",
            s["read"].as_array().map_or(0, Vec::len),
            s["write"].as_array().map_or(0, Vec::len),
            if s["network"].as_bool() == Some(true) {
                "on"
            } else {
                "off"
            }
        ),
        (Some(true), _) => "yes".into(),
        (Some(false), _) => "no".into(),
        (None, _) => "remote".into(),
    }
}

fn processes(up: &Value) -> String {
    let pids: Vec<String> = up["pids"]
        .as_array()
        .map(|a| a.iter().map(ToString::to_string).collect())
        .unwrap_or_default();
    if pids.is_empty() {
        "none".into()
    } else {
        pids.join(" ")
    }
}
