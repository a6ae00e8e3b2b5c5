//! The first raw listing: answered from lists the catalog knows under today's settings without
//! waiting for a start, otherwise within `broker.first_list_wait_ms`, with the rest announced.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::support::*;

fn yaml(wait_ms: u64, upstreams: &[(&str, &str)]) -> String {
    let fx = fixture();
    let mut y = format!(
        "schema_version: 1\nbroker: {{call_timeout_ms: 5000, startup_timeout_ms: 20000, shutdown_grace_ms: 1000, first_list_wait_ms: {wait_ms}}}\nupstreams:\n"
    );
    for (name, args) in upstreams {
        y.push_str(&format!(
            "  {name}: {{command: \"{}\", args: [{args}], trust_annotations: true}}\n",
            fx.display()
        ));
    }
    y.push_str("profiles:\n  default: {allow_mutating_upstreams: true}\n");
    y
}

/// Reads messages until a `notifications/tools/list_changed`; panics if the session ends.
fn wait_for_list_changed(shim: &mut Shim) {
    if shim
        .notifications
        .iter()
        .any(|n| n["method"] == "notifications/tools/list_changed")
    {
        return;
    }
    loop {
        let msg = shim.recv().expect("the session ended before a list change");
        if msg["method"] == "notifications/tools/list_changed" {
            return;
        }
    }
}

fn has(names: &[String], tool: &str) -> bool {
    names.iter().any(|n| n == tool)
}

#[test]
fn a_known_list_answers_at_once_after_a_restart_and_changed_settings_are_waited_for() {
    let slow = "\"--slow-start-ms\", \"2500\"";
    let home = Home::with_config(&yaml(10_000, &[("a", slow), ("b", slow)]));
    let mut first = session(&home);
    let t = Instant::now();
    let names = first.tool_names();
    assert!(t.elapsed() >= Duration::from_millis(2500), "{names:?}");
    assert!(has(&names, "a.echo") && has(&names, "b.echo"), "{names:?}");
    drop(first);
    assert!(home.run(&["stop"]).status.success());

    // A new daemon: both lists are known from the catalog, nothing has to start first.
    let mut second = session(&home);
    let t = Instant::now();
    let names = second.tool_names();
    let took = t.elapsed();
    assert!(
        took < Duration::from_millis(1500),
        "the listing waited {took:?}"
    );
    assert!(has(&names, "a.echo") && has(&names, "b.echo"), "{names:?}");
    // Nothing is started behind the answer: the first call starts its own server.
    assert_ne!(upstream_status(&home, "a")["state"], "running");
    assert_ne!(upstream_status(&home, "b")["state"], "running");
    assert_eq!(
        text(&second.call("a.echo", json!({"text": "hi"}))),
        "hi",
        "{}",
        home.log()
    );
    drop(second);
    assert!(home.run(&["stop"]).status.success());

    // Other arguments may make another list: that upstream's known list does not answer.
    let changed = "\"--slow-start-ms\", \"2500\", \"--name\", \"renamed\"";
    std::fs::write(
        home.config_path(),
        yaml(10_000, &[("a", slow), ("b", changed)]),
    )
    .unwrap();
    let mut third = session(&home);
    let t = Instant::now();
    let names = third.tool_names();
    assert!(
        t.elapsed() >= Duration::from_millis(2500),
        "answered without starting the changed upstream: {names:?}"
    );
    assert!(has(&names, "a.echo") && has(&names, "b.echo"), "{names:?}");
}

