//! Lifecycles and caps: shared, per_session, per_call, disabled, idle timeout, instance,
//! process and concurrency limits.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::support::{Home, Shim, fixture, group_alive, upstream_status, wait_until};

fn config(upstreams: &[(&str, &str)], broker: &str) -> String {
    let fx = fixture();
    let mut y =
        format!("schema_version: 1\nbroker: {{call_timeout_ms: 1500{broker}}}\nupstreams:\n");
    for (name, extra) in upstreams {
        y.push_str(&format!(
            "  {name}: {{command: \"{}\", trust_annotations: true{extra}}}\n",
            fx.display()
        ));
    }
    y.push_str("profiles:\n  default: {allow_mutating_upstreams: true}\n");
    y
}

fn session(home: &Home) -> Shim {
    let mut shim = home.shim(&[]);
    shim.initialize("2025-11-25");
    shim
}

fn pid_of(r: &Value) -> u32 {
    r["result"]["structuredContent"]["pid"]
        .as_u64()
        .unwrap_or_else(|| panic!("{r}")) as u32
}

#[test]
fn per_session_instances_belong_to_their_session_and_end_with_it() {
    let home = Home::with_config(&config(&[("own", ", lifecycle: per_session")], ""));
    let mut a = session(&home);
    let mut b = session(&home);
    let pa = pid_of(&a.call("own.pid", json!({})));
    let pb = pid_of(&b.call("own.pid", json!({})));
    assert_ne!(pa, pb);
    assert_eq!(
        pid_of(&a.call("own.pid", json!({}))),
        pa,
        "a session keeps its instance"
    );
    let st = upstream_status(&home, "own");
    assert_eq!(st["session_count"], 2);
    assert_eq!(st["pids"].as_array().unwrap().len(), 2);
    let (code, _) = a.finish();
    assert_eq!(code, Some(0));
    assert!(
        wait_until(Duration::from_secs(5), || !group_alive(pa)),
        "a's instance outlived a"
    );
    assert!(group_alive(pb));
    assert_eq!(upstream_status(&home, "own")["session_count"], 1);
}

#[test]
fn per_call_instances_live_for_one_call_and_are_gone_before_the_answer() {
    let home = Home::with_config(&config(&[("once", ", lifecycle: per_call")], ""));
    let mut shim = session(&home);
    assert!(shim.tool_names().contains(&"once.pid".to_string()));
    let p1 = pid_of(&shim.call("once.pid", json!({})));
    assert!(!group_alive(p1), "stopped before the answer returned");
    let p2 = pid_of(&shim.call("once.pid", json!({})));
    assert_ne!(p1, p2);
    assert_eq!(upstream_status(&home, "once")["active_call_count"], 0);
    // Failure and timeout also bring the count back to zero.
    assert!(shim.call("once.crash", json!({"code": 4}))["error"].is_object());
    assert_eq!(shim.call("once.hang", json!({}))["error"]["code"], -32001);
    let st = upstream_status(&home, "once");
    assert_eq!(st["active_call_count"], 0, "{st}");
    assert!(st["pids"].as_array().unwrap().is_empty(), "{st}");
}

#[test]
fn active_call_count_shows_per_call_work_in_progress() {
    let home = Home::with_config(&config(&[("once", ", lifecycle: per_call")], ""));
    let mut shim = session(&home);
    shim.tool_names();
    shim.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":\"s\",\"method\":\"tools/call\",\"params\":{\"name\":\"once.sleep\",\"arguments\":{\"ms\":800}}}\n").unwrap();
    assert!(wait_until(Duration::from_secs(3), || upstream_status(
        &home, "once"
    )["active_call_count"]
        == 1));
    let r = shim.recv().unwrap();
    assert_eq!(r["result"]["content"][0]["text"], "slept");
    assert_eq!(upstream_status(&home, "once")["active_call_count"], 0);
}

