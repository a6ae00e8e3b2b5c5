//! `mcp-broker top`: a live view of the daemon for people: sessions, calls in flight, and per
//! upstream its state, processes, calls per second, errors and latency percentiles, redrawn
//! every interval from `status` (which never starts anything). Ctrl-C ends it.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use mcpb_config::Settings;
use mcpb_protocol::AdminCommand;
use serde_json::Value;

use crate::commands::render::{human_ms, latency, table};
use crate::daemon_client::admin;

/// The previous frame's call counts, for rates.
struct Before {
    at: Instant,
    data: Value,
}

fn count(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// Calls per second between two counts `secs` apart.
fn rate(now: u64, before: Option<u64>, secs: f64) -> String {
    match before {
        Some(b) if secs > 0.0 => format!("{:.1}", now.saturating_sub(b) as f64 / secs),
        _ => "-".into(),
    }
}

/// One screen of `top` from a status report, with rates against `before` (`secs` earlier).
pub(crate) fn render_frame(data: &Value, before: Option<&Value>, secs: f64) -> String {
    let d = &data["daemon"];
    let calls = &data["calls"];
    let total = count(&calls["total"]);
    let mut out = format!(
        "mcp-broker top: pid {}, up {}, {} session(s), {} call(s) in flight, {} call(s) ({}/s), {} error(s)\n\n",
        d["pid"],
        human_ms(count(&d["uptime_ms"])),
        count(&d["sessions"]),
        count(&d["inflight_calls"]),
        total,
        rate(total, before.map(|b| count(&b["calls"]["total"])), secs),
        count(&calls["errors"]),
    );
    let rows = data["upstreams"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|u| {
            let name = u["name"].as_str().unwrap_or("");
            let c = &calls["upstreams"][name];
            let was = before.map(|b| count(&b["calls"]["upstreams"][name]["calls"]));
            // The upstream's own failure first; else its newest failed call.
            let last = u["last_error"]
                .as_str()
                .or_else(|| c["last_error"].as_str())
                .unwrap_or("");
            let mut last = crate::printable(last);
            mcpb_facade::projection::cut_chars(&mut last, 60);
            vec![
                name.to_string(),
                u["state"].as_str().unwrap_or("").to_string(),
                u["pids"].as_array().map_or(0, Vec::len).to_string(),
                count(&u["session_count"]).to_string(),
                count(&c["calls"]).to_string(),
                rate(count(&c["calls"]), was, secs),
                count(&c["errors"]).to_string(),
                latency(&c["p50_ms"]),
                latency(&c["p99_ms"]),
                last,
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "UPSTREAM",
            "STATE",
            "PROCS",
            "SESSIONS",
            "CALLS",
            "CALLS/S",
            "ERRORS",
            "P50",
            "P99",
            "LAST ERROR",
        ],
        rows,
    ));
    out
}

/// Redraws every `interval` until Ctrl-C, or `frames` times when given.
pub(crate) fn top(settings: &Settings, interval: Duration, frames: Option<u64>) -> ExitCode {
    // Faster than this is a busy loop for nobody's eyes.
    let interval = interval.max(Duration::from_millis(100));
    let terminal = std::io::stdout().is_terminal();
    let mut before: Option<Before> = None;
    let mut shown = 0u64;
    let mut reached = false;
    loop {
        let screen = match admin(settings, AdminCommand::Status) {
            Ok(Some(r)) if r.ok => match r.data {
                Some(data) => {
                    reached = true;
                    let secs = before
                        .as_ref()
                        .map_or(0.0, |b| b.at.elapsed().as_secs_f64());
                    let text = render_frame(&data, before.as_ref().map(|b| &b.data), secs);
                    before = Some(Before {
                        at: Instant::now(),
                        data,
                    });
                    text
                }
                None => "mcp-broker top: the daemon sent no status\n".into(),
            },
            Ok(Some(r)) => format!(
                "mcp-broker top: status refused: {}\n",
                r.error.unwrap_or_default()
            ),
            Ok(None) => {
                before = None;
                format!(
                    "mcp-broker top: no daemon is running (socket {}); waiting for one\n",
                    settings.runtime.socket_path().display()
                )
            }
            Err(e) => format!("mcp-broker top: {e:#}\n"),
        };
        // Home and clear, so each frame replaces the last; a pipe gets frames one after another.
        if terminal {
            crate::out::write_trusted("\x1b[H\x1b[2J");
            out!("{screen}");
        } else {
            out!("{screen}\n");
        }
        shown += 1;
        if frames.is_some_and(|n| shown >= n) {
            // A script that asked for frames learns whether any showed a daemon.
            return if reached {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(3)
            };
        }
        std::thread::sleep(interval);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_with_rates() {
        let before =
            serde_json::json!({"calls": {"total": 100, "upstreams": {"example": {"calls": 90}}}});
        let data = serde_json::json!({
            "daemon": {"pid": 4242, "uptime_ms": 93_500, "sessions": 2, "inflight_calls": 1},
            "upstreams": [
                {"name": "example", "state": "running", "pids": [4250], "session_count": 0, "last_error": null},
                {"name": "git", "state": "failed", "pids": [], "session_count": 0,
                 "last_error": "upstream 'git' could not start `uvx`: No such file or directory (os error 2)"},
                {"name": "scratch", "state": "running", "pids": [4260, 4261], "session_count": 2, "last_error": null}
            ],
            "calls": {"total": 120, "errors": 3, "upstreams": {
                "example": {"calls": 110, "errors": 1, "p50_ms": 0.213, "p99_ms": 12.5},
                "git": {"calls": 2, "errors": 2, "p50_ms": 1500.0, "p99_ms": 30000.0},
                "scratch": {"calls": 8, "errors": 0, "p50_ms": 3.1, "p99_ms": 9.0}
            }}
        });
        insta::assert_snapshot!(render_frame(&data, Some(&before), 2.0));
    }

    #[test]
    fn first_frame_has_no_rates() {
        let data = serde_json::json!({"daemon": {}, "upstreams": [{"name": "a", "state": "stopped"}], "calls": {}});
        let text = render_frame(&data, None, 0.0);
        assert!(text.contains("0 call(s) (-/s)"), "{text}");
        let row = text.lines().find(|l| l.starts_with("a ")).unwrap();
        assert!(row.contains("stopped"), "{row}");
    }
}
