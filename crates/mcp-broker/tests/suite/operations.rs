//! Running the broker as a service: the audit log records every call (raw, facade, failed) with
//! who made it and no argument values unless asked, `top` draws a live view in a terminal, and
//! `parity` tells whether two profiles discover the same tools.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use super::support::{Home, fixture_config, session, upstream_status, wait_until};

fn audit_lines(home: &Home) -> Vec<Value> {
    std::fs::read_to_string(home.root().join("logs/audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn every_call_is_audited_with_who_and_how_it_ended_without_argument_values() {
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    let mut shim = session(&home);
    let r = shim.call("fx.echo", json!({"text": "a secret value"}));
    assert_eq!(r["result"]["content"][0]["text"], "a secret value", "{r}");
    let r = shim.call("fx.crash", json!({"code": 3}));
    assert!(
        r["error"].is_object() || r["result"]["isError"] == true,
        "{r}"
    );
    let out = home.run(&[
        "tools",
        "call",
        "fx.echo",
        "--args",
        r#"{"text": "via the facade"}"#,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        wait_until(Duration::from_secs(5), || audit_lines(&home).len() >= 3),
        "{:?}",
        audit_lines(&home)
    );
    let lines = audit_lines(&home);
    let raw = &lines[0];
    assert_eq!(raw["tool"], "fx.echo");
    assert_eq!(raw["upstream"], "fx");
    assert_eq!(raw["via"], "raw");
    assert_eq!(raw["client"], "test-client");
    assert_eq!(raw["profile"], "default");
    assert_eq!(raw["outcome"], "ok");
    assert!(raw["ms"].as_f64().unwrap() >= 0.0 && raw["result_bytes"].as_u64().unwrap() > 0);
    assert!(raw["ts"].as_str().unwrap().ends_with('Z'), "{raw}");
    assert_eq!(lines[1]["tool"], "fx.crash");
    assert_eq!(lines[1]["outcome"], "error");
    assert!(lines[1]["error"].as_str().is_some(), "{}", lines[1]);
    assert_eq!(lines[2]["via"], "facade");
    assert_eq!(lines[2]["client"], "mcp-broker-cli");
    let text = std::fs::read_to_string(home.root().join("logs/audit.jsonl")).unwrap();
    assert!(
        !text.contains("a secret value") && !text.contains("arguments"),
        "{text}"
    );
    // Status counts the same calls.
    let status = home.status();
    assert_eq!(status["calls"]["upstreams"]["fx"]["calls"], 3, "{status}");
    assert_eq!(status["calls"]["upstreams"]["fx"]["errors"], 1, "{status}");
    assert!(
        status["calls"]["upstreams"]["fx"]["p50_ms"]
            .as_f64()
            .is_some()
    );
}

#[test]
fn a_cancelled_call_and_one_whose_client_went_away_are_audited_as_abandoned() {
    // The calls must still be running when the cancel and the disconnect come: on a loaded
    // machine, seeing a call in flight through `status` can take longer than the suite's
    // usual 2 s call timeout, and a call that timed out is audited as the error it is.
    let yaml = fixture_config(&[("fx", "")], "")
        .replace("call_timeout_ms: 2000", "call_timeout_ms: 60000");
    let home = Home::with_config(&yaml);
    let mut shim = session(&home);
    let sleep = json!({"name": "fx.sleep", "arguments": {"ms": 30000}});
    let in_flight = |n: i64| {
        wait_until(Duration::from_secs(10), || {
            upstream_status(&home, "fx")["active_call_count"] == n
        })
    };
    shim.send_request(1, "tools/call", sleep.clone());
    assert!(in_flight(1), "{}", home.status());
    shim.cancel(1);
    assert!(wait_until(Duration::from_secs(10), || audit_lines(&home)
        .len()
        == 1));
    // The cancelled call is through before the next is watched for: else the count of one
    // could still be the first's, and the session could close before the second arrived.
    assert!(in_flight(0), "{}", home.status());
    shim.send_request(2, "tools/call", sleep);
    assert!(in_flight(1), "{}", home.status());
    drop(shim);
    assert!(
        wait_until(Duration::from_secs(10), || audit_lines(&home).len() == 2),
        "{:?}",
        audit_lines(&home)
    );
    for line in audit_lines(&home) {
        assert_eq!(line["tool"], "fx.sleep", "{line}");
        assert_eq!(line["outcome"], "abandoned", "{line}");
        assert!(
            line["error"].as_str().unwrap().contains("no answer"),
            "{line}"
        );
    }
    // Counted as calls, not as the upstream's errors.
    let status = home.status();
    assert_eq!(status["calls"]["upstreams"]["fx"]["calls"], 2, "{status}");
    assert_eq!(status["calls"]["upstreams"]["fx"]["errors"], 0, "{status}");
}

#[test]
fn argument_values_are_audited_only_when_configured_and_the_log_can_be_turned_off() {
    let yaml = fixture_config(&[("fx", "")], "")
        .replace("broker: {", "broker: {audit: {arguments: true}, ");
    let home = Home::with_config(&yaml);
    let mut shim = session(&home);
    shim.call("fx.echo", json!({"text": "kept on purpose"}));
    assert!(wait_until(Duration::from_secs(5), || !audit_lines(&home).is_empty()));
    assert_eq!(
        audit_lines(&home)[0]["arguments"],
        json!({"text": "kept on purpose"})
    );

    let yaml = fixture_config(&[("fx", "")], "")
        .replace("broker: {", "broker: {audit: {enabled: false}, ");
    let off = Home::with_config(&yaml);
    let mut shim = session(&off);
    shim.call("fx.echo", json!({"text": "x"}));
    assert_eq!(off.status()["calls"]["total"], 1);
    assert!(!off.root().join("logs/audit.jsonl").exists());
}

/// A pseudo-terminal pair: the child gets the terminal side as its stdio.
fn pty() -> (std::fs::File, OwnedFd) {
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
    grantpt(&master).unwrap();
    unlockpt(&master).unwrap();
    let name = ptsname(&master, Vec::new()).unwrap();
    let slave = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(name.to_str().unwrap())
        .unwrap();
    (std::fs::File::from(master), OwnedFd::from(slave))
}

#[test]
fn top_redraws_a_live_view_in_a_terminal() {
    let home = Home::with_config(&fixture_config(&[("fx", ""), ("other", "")], ""));
    let mut shim = session(&home);
    for _ in 0..3 {
        shim.call("fx.echo", json!({"text": "x"}));
    }
    let (mut master, slave) = pty();
    let mut cmd = home.cmd(&["top", "--interval", "200ms"]);
    cmd.stdin(Stdio::from(slave.try_clone().unwrap()))
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave));
    let mut child = cmd.spawn().unwrap();
    drop(cmd);
    // Read the screen until a frame after the fourth call shows it; say when the first frame
    // is in, so the fourth call comes after a frame that could not show it.
    let (drawn_tx, drawn) = std::sync::mpsc::channel::<()>();
    let reader = std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&seen);
            if text.contains("CALLS/S") {
                let _ = drawn_tx.send(());
            }
            // A frame may arrive in several reads: stop once the newest one is whole (its
            // last row, `other`, is in).
            let newest = text.rsplit("\x1b[2J").next().unwrap_or("");
            if text.matches("\x1b[2J").count() >= 3
                && newest.contains("4 call(s)")
                && newest
                    .lines()
                    .any(|l| l.starts_with("other ") && l.contains("stopped"))
            {
                break;
            }
        }
        String::from_utf8_lossy(&seen).into_owned()
    });
    drawn
        .recv_timeout(Duration::from_secs(10))
        .expect("top drew no frame");
    shim.call("fx.echo", json!({"text": "x"}));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !reader.is_finished() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    let screen = reader.join().unwrap();
    // Each frame clears the screen and draws the header and a row per upstream.
    assert!(screen.matches("\x1b[H\x1b[2J").count() >= 3, "{screen}");
    assert!(
        screen.contains("CALLS/S") && screen.contains("P99"),
        "{screen}"
    );
    let last = screen.rsplit("\x1b[2J").next().unwrap();
    assert!(last.contains("4 call(s)"), "{last}");
    let fx = last.lines().find(|l| l.starts_with("fx ")).unwrap_or("");
    assert!(
        fx.contains("running") && fx.split_whitespace().nth(4) == Some("4"),
        "{last}"
    );
    let other = last.lines().find(|l| l.starts_with("other ")).unwrap_or("");
    assert!(other.contains("stopped"), "{last}");
}

