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

/// One metric family: its help and type lines, then its samples (`{labels} value`).
fn family(out: &mut String, name: &str, kind: &str, help: &str, samples: &[(String, f64)]) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for (labels, v) in samples {
        let _ = writeln!(out, "{name}{labels} {v}");
    }
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

const UP_HELP: &str = "Whether the daemon answers.";

/// The metrics text of a status report (`None`: no daemon).
pub(crate) fn render(status: Option<&Value>) -> String {
    let mut out = String::new();
    let Some(s) = status else {
        family(
            &mut out,
            "mcp_broker_up",
            "gauge",
            UP_HELP,
            &[(String::new(), 0.0)],
        );
        return out;
    };
    let d = &s["daemon"];
    for (name, help, value) in [
        ("mcp_broker_up", UP_HELP, 1.0),
        (
            "mcp_broker_uptime_seconds",
            "Seconds since the daemon started.",
            num(&d["uptime_ms"]) / 1000.0,
        ),
        (
            "mcp_broker_sessions",
            "Client sessions open.",
            num(&d["sessions"]),
        ),
        (
            "mcp_broker_calls_in_flight",
            "Tool calls being served.",
            num(&d["inflight_calls"]),
        ),
    ] {
        family(&mut out, name, "gauge", help, &[(String::new(), value)]);
    }
    upstreams(&mut out, s);
    let quarantined = s["catalog"]["quarantined"]
        .as_array()
        .map_or(0.0, |q| q.len() as f64);
    family(
        &mut out,
        "mcp_broker_quarantined_tools",
        "gauge",
        "Tools held back until a person approves them.",
        &[(String::new(), quarantined)],
    );
    out
}

/// A per-upstream family: name, type, help, and the sample of one upstream's status.
type Family = (&'static str, &'static str, &'static str, fn(&Value) -> f64);

/// The families with one sample per upstream.
fn upstreams(out: &mut String, s: &Value) {
    let ups: Vec<&Value> = s["upstreams"].as_array().into_iter().flatten().collect();
    let name = |u: &Value| label(u["name"].as_str().unwrap_or(""));
    let states: Vec<(String, f64)> = ups
        .iter()
        .map(|u| {
            let state = u["state"].as_str().unwrap_or("");
            (
                format!("{{upstream=\"{}\",state=\"{}\"}}", name(u), label(state)),
                if state == "running" { 1.0 } else { 0.0 },
            )
        })
        .collect();
    family(
        out,
        "mcp_broker_upstream_up",
        "gauge",
        "Whether the upstream runs (its state as a label).",
        &states,
    );
    let families: [Family; 4] = [
        (
            "mcp_broker_upstream_starts_total",
            "counter",
            "Starts since the daemon started.",
            |u| num(&u["starts"]),
        ),
        (
            "mcp_broker_upstream_failures_total",
            "counter",
            "Unexpected exits and failed starts since the daemon started.",
            |u| num(&u["failures"]),
        ),
        (
            "mcp_broker_upstream_tools",
            "gauge",
            "Tools in the upstream's last list.",
            |u| num(&u["tool_count"]),
        ),
        (
            "mcp_broker_upstream_processes",
            "gauge",
            "Processes running for the upstream.",
            |u| u["pids"].as_array().map_or(0.0, |p| p.len() as f64),
        ),
    ];
    for (family_name, kind, help, value) in families {
        let samples: Vec<(String, f64)> = ups
            .iter()
            .map(|u| (format!("{{upstream=\"{}\"}}", name(u)), value(u)))
            .collect();
        family(out, family_name, kind, help, &samples);
    }
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