#[test]
fn a_slow_first_start_is_left_out_after_the_wait_and_announced_when_it_is_up() {
    let home = Home::with_config(&yaml(
        800,
        &[("fast", ""), ("slow", "\"--slow-start-ms\", \"4000\"")],
    ));
    let mut shim = session(&home);
    let t = Instant::now();
    let names = shim.tool_names();
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(800) && took < Duration::from_millis(3000),
        "the listing took {took:?}"
    );
    assert!(has(&names, "fast.echo"), "{names:?}");
    assert!(!has(&names, "slow.echo"), "{names:?}");
    let told = shim.notifications.iter().any(|n: &Value| {
        n["method"] == "notifications/message"
            && n["params"]["data"]
                .as_str()
                .is_some_and(|d| d.contains("'slow' is still starting"))
    });
    assert!(told, "{:?}", shim.notifications);
    wait_for_list_changed(&mut shim);
    let names = shim.tool_names();
    assert!(
        has(&names, "fast.echo") && has(&names, "slow.echo"),
        "{names:?}"
    );
}

#[test]
fn nothing_known_means_the_first_server_up_is_waited_for_past_the_setting() {
    let home = Home::with_config(&yaml(300, &[("slow", "\"--slow-start-ms\", \"1500\"")]));
    let mut shim = session(&home);
    let names = shim.tool_names();
    assert!(has(&names, "slow.echo"), "an empty list: {names:?}");
}

#[test]
fn a_known_list_that_the_server_no_longer_sends_is_corrected_by_a_list_change() {
    let alpha =
        json!({"name": "alpha", "description": "First.", "annotations": {"readOnlyHint": true}});
    let beta =
        json!({"name": "beta", "description": "Second.", "annotations": {"readOnlyHint": true}});
    let (home, file) = tools_home(
        &[alpha, beta.clone()],
        ", first_list_wait_ms: 10000",
        "",
        "",
        "  default: {allow_mutating_upstreams: true}\n",
    );
    let mut first = session(&home);
    assert!(has(&first.tool_names(), "fx.alpha"));
    drop(first);
    assert!(home.run(&["stop"]).status.success());
    // The server drops a tool (a new or changed one would be held for review instead).
    write_tools(&file, &[beta]);
    let mut second = session(&home);
    // The known list answers (the server is not started for it)...
    assert!(has(&second.tool_names(), "fx.alpha"));
    // ...its first call starts it, and the list it sends now is announced.
    second.call("fx.beta", json!({}));
    wait_for_list_changed(&mut second);
    let names = second.tool_names();
    assert!(
        has(&names, "fx.beta") && !has(&names, "fx.alpha"),
        "{names:?}"
    );
}

#[test]
fn sessions_listing_at_once_start_a_slow_server_once_and_hear_of_it_once() {
    let fx = fixture();
    let yaml = format!(
        "schema_version: 1\nbroker: {{call_timeout_ms: 5000, startup_timeout_ms: 20000, first_list_wait_ms: 400}}\nupstreams:\n  fast: {{command: \"{fx}\", trust_annotations: true}}\n  slow: {{command: \"{fx}\", args: [--slow-start-ms, \"2000\"], lifecycle: per_call, trust_annotations: true}}\nprofiles:\n  default: {{allow_mutating_upstreams: true}}\n",
        fx = fx.display()
    );
    let home = Home::with_config(&yaml);
    let mut shims: Vec<Shim> = (0..5).map(|_| session(&home)).collect();
    for s in &mut shims {
        s.send_request(50, "tools/list", json!({}));
    }
    for s in &mut shims {
        let answer: Value = serde_json::from_str(&s.recv_answer_line().unwrap()).unwrap();
        let names: Vec<&str> = answer["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["name"].as_str())
            .collect();
        assert!(names.contains(&"fast.echo"), "{names:?}");
        assert!(!names.contains(&"slow.echo"), "{names:?}");
    }
    for s in &mut shims {
        wait_for_list_changed(s);
        assert!(has(&s.tool_names(), "slow.echo"));
    }
    assert_eq!(
        upstream_status(&home, "slow")["starts"],
        1,
        "one start for five listings: {}",
        upstream_status(&home, "slow")
    );
    // Each session heard of it once.
    for s in &mut shims {
        let heard = s
            .notifications
            .iter()
            .filter(|n| n["method"] == "notifications/tools/list_changed")
            .count();
        assert!(heard <= 1, "{:?}", s.notifications);
    }
}
