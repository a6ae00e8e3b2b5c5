//! `mcp-broker metrics`: the daemon's state in the Prometheus text format, for a scraper's
//! textfile collector or a person; never starts anything. A daemon that is not running is
//! `mcp_broker_up 0`, not an error, so a scrape of a stopped broker still reads.

use std::fmt::Write;
use std::process::ExitCode;

use mcpb_config::Settings;
use mcpb_protocol::AdminCommand;
use serde_json::Value;

use crate::daemon_client::admin;

/// A label value with `\`, `"` and newlines escaped, as the format asks.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The metrics text of a status report (`None`: no daemon).
pub(crate) fn render(status: Option<&Value>) -> String {
    let mut out = String::new();
    let mut family = |name: &str, kind: &str, help: &str, samples: &[(String, f64)]| {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for (labels, v) in samples {
            let _ = writeln!(out, "{name}{labels} {v}");
        }
    };
    let Some(s) = status else {
        family(
            "mcp_broker_up",
            "gauge",
            "Whether the daemon answers.",
            &[(String::new(), 0.0)],
        );
        return out;
    };
    let d = &s["daemon"];
    let num = |v: &Value| v.as_f64().unwrap_or(0.0);
    family(
        "mcp_broker_up",
        "gauge",
        "Whether the daemon answers.",
        &[(String::new(), 1.0)],
    );
    family(
        "mcp_broker_uptime_seconds",
        "gauge",
        "Seconds since the daemon started.",
        &[(String::new(), num(&d["uptime_ms"]) / 1000.0)],
    );
    family(
        "mcp_broker_sessions",
        "gauge",
        "Client sessions open.",
        &[(String::new(), num(&d["sessions"]))],
    );
    family(
        "mcp_broker_calls_in_flight",
        "gauge",
        "Tool calls being served.",
        &[(String::new(), num(&d["inflight_calls"]))],
    );
    let ups: Vec<&Value> = s["upstreams"].as_array().into_iter().flatten().collect();
    let per = |f: &dyn Fn(&Value) -> f64| -> Vec<(String, f64)> {
        ups.iter()
            .map(|u| {
                (
                    format!(
                        "{{upstream=\"{}\"}}",
                        label(u["name"].as_str().unwrap_or(""))
                    ),
                    f(u),
                )
            })
            .collect()
    };
    let states: Vec<(String, f64)> = ups
        .iter()
        .map(|u| {
            let state = u["state"].as_str().unwrap_or("");
            (
                format!(
                    "{{upstream=\"{}\",state=\"{}\"}}",
                    label(u["name"].as_str().unwrap_or("")),
                    label(state)
                ),
                if state == "running" { 1.0 } else { 0.0 },
            )
        })
        .collect();
    family(
        "mcp_broker_upstream_up",
        "gauge",
        "Whether the upstream runs (its state as a label).",
        &states,
    );
    family(
        "mcp_broker_upstream_starts_total",
        "counter",
        "Starts since the daemon started.",
        &per(&|u| num(&u["starts"])),
    );
    family(
        "mcp_broker_upstream_failures_total",
        "counter",
        "Unexpected exits and failed starts since the daemon started.",
        &per(&|u| num(&u["failures"])),
    );
    family(
        "mcp_broker_upstream_tools",
        "gauge",
        "Tools in the upstream's last list.",
        &per(&|u| num(&u["tool_count"])),
    );
    family(
        "mcp_broker_upstream_processes",
        "gauge",
        "Processes running for the upstream.",
        &per(&|u| u["pids"].as_array().map_or(0.0, |p| p.len() as f64)),
    );
    let quarantined = s["catalog"]["quarantined"]
        .as_array()
        .map_or(0.0, |q| q.len() as f64);
    family(
        "mcp_broker_quarantined_tools",
        "gauge",
        "Tools held back until a person approves them.",
        &[(String::new(), quarantined)],
    );
    out
}

pub(crate) fn run(settings: &Settings) -> ExitCode {
    let status = admin(settings, AdminCommand::Status)
        .ok()
        .flatten()
        .and_then(|r| r.data);
    out!("{}", render(status.as_ref()));
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn metrics_read_as_prometheus_text() {
        let status = json!({
            "daemon": {"uptime_ms": 93_500, "sessions": 2, "inflight_calls": 1},
            "upstreams": [
                {"name": "example", "state": "running", "starts": 1, "failures": 0, "tool_count": 4, "pids": [42]},
                {"name": "od\"d", "state": "failed", "starts": 0, "failures": 3, "tool_count": null, "pids": []}
            ],
            "catalog": {"quarantined": [{"tool": "x.y"}]}
        });
        insta::assert_snapshot!(super::render(Some(&status)));
        assert_eq!(
            super::render(None),
            "# HELP mcp_broker_up Whether the daemon answers.\n# TYPE mcp_broker_up gauge\nmcp_broker_up 0\n"
        );
    }
}
