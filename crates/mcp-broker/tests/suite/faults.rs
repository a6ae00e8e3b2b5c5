//! Faults real servers cannot produce on demand, from the fixture server (crate mcpb-testkit).

use std::time::{Duration, Instant};

use serde_json::json;

use super::support::{Home, fixture, fixture_config, group_alive, session, text, wait_until};

#[test]
fn a_crash_mid_call_fails_that_call_at_once_and_the_next_call_restarts_the_upstream() {
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    let mut shim = session(&home);
    shim.call("fx.echo", json!({"text": "before"}));
    let first = home.upstream_pid("fx").unwrap();
    let t = Instant::now();
    let r = shim.call("fx.crash", json!({"code": 3}));
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "failed at once, not at the timeout: {:?}",
        t.elapsed()
    );
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(msg.contains("'fx'") && msg.contains("exit code 3"), "{msg}");
    assert_eq!(
        text(&shim.call("fx.echo", json!({"text": "after"}))),
        "after"
    );
    let second = home.upstream_pid("fx").unwrap();
    assert_ne!(first, second);
    let status = home.status();
    assert_eq!(status["upstreams"][0]["failures"], 1);
    // The upstream works again: its old error no longer blames it; the log keeps it.
    assert!(status["upstreams"][0]["last_error"].is_null(), "{status}");
    assert!(home.log().contains("exit code 3"));
}

#[test]
fn a_hanging_call_times_out_is_cancelled_upstream_and_the_upstream_keeps_serving() {
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    let mut shim = session(&home);
    let t = Instant::now();
    let r = shim.call("fx.hang", json!({}));
    assert_eq!(r["error"]["code"], -32001, "{r}");
    assert!(t.elapsed() >= Duration::from_secs(2) && t.elapsed() < Duration::from_secs(4));
    let pid = home.upstream_pid("fx").unwrap();
    assert_eq!(
        text(&shim.call("fx.echo", json!({"text": "still"}))),
        "still"
    );
    assert_eq!(home.upstream_pid("fx"), Some(pid));
    assert!(
        wait_until(Duration::from_secs(2), || home
            .log()
            .contains("fixture: cancelled")),
        "{}",
        home.log()
    );
}

#[test]
fn garbage_and_oversized_lines_from_an_upstream_are_dropped() {
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    let mut shim = session(&home);
    assert_eq!(text(&shim.call("fx.garbage", json!({}))), "after garbage");
    assert_eq!(
        text(&shim.call("fx.bigline", json!({"mib": 50}))),
        "after bigline"
    );
    assert_eq!(text(&shim.call("fx.echo", json!({"text": "fine"}))), "fine");
    let log = home.log();
    assert!(
        log.contains("not JSON-RPC") && log.contains("over the frame cap"),
        "{log}"
    );
}

#[test]
fn foreign_and_duplicate_response_ids_reach_nobody() {
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    let mut shim = session(&home);
    assert_eq!(text(&shim.call("fx.foreign", json!({}))), "the real answer");
    // The duplicate answer must not be taken for the next request's.
    assert_eq!(text(&shim.call("fx.echo", json!({"text": "mine"}))), "mine");
    let r = shim.request("ping", json!({}));
    assert_eq!(r["result"], json!({}));
}

#[test]
fn vendor_fields_numbers_and_upstream_errors_pass_unchanged() {
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    let mut shim = session(&home);
    shim.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":41,\"method\":\"tools/call\",\"params\":{\"name\":\"fx.vendor\",\"arguments\":{}}}\n").unwrap();
    assert_eq!(
        shim.recv_line().unwrap(),
        "{\"jsonrpc\":\"2.0\",\"id\":41,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"v\",\"x-vendor\":{\"a\":1},\"_meta\":{\"k\":\"v\"}}],\"structuredContent\":{\"n\":1.0e3,\"i\":10,\"f\":2.50},\"_meta\":{\"vendor/k\":true},\"x-extra\":[1,2.0,\"3\"]}}\n"
    );
    let r = shim.call("fx.error", json!({}));
    assert_eq!(
        r["error"],
        json!({"code": -32601, "message": "upstream says no", "data": {"why": "fixture"}})
    );
    let list = shim.request("tools/list", json!({}));
    let described = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "fx.described")
        .unwrap()
        .clone();
    assert_eq!(described["title"], "Described tool");
    assert_eq!(described["annotations"]["x-vendor-hint"], "kept");
    assert_eq!(described["icons"][0]["mimeType"], "image/png");
    assert_eq!(described["_meta"]["vendor/tool"]["k"][1], 2.5);
    assert_eq!(
        described["outputSchema"]["properties"]["n"]["type"],
        "number"
    );
    assert_eq!(described["x-unknown-top-level"], true);
}

