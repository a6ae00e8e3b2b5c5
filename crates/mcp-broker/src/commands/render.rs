//! What several commands print alike: tables, durations, latencies and the status page.

use serde_json::Value;

/// A duration for people: whole seconds, `2h 5m 3s`.
pub(crate) fn human_ms(ms: u64) -> String {
    humantime::format_duration(std::time::Duration::from_secs(ms / 1000)).to_string()
}

/// A table of `rows` under `header`, columns apart by spaces, no borders.
pub(crate) fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    // A cell is one line, whatever a server put in a name: a line break in it would forge a
    // line of the table (or of what follows it).
    let rows: Vec<Vec<String>> = rows
        .into_iter()
        .map(|r| {
            r.into_iter()
                .map(|c| crate::printable(&c).replace('\n', "\\n"))
                .collect()
        })
        .collect();
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::NOTHING)
        .set_header(header.to_vec())
        .add_rows(rows);
    for col in t.column_iter_mut() {
        col.set_padding((0, 2));
    }
    let text = t.to_string();
    let mut out: String = text
        .lines()
        .map(|l| format!("{}\n", l.trim_end()))
        .collect();
    if out.is_empty() {
        out.push('\n');
    }
    out
}

/// `mcp-broker status` for people: the daemon, then a table of upstreams, calls and the catalog's
/// findings, with what to do about them.
pub(crate) fn render_status(data: &Value) -> String {
    let d = &data["daemon"];
    let mut out = format!(
        "daemon: running, pid {}, version {}, up {}\nconfig: {}\nsocket: {}\nlog: {}\nsessions: {} (max {}{}), calls in flight: {}\n\n",
        d["pid"],
        d["version"].as_str().unwrap_or(""),
        human_ms(d["uptime_ms"].as_u64().unwrap_or(0)),
        d["config"].as_str().unwrap_or(""),
        d["socket"].as_str().unwrap_or(""),
        d["log"].as_str().unwrap_or("-"),
        d["sessions"],
        d["max_clients"],
        match d["waiting_sessions"].as_u64() {
            Some(n) if n > 0 => format!("; {n} waiting for a slot"),
            _ => String::new(),
        },
        d["inflight_calls"],
    );
    if let Some(w) = d["config_warning"].as_str() {
        out.push_str(&format!("warning: {w}\n\n"));
    }
    let ups: Vec<&Value> = data["upstreams"].as_array().into_iter().flatten().collect();
    out.push_str(&upstream_table(data, &ups));
    upstream_notes(&mut out, &ups);
    catalog_notes(&mut out, &data["catalog"]);
    // Names, errors and findings come from upstreams: never raw control characters.
    crate::printable(&out)
}

/// One row per upstream: its state, process, tools, starts and calls.
fn upstream_table(data: &Value, ups: &[&Value]) -> String {
    let dash = |v: &Value| v.as_u64().map_or("-".to_string(), |n| n.to_string());
    let rows = ups
        .iter()
        .map(|u| {
            let name = u["name"].as_str().unwrap_or("");
            let calls = &data["calls"]["upstreams"][name];
            vec![
                name.to_string(),
                state_of(u),
                dash(&u["pid"]),
                dash(&u["tool_count"]),
                dash(&u["starts"]),
                dash(&u["failures"]),
                dash(&calls["calls"]),
                dash(&calls["errors"]),
                latency(&calls["p50_ms"]),
            ]
        })
        .collect();
    table(
        &[
            "UPSTREAM", "STATE", "PID", "TOOLS", "STARTS", "FAILURES", "CALLS", "ERRORS", "P50",
        ],
        rows,
    )
}

/// An upstream's state, with why a stopped one is not running: it starts on first use, or it
/// was stopped after being idle (`status --json` has the whole reason).
fn state_of(u: &Value) -> String {
    let state = u["state"].as_str().unwrap_or("");
    if state != "stopped" {
        return state.to_string();
    }
    match u["stopped_because"].as_str() {
        Some(why) if why.starts_with("starts on first use") => "not started (on use)".into(),
        Some(why) if why.starts_with("idle") => "stopped (idle)".into(),
        Some(_) | None => state.to_string(),
    }
}

