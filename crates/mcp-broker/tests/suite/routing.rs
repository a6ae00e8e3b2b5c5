//! Side traffic reaches the right client: progress with the client's own token, list changes,
//! and requests from an upstream to the client whose call caused them.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::support::{Home, Shim, fixture_config};

fn session(home: &Home, capabilities: Value) -> Shim {
    let mut shim = home.shim(&[]);
    let r = shim.request(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": capabilities,
        "clientInfo": {"name": "routing-test", "version": "1"}}),
    );
    assert_eq!(r["result"]["capabilities"]["tools"]["listChanged"], true);
    shim.send_raw(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .unwrap();
    shim
}

fn send(shim: &mut Shim, msg: Value) {
    shim.send_raw(format!("{msg}\n").as_bytes()).unwrap();
}

#[test]
fn progress_reaches_its_caller_with_the_callers_token_and_numbers_intact() {
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    let mut a = session(&home, json!({}));
    let mut b = session(&home, json!({}));
    // Both clients use the same token: the broker must keep them apart.
    for (shim, id) in [(&mut a, "a1"), (&mut b, "b1")] {
        send(
            shim,
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "fx.progress", "arguments": {"count": 4, "interval_ms": 20}, "_meta": {"progressToken": "tok"}}}),
        );
    }
    for (shim, id) in [(&mut a, "a1"), (&mut b, "b1")] {
        let mut progress = Vec::new();
        let answer = loop {
            let line = shim.recv_line().unwrap();
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["method"] == "notifications/progress" {
                assert_eq!(v["params"]["progressToken"], "tok");
                progress.push(line);
            } else {
                break v;
            }
        };
        assert_eq!(answer["id"], id);
        assert_eq!(progress.len(), 4, "{progress:?}");
        assert!(
            progress[0].contains("\"progress\":0,") && progress[1].contains("\"progress\":1.5,"),
            "{progress:?}"
        );
    }
}

#[test]
fn progress_keeps_a_long_call_alive_until_the_hard_limit() {
    let home = Home::with_config(&fixture_config(
        &[("fx", "")],
        ", call_timeout_ms: 600, max_call_ms: 5000",
    ));
    let mut shim = session(&home, json!({}));
    // 10 x 200 ms = 2 s of work, 3x the idle timeout, with progress all along.
    send(
        &mut shim,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "fx.progress", "arguments": {"count": 10, "interval_ms": 200}, "_meta": {"progressToken": 1}}}),
    );
    let answer = loop {
        let v = shim.recv().unwrap();
        if v.get("id").is_some() {
            break v;
        }
    };
    assert_eq!(
        answer["result"]["content"][0]["text"], "10 steps",
        "{answer}"
    );
    // Without a token there is no progress to reset the idle timeout.
    let r = shim.call("fx.sleep", json!({"ms": 1500}));
    assert_eq!(r["error"]["code"], -32001, "{r}");

    let home = Home::with_config(&fixture_config(
        &[("fx", "")],
        ", call_timeout_ms: 600, max_call_ms: 1000",
    ));
    let mut shim = session(&home, json!({}));
    let t = Instant::now();
    send(
        &mut shim,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "fx.progress", "arguments": {"count": 20, "interval_ms": 100}, "_meta": {"progressToken": 2}}}),
    );
    let answer = loop {
        let v = shim.recv().unwrap();
        if v.get("id").is_some() {
            break v;
        }
    };
    assert_eq!(
        answer["error"]["code"], -32001,
        "the hard limit wins over progress: {answer}"
    );
    assert!(
        t.elapsed() < Duration::from_millis(1800),
        "{:?}",
        t.elapsed()
    );
}

#[test]
fn a_changed_tool_list_is_announced_to_the_sessions_that_see_it() {
    let mut yaml = fixture_config(&[("fx", ""), ("other", "")], "");
    yaml.push_str("  blind: {upstreams: [other]}\n");
    let home = Home::with_config(&yaml);
    let mut a = session(&home, json!({}));
    let mut blind = home.shim(&["--profile", "blind"]);
    blind.initialize("2025-11-25");
    send(
        &mut a,
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "fx.list_changed", "arguments": {}}}),
    );
    let first = a.recv().unwrap();
    let second = a.recv().unwrap();
    assert_eq!(
        first["method"], "notifications/tools/list_changed",
        "{first}"
    );
    assert_eq!(second["result"]["content"][0]["text"], "announced");
    // A session whose profile does not see the upstream hears nothing: its next answer is a ping's.
    assert_eq!(blind.request("ping", json!({}))["result"], json!({}));
}

#[test]
fn requests_from_an_upstream_go_to_the_client_whose_call_caused_them() {
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    let mut shim = session(
        &home,
        json!({"sampling": {}, "roots": {"listChanged": false}}),
    );
    send(
        &mut shim,
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "fx.sample", "arguments": {}}}),
    );
    let request = shim.recv().unwrap();
    assert_eq!(request["method"], "sampling/createMessage", "{request}");
    assert_eq!(request["params"]["maxTokens"], 10);
    send(
        &mut shim,
        json!({"jsonrpc": "2.0", "id": request["id"], "result": {
        "role": "assistant", "content": {"type": "text", "text": "hi there"}, "model": "test-model"}}),
    );
    let answer = shim.recv().unwrap();
    assert_eq!(answer["id"], 9);
    let text = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("hi there") && text.contains("test-model"),
        "{text}"
    );
    assert!(
        text.contains("\"id\":\"fixture-"),
        "the upstream got its own id back: {text}"
    );
}

#[test]
fn requests_needing_a_capability_the_client_lacks_are_refused() {
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    let mut shim = session(&home, json!({}));
    let r = shim.call("fx.sample", json!({}));
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("did not declare the 'sampling' capability"),
        "{text}"
    );
}

#[test]
fn a_2026_client_hears_of_list_changes_only_on_its_subscription_stream() {
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}});
    let modern = |home: &Home| {
        let mut shim = home.shim(&[]);
        let r = shim.request("server/discover", json!({"_meta": meta}));
        assert!(r["result"]["supportedVersions"].is_array());
        shim
    };
    let mut listening = modern(&home);
    send(
        &mut listening,
        json!({"jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen",
        "params": {"notifications": {"toolsListChanged": true, "promptsListChanged": true}, "_meta": meta}}),
    );
    let ack = listening.recv().unwrap();
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true}),
        "only what the broker honors"
    );
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "listen-1"
    );
    let mut silent = modern(&home);
    send(
        &mut listening,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "fx.list_changed", "arguments": {}, "_meta": meta}}),
    );
    let mut got = Vec::new();
    while got.len() < 2 {
        got.push(listening.recv().unwrap());
    }
    let note = got
        .iter()
        .find(|m| m["method"] == "notifications/tools/list_changed")
        .expect("announced");
    assert_eq!(
        note["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "listen-1"
    );
    // Without a subscription a 2026 client is told nothing: its next message is its own answer.
    let r = silent.request("tools/list", json!({"_meta": meta}));
    assert!(r["result"]["tools"].is_array());
    assert!(
        silent.notifications.is_empty(),
        "{:?}",
        silent.notifications
    );
}