#[test]
fn stop_kills_servers_that_ignore_eof_and_sigterm_and_their_grandchildren() {
    let fx = fixture();
    let yaml = format!(
        "schema_version: 1\nupstreams:\n  stubborn: {{command: sh, args: [-c, \"trap '' TERM; exec {fx} --ignore-eof --grandchild\"], trust_annotations: true}}\n  launched: {{command: \"{fx}\", args: [--launcher, --grandchild], trust_annotations: true}}\nprofiles:\n  default: {{}}\n",
        fx = fx.display()
    );
    let home = Home::with_config(&yaml);
    let mut shim = session(&home);
    assert_eq!(text(&shim.call("stubborn.echo", json!({"text": "a"}))), "a");
    assert_eq!(text(&shim.call("launched.echo", json!({"text": "b"}))), "b");
    let groups = [
        home.upstream_pid("stubborn").unwrap(),
        home.upstream_pid("launched").unwrap(),
    ];
    assert!(groups.iter().all(|g| group_alive(*g)));
    let t = Instant::now();
    assert!(home.run(&["stop"]).status.success());
    assert!(t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());
    for g in groups {
        assert!(!group_alive(g), "group {g} survived");
    }
}

/// A daemon killed with SIGKILL while its upstream (a launcher with a server and a grandchild
/// below it) runs. Returns the home and the upstream's process group, still alive. Unsandboxed:
/// in the sandbox nothing outlives the daemon to be reaped (suite/sandbox.rs shows it).
fn orphaned_launcher() -> (Home, u32) {
    let fx = fixture();
    let yaml = format!(
        "schema_version: 1\nupstreams:\n  launched: {{command: \"{}\", args: [--launcher, --grandchild], trust_annotations: true, sandbox: off}}\nprofiles:\n  default: {{}}\n",
        fx.display()
    );
    let home = Home::with_config(&yaml);
    let mut shim = session(&home);
    shim.call("launched.echo", json!({"text": "x"}));
    let group = home.upstream_pid("launched").unwrap();
    let daemon = home.daemon_pid().unwrap();
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(daemon as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    drop(shim);
    // Gone, or a zombie no one has reaped yet.
    let gone = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
            s.rsplit_once(") ").is_some_and(|(_, r)| r.starts_with('Z'))
        })
    };
    assert!(wait_until(Duration::from_secs(5), || gone(daemon) && gone(group)));
    // The launcher died with the daemon; the server it started and its grandchild did not.
    assert!(
        group_alive(group),
        "nothing left to reap: the test would prove nothing"
    );
    (home, group)
}

#[test]
fn after_a_daemon_sigkill_the_next_start_kills_the_leftovers() {
    let (home, group) = orphaned_launcher();
    assert!(home.run(&["start"]).status.success());
    assert!(
        wait_until(Duration::from_secs(3), || !group_alive(group)),
        "leftovers of group {group} survived the next start"
    );
    assert!(
        home.log()
            .contains("killed processes left by a previous daemon")
    );
}

#[test]
fn reap_command_kills_leftovers_when_no_daemon_runs() {
    let (home, group) = orphaned_launcher();
    let out = home.run(&["reap"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("upstream 'launched'"),
        "{text}"
    );
    assert!(!group_alive(group));
}

#[test]
fn repeated_failures_open_a_failfast_window() {
    let home = Home::with_config(&fixture_config(&[("bad", "--revision, 1999-01-01")], ""));
    let mut shim = session(&home);
    for _ in 0..5 {
        let r = shim.call("bad.echo", json!({"text": "x"}));
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .contains("1999-01-01"),
            "{r}"
        );
    }
    let t = Instant::now();
    let r = shim.call("bad.echo", json!({"text": "x"}));
    assert!(
        t.elapsed() < Duration::from_millis(1000),
        "failfast answers at once (the message below shows no start was tried)"
    );
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("keeps failing"),
        "{r}"
    );
    assert!(home.status()["upstreams"][0]["failfast_until_unix"].is_u64());
}