/// Under the table: each upstream's last error (with what it said), sandbox and refused tools.
fn upstream_notes(out: &mut String, ups: &[&Value]) {
    for u in ups {
        let name = u["name"].as_str().unwrap_or("");
        if let Some(err) = u["last_error"].as_str() {
            out.push_str(&format!("{name}: last error: {err}\n"));
            // What the server itself said last, where the reason usually is.
            for line in last_lines(&u["stderr_tail"], 3) {
                out.push_str(&format!("{name}:   stderr: {line}\n"));
            }
            out.push_str(&format!("hint: more with `mcp-broker logs {name}`\n"));
        }
        if u["sandbox"].is_object() {
            out.push_str(&format!("{name}: {}\n", sandbox_line(&u["sandbox"])));
        }
        for r in u["rejected_tools"].as_array().into_iter().flatten() {
            out.push_str(&format!(
                "{name}: refused tool {}: {}\n",
                r["tool"].as_str().unwrap_or(""),
                r["reason"].as_str().unwrap_or("")
            ));
        }
    }
    let open: Vec<&str> = ups
        .iter()
        .filter(|u| u["sandboxed"] == false)
        .filter_map(|u| u["name"].as_str())
        .collect();
    if !open.is_empty() {
        out.push_str(&format!(
            "not sandboxed: {} (sandbox: standard runs one in the sandbox)\n",
            open.join(", ")
        ));
    }
}

/// The catalog's pins: what is quarantined, what was found in definitions.
fn catalog_notes(out: &mut String, c: &Value) {
    if let Some(e) = c["pin_store_error"].as_str() {
        out.push_str(&format!(
            "pins: store unreadable, every tool quarantined: {e}\n"
        ));
    }
    for q in c["quarantined"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "quarantined: {} ({})\n",
            q["tool"].as_str().unwrap_or(""),
            q["reason"].as_str().unwrap_or("")
        ));
    }
    for f in c["findings"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "finding: {}: {}: {}\n",
            f["tool"].as_str().unwrap_or(""),
            f["kind"].as_str().unwrap_or(""),
            f["detail"].as_str().unwrap_or("")
        ));
    }
    if c["quarantined"].as_array().is_some_and(|q| !q.is_empty()) {
        out.push_str("hint: review with `mcp-broker pins list`, approve with `mcp-broker pins approve <upstream>.<tool>`\n");
    }
}

/// A latency in milliseconds as people read it: `0.21 ms`, `35 ms`, `1.2 s`; `-` when none.
pub(crate) fn latency(v: &Value) -> String {
    match v.as_f64() {
        None => "-".into(),
        Some(ms) if ms >= 1000.0 => format!("{:.1} s", ms / 1000.0),
        Some(ms) if ms >= 10.0 => format!("{ms:.0} ms"),
        Some(ms) => format!("{ms:.2} ms"),
    }
}

/// The last `n` non-empty lines of a JSON array of strings.
pub(crate) fn last_lines(v: &Value, n: usize) -> Vec<&str> {
    let lines: Vec<&str> = v
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|l| !l.trim().is_empty())
        .collect();
    lines[lines.len().saturating_sub(n)..].to_vec()
}

/// A sandboxed server's grants in one line: `sandboxed, network none; writes /data; reads ~/.nvm`.
pub(crate) fn sandbox_line(sb: &Value) -> String {
    let list = |k: &str| {
        sb[k]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(|p| crate::out::one_line(p).into_owned())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut line = format!(
        "sandboxed, network {}",
        if sb["network"] == true {
            "host"
        } else {
            "none"
        }
    );
    for (verb, key) in [("writes", "write"), ("reads", "read")] {
        let l = list(key);
        if !l.is_empty() {
            line.push_str(&format!("; {verb} {l}"));
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_text() {
        let data = serde_json::json!({
            "daemon": {"pid": 4242, "version": "0.1.0", "uptime_ms": 93_500, "config": "/home/u/mcp/mcp-broker/broker.yaml",
                "socket": "/home/u/mcp/mcp-broker/sockets/broker.sock", "log": "/home/u/mcp/mcp-broker/logs/daemon.log", "sessions": 2, "max_clients": 256, "inflight_calls": 1},
            "upstreams": [
                {"name": "example", "state": "running", "pid": 4250, "tool_count": 4, "starts": 1, "failures": 0, "last_error": null},
                {"name": "github", "state": "stopped", "pid": null, "tool_count": null, "last_error": null},
                {"name": "broken", "state": "failed", "pid": null, "tool_count": null,
                 "starts": 0, "failures": 3, "stderr_tail": ["", "Traceback (most recent call last):", "ModuleNotFoundError: No module named 'mcp'"],
                 "last_error": "upstream 'broken' could not start `/opt/none`: No such file or directory (os error 2)"}
            ],
            "calls": {"total": 12, "errors": 1, "upstreams": {"example": {"calls": 12, "errors": 1, "p50_ms": 0.31}}},
            "catalog": {
                "quarantined": [{"tool": "github.create_issue", "reason": "definition changed since it was approved"}],
                "findings": [{"tool": "github.create_issue", "kind": "instruction", "detail": "contains \"ignore previous\""}]
            }
        });
        insta::assert_snapshot!(render_status(&data));
    }
}
