//! Idle servers cost nothing: with the catalog warm, a listing starts no server; a call starts
//! only its own; a shared server stops after its idle time once no open session has used it;
//! `start: eager` keeps the old way (started with the daemon, never stopped for idleness).

use std::time::Duration;

use serde_json::{Value, json};

use super::support::{Home, fixture, session, text, upstream_status, wait_until};

fn config(idle_ms: u64, eager: &str) -> String {
    let fx = fixture();
    let mut y = String::from(
        "schema_version: 1\nbroker: {call_timeout_ms: 5000, startup_timeout_ms: 20000, shutdown_grace_ms: 1000}\nupstreams:\n",
    );
    for name in ["one", "two", "three"] {
        y.push_str(&format!(
            "  {name}: {{command: \"{}\", trust_annotations: true, idle_timeout_ms: {idle_ms}}}\n",
            fx.display()
        ));
    }
    if !eager.is_empty() {
        y.push_str(&format!(
            "  {eager}: {{command: \"{}\", trust_annotations: true, start: eager}}\n",
            fx.display()
        ));
    }
    y.push_str("profiles:\n  default: {allow_mutating_upstreams: true}\n");
    y
}

fn running(home: &Home, name: &str) -> bool {
    upstream_status(home, name)["state"] == "running"
}