#[test]
fn stopping_while_an_upstream_is_still_in_its_handshake_stops_it_too() {
    let home = Home::with_config(&fixture_config(&[("slow", "--slow-start-ms, 20000")], ""));
    assert!(home.run(&["start"]).status.success());
    let mut shim = home.shim(&[]);
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "slow.echo", "arguments": {"text": "x"}}});
    shim.send_raw(format!("{call}\n").as_bytes()).unwrap();
    assert!(wait_until(
        Duration::from_secs(3),
        || home.status()["upstreams"][0]["state"] == "starting"
    ));
    let group = home
        .log()
        .lines()
        .find(|l| l.contains("upstream process started"))
        .and_then(|l| {
            l.split("pid=")
                .nth(1)
                .and_then(|p| p.split_whitespace().next())
                .and_then(|p| p.parse::<u32>().ok())
        })
        .unwrap();
    let t = Instant::now();
    assert!(home.run(&["stop"]).status.success());
    assert!(t.elapsed() < Duration::from_secs(6), "{:?}", t.elapsed());
    assert!(!group_alive(group));
}

#[test]
fn a_thousand_concurrent_calls_from_twenty_clients_each_reach_their_caller() {
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    let threads: Vec<_> = (0..20)
        .map(|c| {
            let mut shim = session(&home);
            std::thread::spawn(move || {
                let mut batch = String::new();
                for i in 0..50 {
                    batch.push_str(
                        &json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                        "params": {"name": "fx.echo", "arguments": {"text": format!("c{c}-{i}")}}})
                        .to_string(),
                    );
                    batch.push('\n');
                }
                shim.send_raw(batch.as_bytes()).unwrap();
                let mut seen = std::collections::BTreeSet::new();
                for _ in 0..50 {
                    let r = shim.recv().unwrap();
                    let i = r["id"].as_u64().unwrap();
                    assert_eq!(text(&r), format!("c{c}-{i}"), "misrouted: {r}");
                    assert!(seen.insert(i));
                }
                seen.len()
            })
        })
        .collect();
    let total: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(total, 1000);
    assert_eq!(
        home.status()["upstreams"][0]["starts"],
        1,
        "one shared process served everyone"
    );
}

#[test]
fn a_client_that_never_reads_is_disconnected_and_delays_nobody_else() {
    // Separate upstreams: what is measured is the broker, not a busy shared server.
    let mut yaml = fixture_config(&[("fx", ""), ("other", "")], "");
    yaml = yaml.replace(
        "shutdown_grace_ms: 1000}",
        "shutdown_grace_ms: 1000, client_write_timeout_ms: 500}",
    );
    let home = Home::with_config(&yaml);
    let mut stuck = session(&home);
    let mut fine = session(&home);
    // `other` is started before the clock runs: what is timed is the broker's delay, not a
    // process start on a loaded machine.
    assert_eq!(text(&fine.call("other.echo", json!({"text": "ok"}))), "ok");
    let payload = "x".repeat(2048);
    let mut batch = String::new();
    for i in 0..3000 {
        batch.push_str(
            &json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
            "params": {"name": "fx.echo", "arguments": {"text": payload}}})
            .to_string(),
        );
        batch.push('\n');
    }
    let writer = std::thread::spawn(move || {
        let _ = stuck.send_raw(batch.as_bytes());
        stuck
    });
    let mut worst = Duration::ZERO;
    for _ in 0..20 {
        let t = Instant::now();
        assert_eq!(text(&fine.call("other.echo", json!({"text": "ok"}))), "ok");
        worst = worst.max(t.elapsed());
    }
    assert!(
        worst < Duration::from_millis(300),
        "the reading client waited {worst:?}"
    );
    assert!(
        wait_until(
            Duration::from_secs(10),
            || home.status()["daemon"]["sessions"] == 1
        ),
        "the stuck client was not disconnected"
    );
    assert!(
        home.log()
            .contains("client is not reading its answers; disconnecting it")
    );
    let stuck = writer.join().unwrap();
    let (code, stderr) = stuck.finish();
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("the client stopped reading its answers"),
        "{stderr}"
    );
    assert_eq!(
        text(&fine.call("fx.echo", json!({"text": "still"}))),
        "still"
    );
}

#[test]
fn an_upstream_that_keeps_writing_garbage_is_stopped_as_unhealthy_and_restarted_on_next_use() {
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    let mut shim = session(&home);
    let first = home.upstream_pid("fx");
    let _ = shim.call("fx.echo", json!({"text": "x"}));
    let first = first.or_else(|| home.upstream_pid("fx")).unwrap();
    let r = shim.call("fx.garbage", json!({"lines": 150}));
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("'fx'"),
        "{r}"
    );
    assert!(
        home.log().contains("stopping it as unhealthy"),
        "{}",
        home.log()
    );
    assert!(wait_until(Duration::from_secs(5), || !group_alive(first)));
    assert_eq!(
        text(&shim.call("fx.echo", json!({"text": "again"}))),
        "again"
    );
    assert_ne!(home.upstream_pid("fx"), Some(first));
}
