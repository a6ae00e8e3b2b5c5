//! Bad input from clients and broken upstreams: a clear error, nothing lost, daemon fine.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;

use serde_json::{Value, json};

use super::support::Home;

fn raw_session(home: &Home) -> (UnixStream, BufReader<UnixStream>) {
    let stream = UnixStream::connect(home.socket()).unwrap();
    let mut w = stream.try_clone().unwrap();
    w.write_all(b"{\"mcp_broker\":1,\"kind\":\"session\",\"profile\":\"default\"}\n")
        .unwrap();
    let mut r = BufReader::new(stream);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let reply: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(reply["ok"], true, "{line}");
    (w, r)
}

fn read_line(r: &mut BufReader<UnixStream>) -> String {
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    line
}

#[test]
fn malformed_json_gets_a_parse_error_and_the_session_goes_on() {
    let home = Home::new();
    let mut shim = home.shim(&[]);
    shim.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\n")
        .unwrap();
    let r = shim.recv().unwrap();
    assert_eq!(r["error"]["code"], -32700, "{r}");
    assert_eq!(r["id"], Value::Null);
    shim.send_raw(b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]\n")
        .unwrap();
    let r = shim.recv().unwrap();
    assert_eq!(r["error"]["code"], -32600, "batches are refused: {r}");
    let r = shim.request("ping", json!({}));
    assert_eq!(r["result"], json!({}));
}

#[test]
fn raw_bytes_exact_answers() {
    let home = Home::new();
    home.run(&["start"]);
    let (mut w, mut r) = raw_session(&home);
    w.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"ping\"}\n")
        .unwrap();
    assert_eq!(
        read_line(&mut r),
        "{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"result\":{}}\n"
    );
    w.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"nothing/here\"}\n")
        .unwrap();
    assert_eq!(
        read_line(&mut r),
        "{\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":-32601,\"message\":\"method not found: nothing/here\"}}\n"
    );
    // Served now, and empty: the embedded default's upstream offers no resources.
    w.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"resources/list\"}\n")
        .unwrap();
    assert_eq!(
        read_line(&mut r),
        "{\"jsonrpc\":\"2.0\",\"id\":8,\"result\":{\"resources\":[]}}\n"
    );
    // Notifications get no answer; the next request's answer comes next.
    w.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"ping\"}\n").unwrap();
    assert_eq!(
        read_line(&mut r),
        "{\"jsonrpc\":\"2.0\",\"id\":8,\"result\":{}}\n"
    );
}

#[test]
fn a_100_mib_line_hits_the_frame_cap_and_only_that_connection_drops() {
    let home = Home::new();
    home.run(&["start"]);
    let (mut w, mut r) = raw_session(&home);
    let writer = std::thread::spawn(move || {
        let chunk = vec![b'x'; 1 << 20];
        w.write_all(
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"",
        )
        .unwrap();
        for _ in 0..100 {
            if w.write_all(&chunk).is_err() {
                return true; // the daemon closed the connection before taking it all
            }
        }
        false
    });
    let line = read_line(&mut r);
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["error"]["code"], -32700);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("frame exceeds"),
        "{line}"
    );
    let mut rest = String::new();
    let closed = match r.read_line(&mut rest) {
        Ok(0) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        Ok(_) => false,
    };
    assert!(closed, "connection closed after the error, got {rest:?}");
    assert!(
        writer.join().unwrap(),
        "the daemon must not swallow 100 MiB"
    );
    // The daemon is fine and serves the next client.
    let mut shim = home.shim(&[]);
    shim.initialize("2025-11-25");
    let r = shim.call("example.echo", json!({"message": "still here"}));
    assert_eq!(r["result"]["content"][0]["text"], "still here");
}

#[test]
fn unknown_method_is_method_not_found() {
    let home = Home::new();
    let mut shim = home.shim(&[]);
    let r = shim.request("no/such/method", json!({}));
    assert_eq!(r["error"]["code"], -32601);
}

#[test]
fn unknown_and_hidden_tools_get_the_same_answer() {
    let home = Home::with_config(
        r#"schema_version: 1
upstreams:
  example: {command: "{broker.exe}", args: [example-server], trust_annotations: true}
profiles:
  default: {}
"#,
    );
    let mut shim = home.shim(&[]);
    shim.initialize("2025-11-25");
    assert!(
        !shim
            .tool_names()
            .contains(&"example.append_note".to_string()),
        "mutating tool hidden"
    );
    let hidden = shim.call("example.append_note", json!({"text": "x"}));
    let unknown = shim.call("example.no_such_tool", json!({}));
    let no_upstream = shim.call("nowhere.echo", json!({}));
    for (r, name) in [
        (&hidden, "example.append_note"),
        (&unknown, "example.no_such_tool"),
        (&no_upstream, "nowhere.echo"),
    ] {
        assert_eq!(r["error"]["code"], -32602, "{r}");
        assert_eq!(r["error"]["message"], format!("Unknown tool: {name}"));
    }
    // The hidden tool really did not run.
    let notes = shim.call("example.list_notes", json!({}));
    assert_eq!(notes["result"]["content"][0]["text"], "");
}