#[test]
fn parity_compares_what_two_profiles_discover() {
    let yaml = fixture_config(&[("fx", "")], "").replace(
        "profiles:\n  default: {allow_mutating_upstreams: true}\n",
        "profiles:\n  default: {allow_mutating_upstreams: true}\n  \
         compact: {upstreams: [fx], compact_tools_enabled: true, allow_mutating_upstreams: true, broker_tool_name_style: double_underscore}\n  \
         careful: {upstreams: [fx]}\n",
    );
    let home = Home::with_config(&yaml);
    let same = home.run(&["parity", "default", "compact"]);
    let stderr = String::from_utf8_lossy(&same.stderr);
    assert!(same.status.success(), "{stderr}");
    assert!(stderr.contains("discover the same tools"), "{stderr}");

    let differ = home.run(&["parity", "default", "careful", "--json"]);
    assert_eq!(differ.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&differ.stdout).unwrap();
    assert_eq!(v["same"], false);
    let fx = &v["upstreams"][0];
    let only: Vec<&str> = fx["only_in_first"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(only.contains(&"crash") && only.contains(&"hang"), "{v}");
    assert!(!only.contains(&"echo"), "{v}");
    assert_eq!(fx["only_in_second"], json!([]));
}

#[test]
fn parity_is_never_the_same_when_an_upstream_could_not_be_listed() {
    let yaml = fixture_config(&[("fx", ""), ("dead", "\"--exit-at-start\", \"2\"")], "").replace(
        "profiles:\n  default: {allow_mutating_upstreams: true}\n",
        "profiles:\n  default: {allow_mutating_upstreams: true}\n  \
         both: {upstreams: [fx, dead], allow_mutating_upstreams: true}\n  \
         one: {upstreams: [fx], allow_mutating_upstreams: true}\n",
    );
    let home = Home::with_config(&yaml);
    let out = home.run(&["parity", "both", "one", "--json"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["same"], false);
    assert!(v["unlisted"]["first"]["dead"].is_string(), "{v}");
    let twice = home.run(&["parity", "one", "one"]);
    assert!(!twice.status.success());
    let unknown = home.run(&["parity", "one", "nope"]);
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no profile named \"nope\""));
}

#[test]
fn a_call_whose_upstream_cannot_start_is_audited_and_counted() {
    let home = Home::with_config(&fixture_config(
        &[("fx", ""), ("dead", "\"--exit-at-start\", \"7\"")],
        "",
    ));
    let mut shim = session(&home);
    let r = shim.call("dead.echo", json!({"text": "x"}));
    assert!(
        r["error"].is_object() || r["result"]["isError"] == true,
        "{r}"
    );
    assert!(
        wait_until(Duration::from_secs(5), || !audit_lines(&home).is_empty()),
        "no audit line"
    );
    let line = &audit_lines(&home)[0];
    assert_eq!(
        (line["upstream"].as_str(), line["outcome"].as_str()),
        (Some("dead"), Some("error")),
        "{line}"
    );
    assert_eq!(line["tool"], "dead.echo");
    assert_eq!(home.status()["calls"]["upstreams"]["dead"]["errors"], 1);
}