fn pids(status: &Value) -> usize {
    status["upstreams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["pids"].as_array().map_or(0, Vec::len))
        .sum()
}

/// A first listing on a cold catalog starts the servers to learn their tools; the daemon is
/// then stopped, so the next one starts over a warm catalog.
fn warm(home: &Home) -> usize {
    let mut shim = session(home);
    let names = shim.tool_names();
    drop(shim);
    assert!(home.run(&["stop"]).status.success());
    names.len()
}

#[test]
fn a_listing_over_a_warm_catalog_starts_nothing_and_a_call_starts_only_its_server() {
    let home = Home::with_config(&config(60_000, ""));
    let known = warm(&home);
    assert!(known >= 3, "{known} tools");
    let mut shim = session(&home);
    assert_eq!(
        shim.tool_names().len(),
        known,
        "a listing answered from the catalog"
    );
    let status = home.status();
    assert_eq!(pids(&status), 0, "a listing started a server: {status}");
    let one = upstream_status(&home, "one");
    assert_eq!(one["state"], "stopped", "{one}");
    assert_eq!(one["stopped_because"], "starts on first use", "{one}");
    // The CLI's search answers from the catalog too.
    let out = home.run(&["tools", "search", "echo"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(pids(&home.status()), 0, "a search started a server");

    let r = shim.call("one.echo", json!({"text": "hi"}));
    assert!(r["result"].is_object(), "{r}");
    assert!(running(&home, "one"));
    assert!(!running(&home, "two") && !running(&home, "three"));
    let text = String::from_utf8_lossy(&home.run(&["status"]).stdout).to_string();
    assert!(text.contains("not started (on use)"), "{text}");
}

#[test]
fn an_idle_server_stops_once_no_open_session_has_used_it() {
    let home = Home::with_config(&config(1_000, ""));
    warm(&home);
    let mut shim = session(&home);
    shim.call("one.echo", json!({"text": "hi"}));
    assert!(running(&home, "one"));
    // Idle past its time, but a session that used it is open: it stays. Watched for three
    // idle times, each heartbeat of the daemon's a chance to stop it.
    let stopped_early = wait_until(Duration::from_secs(3), || !running(&home, "one"));
    assert!(
        !stopped_early,
        "stopped while a session that used it was open"
    );
    drop(shim);
    // The process's end shows first; the reason once the stop is through.
    assert!(
        wait_until(Duration::from_secs(20), || {
            let one = upstream_status(&home, "one");
            one["state"] != "running" && !one["stopped_because"].is_null()
        }),
        "never stopped after its session closed: {}",
        upstream_status(&home, "one")
    );
    let one = upstream_status(&home, "one");
    assert!(
        one["stopped_because"]
            .as_str()
            .is_some_and(|w| w.starts_with("idle")),
        "{one}"
    );
    assert!(one["pids"].as_array().is_none_or(Vec::is_empty), "{one}");
    // Its next call starts it again.
    let mut shim = session(&home);
    let r = shim.call("one.echo", json!({"text": "again"}));
    assert!(r["result"].is_object(), "{r}");
    assert!(running(&home, "one"));
}

#[test]
fn an_eager_server_starts_with_the_daemon() {
    let home = Home::with_config(&config(60_000, "always"));
    warm(&home);
    let _shim = session(&home);
    assert!(
        wait_until(Duration::from_secs(20), || running(&home, "always")),
        "the eager server did not start"
    );
    assert!(!running(&home, "one"));
    assert!(upstream_status(&home, "always")["stopped_because"].is_null());
}

#[test]
fn a_check_teaches_the_catalog_and_leaves_nothing_running() {
    let home = Home::with_config(&config(60_000, ""));
    // A cold catalog: `measure` starts each server for its list, then stops what it started.
    assert!(home.run(&["start"]).status.success());
    let out = home.run(&["measure", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        wait_until(Duration::from_secs(20), || pids(&home.status()) == 0),
        "a check left servers running: {}",
        home.status()
    );
    // The first session then lists every tool from the catalog, with nothing started.
    let mut shim = session(&home);
    assert!(shim.tool_names().len() >= 3);
    assert_eq!(pids(&home.status()), 0);
}

#[test]
fn after_an_import_of_ten_servers_the_first_session_knows_every_tool_with_nothing_started() {
    let home = Home::with_config(&super::support::fixture_config(&[("fx", "")], ""));
    let user = home.root().join("user");
    let file = user.join(".cursor/mcp.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let fx = fixture();
    let servers: serde_json::Map<String, Value> = (0..10)
        .map(|i| {
            let name = format!("s{i}");
            (
                name.clone(),
                json!({"command": fx, "args": ["--name", name]}),
            )
        })
        .collect();
    std::fs::write(&file, json!({ "mcpServers": servers }).to_string()).unwrap();
    let import = |extra: &[&str]| {
        let mut args = vec!["client", "import", "--client", "cursor"];
        args.extend_from_slice(extra);
        let out = home.cmd(&args).env("HOME", &user).output().unwrap();
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    import(&[]);
    import(&["--apply"]);
    // The import's parity check started every server through the daemon: the catalog kept
    // their lists and the servers were stopped once the check's session ended.
    assert!(
        wait_until(Duration::from_secs(30), || pids(&home.status()) == 0),
        "the import's check left servers running: {}",
        home.status()
    );
    // The client's first session, started as the entry the import wrote says.
    let entry: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let (_, broker) = entry["mcpServers"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .unwrap();
    let args: Vec<&str> = broker["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(args.first(), Some(&"stdio"), "{entry}");
    let mut shim = home.shim(&args[1..]);
    shim.initialize("2025-11-25");
    assert!(!shim.tool_names().is_empty());
    let profile = args
        .iter()
        .position(|a| *a == "--profile")
        .map(|i| args[i + 1])
        .unwrap_or("default");
    let found = home.run(&[
        "tools",
        "search",
        "echo",
        "--limit",
        "50",
        "--json",
        "--profile",
        profile,
    ]);
    let found = String::from_utf8_lossy(&found.stdout);
    for i in 0..10 {
        assert!(found.contains(&format!("s{i}")), "s{i} unknown: {found}");
    }
    let status = home.status();
    assert_eq!(
        pids(&status),
        0,
        "the first session started a server: {status}"
    );
}

/// Resources, templates and prompts are listed from the catalog like tools: with their lists
/// known, a client's listing starts nothing; and listing from a running server is not a use
/// of it, so it still stops when idle while the listing session stays open.
#[test]
fn content_listings_start_nothing_and_are_not_a_use() {
    let home = Home::with_config(&config(1_000, ""));
    // A first session on a cold catalog learns every list, then the daemon goes.
    let mut shim = session(&home);
    let cold: Vec<usize> = ["resources/list", "resources/templates/list", "prompts/list"]
        .iter()
        .map(|m| {
            let r = shim.request(m, json!({}));
            let key = match *m {
                "resources/list" => "resources",
                "prompts/list" => "prompts",
                _ => "resourceTemplates",
            };
            r["result"][key].as_array().map_or(0, Vec::len)
        })
        .collect();
    assert!(cold[0] > 0, "{cold:?}");
    drop(shim);
    assert!(home.run(&["stop"]).status.success());

    let mut lister = session(&home);
    for m in ["resources/list", "resources/templates/list", "prompts/list"] {
        let r = lister.request(m, json!({}));
        assert!(r["result"].is_object(), "{m}: {r}");
    }
    let status = home.status();
    assert_eq!(
        pids(&status),
        0,
        "a content listing started a server: {status}"
    );
    let warm = lister.request("resources/list", json!({}));
    assert_eq!(
        warm["result"]["resources"].as_array().map_or(0, Vec::len),
        cold[0]
    );

    // Another session calls `one` and goes; the lister lists again while `one` runs.
    let mut caller = session(&home);
    caller.call("one.echo", json!({"text": "hi"}));
    drop(caller);
    assert!(running(&home, "one"));
    let again = lister.request("resources/list", json!({}));
    assert!(again["result"].is_object(), "{again}");
    assert!(
        wait_until(Duration::from_secs(20), || !running(&home, "one")),
        "a listing session held `one` up: {}",
        upstream_status(&home, "one")
    );
}

/// A tool-list change the server announced before an operator's stop does not make the next
/// listing start it: the next call's start lists anew.
#[test]
fn a_change_announced_before_a_stop_does_not_start_the_server_for_a_listing() {
    let home = Home::with_config(&config(60_000, ""));
    warm(&home);
    let mut shim = session(&home);
    shim.call("one.echo", json!({"text": "hi"}));
    let r = shim.call("one.list_changed", json!({}));
    assert!(r["result"].is_object(), "{r}");
    drop(shim);
    assert!(home.run(&["upstream", "stop", "one"]).status.success());
    assert!(!running(&home, "one"));
    let mut shim = session(&home);
    assert!(shim.tool_names().len() >= 3);
    assert_eq!(pids(&home.status()), 0, "{}", home.status());
}

/// A call that comes while its server is being stopped for idleness waits for the stop and
/// starts it again, rather than failing at `max_instances` (the stopping process holds its
/// slot until it is gone; this one ignores the end of its input, so the stop takes a while).
#[test]
fn a_call_during_an_idle_stop_waits_for_it_instead_of_failing_at_capacity() {
    let fx = fixture();
    let home = Home::with_config(&format!(
        "schema_version: 1\nbroker: {{call_timeout_ms: 5000, shutdown_grace_ms: 1500}}\nupstreams:\n  slow: {{command: \"{}\", args: [--ignore-eof], trust_annotations: true, idle_timeout_ms: 1000, max_instances: 1, queue_timeout_ms: 20000}}\nprofiles:\n  default: {{allow_mutating_upstreams: true}}\n",
        fx.display()
    ));
    let mut shim = session(&home);
    shim.call("slow.echo", json!({"text": "first"}));
    drop(shim);
    assert!(
        wait_until(Duration::from_secs(20), || home
            .log()
            .contains("stopping idle upstream")),
        "never stopped for idleness"
    );
    let mut shim = session(&home);
    let r = shim.call("slow.echo", json!({"text": "second"}));
    assert_eq!(text(&r), "second", "{r}");
}