#[test]
fn a_missing_upstream_command_is_named_and_the_others_still_answer() {
    let home = Home::with_config(
        r#"schema_version: 1
upstreams:
  example: {command: "{broker.exe}", args: [example-server], trust_annotations: true}
  broken: {command: /nonexistent/mcp-server-nothing}
profiles:
  default: {allow_mutating_upstreams: true}
"#,
    );
    let mut shim = home.shim(&[]);
    shim.initialize("2025-11-25");
    assert_eq!(
        shim.tool_names().len(),
        4,
        "broken upstream left out of the list"
    );
    let r = shim.call("broken.anything", json!({}));
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("'broken'") && msg.contains("/nonexistent/mcp-server-nothing"),
        "{msg}"
    );
    let r = shim.call("example.echo", json!({"message": "ok"}));
    assert_eq!(r["result"]["content"][0]["text"], "ok");
    let status = home.status();
    let broken = status["upstreams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["name"] == "broken")
        .unwrap();
    assert_eq!(broken["state"], "failed");
    assert!(
        broken["last_error"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/mcp-server-nothing")
    );
}

#[test]
fn an_unknown_profile_is_refused_with_a_hint_and_no_hang() {
    let home = Home::new();
    let shim = home.shim(&["--profile", "nope"]);
    let (code, stderr) = shim.finish();
    assert_ne!(code, Some(0));
    let mut lines = stderr.lines();
    assert_eq!(
        lines.next(),
        Some("mcp-broker: the daemon refused the session: unknown profile 'nope'")
    );
    assert!(
        stderr.contains("hint: profiles in <embedded default>: compact, default"),
        "{stderr}"
    );
}

#[test]
fn a_hello_from_another_broker_protocol_is_refused() {
    let home = Home::new();
    home.run(&["start"]);
    let stream = UnixStream::connect(home.socket()).unwrap();
    let mut w = stream.try_clone().unwrap();
    w.write_all(b"{\"mcp_broker\":99,\"kind\":\"session\"}\n")
        .unwrap();
    let mut r = BufReader::new(stream);
    let reply: Value = serde_json::from_str(&read_line(&mut r)).unwrap();
    assert_eq!(reply["ok"], false);
    assert!(
        reply["error"]
            .as_str()
            .unwrap()
            .contains("protocol mismatch")
    );
    assert!(
        reply["hints"][0]
            .as_str()
            .unwrap()
            .contains("mcp-broker stop")
    );
}

#[test]
fn an_invalid_config_is_refused_by_validate_and_daemon_alike() {
    let home = Home::with_config(
        "schema_version: 1\nupstreams:\n  a.b: {command: x}\nprofiles:\n  p: {upstreams: [zzz]}\n",
    );
    let validate = home.run(&["config", "validate"]);
    assert_eq!(validate.status.code(), Some(1));
    let v = String::from_utf8_lossy(&validate.stderr).to_string();
    assert!(
        v.contains("2 errors")
            && v.contains(":3:3: upstreams.a.b")
            && v.contains(":5:19: profiles.p.upstreams[0]"),
        "{v}"
    );
    let daemon = home.run(&["daemon"]);
    assert_eq!(daemon.status.code(), Some(1));
    let d = String::from_utf8_lossy(&daemon.stderr);
    assert!(d.contains(&v.lines().next().unwrap().to_string()), "{d}");
    assert!(!home.socket().exists());
}

/// Arguments nested 100,000 deep or holding a lone surrogate used to be forwarded to the
/// upstream, which could not parse them, and the caller waited the whole call timeout. Now they
/// are refused at once, on the raw path and through the facade alike.
#[test]
fn arguments_the_broker_would_not_accept_itself_are_refused_at_once() {
    let home = Home::with_config(
        r#"schema_version: 1
upstreams:
  example: {command: "{broker.exe}", args: [example-server], trust_annotations: true}
profiles:
  default: {}
  compact: {compact_tools_enabled: true}
"#,
    );
    let deep = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
    let cases = [
        (
            "default",
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"example.echo","arguments":{{"message":{deep}}}}}}}"#
            ),
            "deeper",
        ),
        (
            "default",
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"example.echo","arguments":{"message":"\ud800"}}}"#.to_string(),
            "surrogate",
        ),
        (
            "compact",
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"broker.call_tool","arguments":{{"name":"example.echo","arguments":{{"message":{deep}}}}}}}}}"#
            ),
            "deeper",
        ),
    ];
    for (profile, line, said) in cases {
        let mut shim = home.shim(&["--profile", profile]);
        shim.initialize("2025-11-25");
        let start = std::time::Instant::now();
        shim.send_raw(format!("{line}\n").as_bytes()).unwrap();
        let r = shim.recv().unwrap();
        assert!(start.elapsed() < std::time::Duration::from_secs(5), "{r}");
        let text = r.to_string();
        assert!(text.contains(said), "{profile}: {text}");
        assert!(
            r["error"]["code"] == -32602 || r["result"]["isError"] == true,
            "{r}"
        );
        let ok = shim.call(
            if profile == "compact" {
                "broker.call_tool"
            } else {
                "example.echo"
            },
            if profile == "compact" {
                json!({"name": "example.echo", "arguments": {"message": "still here"}})
            } else {
                json!({"message": "still here"})
            },
        );
        assert!(ok.to_string().contains("still here"), "{ok}");
    }
}