#[test]
fn a_disabled_upstream_is_never_started_nor_listed() {
    let home = Home::with_config(&config(&[("on", ""), ("off", ", lifecycle: disabled")], ""));
    let mut shim = session(&home);
    let names = shim.tool_names();
    assert!(names.iter().all(|n| !n.starts_with("off.")), "{names:?}");
    assert_eq!(
        shim.call("off.echo", json!({"text": "x"}))["error"]["message"],
        "Unknown tool: off.echo"
    );
    let st = upstream_status(&home, "off");
    assert_eq!(st["state"], "disabled");
    assert_eq!(st["starts"], 0);
}

#[test]
fn an_idle_shared_instance_is_stopped_and_started_again_on_the_next_call() {
    let home = Home::with_config(&config(&[("lazy", ", idle_timeout_ms: 800")], ""));
    let mut shim = session(&home);
    let p1 = pid_of(&shim.call("lazy.pid", json!({})));
    // Stopped for idleness once no open session has used it.
    drop(shim);
    assert!(
        wait_until(Duration::from_secs(10), || !group_alive(p1)),
        "idle instance not stopped"
    );
    assert_eq!(upstream_status(&home, "lazy")["state"], "stopped");
    let mut shim = session(&home);
    let p2 = pid_of(&shim.call("lazy.pid", json!({})));
    assert_ne!(p1, p2);
    assert_eq!(
        upstream_status(&home, "lazy")["failures"],
        0,
        "an idle stop is not a failure"
    );
}

#[test]
fn instance_process_and_concurrency_caps_fail_fast_with_a_clear_error() {
    let home = Home::with_config(&config(
        &[("own", ", lifecycle: per_session, max_instances: 1")],
        "",
    ));
    let mut a = session(&home);
    let mut b = session(&home);
    a.call("own.echo", json!({"text": "x"}));
    let t = Instant::now();
    let r = b.call("own.echo", json!({"text": "y"}));
    // Well under call_timeout_ms (1500), which a queued call would have waited for.
    assert!(
        t.elapsed() < Duration::from_millis(1200),
        "{:?}",
        t.elapsed()
    );
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("at capacity") && msg.contains("max_instances (1)"),
        "{msg}"
    );

    let home = Home::with_config(&config(&[("one", ""), ("two", "")], ", max_processes: 1"));
    let mut s = session(&home);
    s.call("one.echo", json!({"text": "x"}));
    let msg = s.call("two.echo", json!({"text": "y"}))["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(msg.contains("broker.max_processes (1)"), "{msg}");

    let home = Home::with_config(&config(
        &[("narrow", ", max_concurrency: 1, queue_timeout_ms: 300")],
        "",
    ));
    let mut s = session(&home);
    s.call("narrow.echo", json!({"text": "warm"}));
    s.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":\"long\",\"method\":\"tools/call\",\"params\":{\"name\":\"narrow.sleep\",\"arguments\":{\"ms\":1000}}}\n").unwrap();
    // The long call holds the one slot before the next call is sent.
    assert!(wait_until(Duration::from_secs(3), || upstream_status(
        &home, "narrow"
    )["active_call_count"]
        == 1));
    let t = Instant::now();
    let r = s.call("narrow.echo", json!({"text": "queued"}));
    let msg = r["error"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("max_concurrency") && t.elapsed() < Duration::from_millis(1000),
        "{r}"
    );
}

#[test]
fn n_clients_and_m_shared_upstreams_run_exactly_m_processes() {
    let home = Home::with_config(&config(&[("u1", ""), ("u2", ""), ("u3", "")], ""));
    let mut shims: Vec<Shim> = (0..6).map(|_| session(&home)).collect();
    let mut pids = std::collections::BTreeSet::new();
    for s in &mut shims {
        for u in ["u1", "u2", "u3"] {
            pids.insert(pid_of(&s.call(&format!("{u}.pid"), json!({}))));
        }
    }
    assert_eq!(pids.len(), 3, "6 clients x 3 upstreams: {pids:?}");
}
