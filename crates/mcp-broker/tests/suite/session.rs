//! MCP sessions through the shim on the embedded default config.

use serde_json::json;

use super::support::Home;

#[test]
fn lists_and_calls_the_example_upstream_at_every_revision() {
    let home = Home::new();
    for version in ["2024-11-05", "2025-06-18", "2025-11-25"] {
        let mut shim = home.shim(&[]);
        let init = shim.initialize(version);
        assert_eq!(init["result"]["protocolVersion"], version);
        assert_eq!(init["result"]["serverInfo"]["name"], "mcp-broker");
        assert_eq!(
            shim.tool_names(),
            [
                "example.add",
                "example.append_note",
                "example.echo",
                "example.list_notes"
            ]
        );
        let r = shim.call("example.echo", json!({"message": "héllo"}));
        assert_eq!(r["result"]["content"][0]["text"], "héllo", "{r}");
        let r = shim.call("example.add", json!({"a": 0.5, "b": 2}));
        assert_eq!(r["result"]["content"][0]["text"], "2.5");
        let (code, stderr) = shim.finish();
        assert_eq!(code, Some(0), "{stderr}");
    }
    // The example server (rmcp) speaks 2026-07-28, and the broker speaks it to it, whatever
    // revision each client uses.
    assert_eq!(
        home.status()["upstreams"][0]["protocol_version"],
        "2026-07-28"
    );
}

#[test]
fn tool_definitions_pass_through_with_their_annotations_and_schema() {
    let home = Home::new();
    let mut shim = home.shim(&[]);
    shim.initialize("2025-11-25");
    let r = shim.request("tools/list", json!({}));
    let tools = r["result"]["tools"].as_array().unwrap();
    let note = tools
        .iter()
        .find(|t| t["name"] == "example.append_note")
        .unwrap();
    assert_eq!(note["annotations"]["readOnlyHint"], false);
    assert_eq!(note["inputSchema"]["required"], json!(["text"]));
    let echo = tools.iter().find(|t| t["name"] == "example.echo").unwrap();
    assert_eq!(echo["annotations"]["readOnlyHint"], true);
}

#[test]
fn a_2026_client_discovers_and_works_without_initialize() {
    let home = Home::new();
    let mut shim = home.shim(&[]);
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "modern", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}});
    let r = shim.request("server/discover", json!({"_meta": meta}));
    let result = &r["result"];
    assert!(
        result["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!("2026-07-28")),
        "{r}"
    );
    assert!(
        result["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!("2024-11-05"))
    );
    assert_eq!(result["resultType"], "complete");
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "mcp-broker"
    );
    let list = shim.request("tools/list", json!({"_meta": meta}));
    assert_eq!(list["result"]["resultType"], "complete");
    assert_eq!(list["result"]["ttlMs"], 0);
    assert_eq!(list["result"]["tools"].as_array().unwrap().len(), 4);
    let call = shim.request(
        "tools/call",
        json!({"name": "example.echo", "arguments": {"message": "modern"}, "_meta": meta}),
    );
    assert_eq!(call["result"]["content"][0]["text"], "modern");
    assert_eq!(
        call["result"]["resultType"], "complete",
        "added for the 2026 client: {call}"
    );
    // A revision the broker does not speak gets -32022 with the list it does.
    let r = shim.request(
        "server/discover",
        json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2099-01-01"}}),
    );
    assert_eq!(r["error"]["code"], -32022, "{r}");
    assert!(
        r["error"]["data"]["supported"]
            .as_array()
            .unwrap()
            .contains(&json!("2026-07-28"))
    );
}

#[test]
fn a_handshake_era_session_sees_no_2026_fields() {
    let home = Home::new();
    let mut shim = home.shim(&[]);
    shim.initialize("2025-11-25");
    let list = shim.request("tools/list", json!({}));
    assert!(
        list["result"].get("resultType").is_none() && list["result"].get("ttlMs").is_none(),
        "{list}"
    );
    let call = shim.call("example.echo", json!({"message": "old"}));
    assert!(call["result"].get("resultType").is_none(), "{call}");
}

#[test]
fn pipelined_requests_each_get_their_own_answer() {
    let home = Home::new();
    let mut shim = home.shim(&[]);
    shim.initialize("2025-11-25");
    let mut batch = String::new();
    for i in 0..200 {
        batch.push_str(
            &json!({"jsonrpc": "2.0", "id": format!("r{i}"), "method": "tools/call",
            "params": {"name": "example.echo", "arguments": {"message": format!("m{i}")}}})
            .to_string(),
        );
        batch.push('\n');
    }
    shim.send_raw(batch.as_bytes()).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..200 {
        let r = shim.recv().unwrap();
        let id = r["id"].as_str().unwrap().to_string();
        let n = &id[1..];
        assert_eq!(r["result"]["content"][0]["text"], format!("m{n}"));
        assert!(seen.insert(id));
    }
}

#[test]
fn two_sessions_share_one_upstream_process() {
    let home = Home::new();
    let mut a = home.shim(&[]);
    a.initialize("2025-11-25");
    a.call("example.append_note", json!({"text": "from a"}));
    let pid = home.upstream_pid("example").unwrap();
    let mut b = home.shim(&[]);
    b.initialize("2025-06-18");
    let r = b.call("example.list_notes", json!({}));
    assert_eq!(
        r["result"]["content"][0]["text"], "from a",
        "b sees the state a wrote: same process"
    );
    assert_eq!(home.upstream_pid("example"), Some(pid));
    assert_eq!(home.status()["daemon"]["sessions"], 2);
}

#[test]
fn the_client_entry_or_client_info_selects_the_profile() {
    let home = Home::with_config(
        r#"schema_version: 1
upstreams:
  example: {command: "{broker.exe}", args: [example-server], trust_annotations: true}
profiles:
  default: {allow_mutating_upstreams: true}
  ro: {broker_tool_name_style: double_underscore}
clients:
  codex: {profile: ro}
"#,
    );
    let mut by_flag = home.shim(&["--client", "codex"]);
    by_flag.initialize("2025-11-25");
    assert_eq!(
        by_flag.tool_names(),
        ["example__add", "example__echo", "example__list_notes"]
    );

    let mut by_info = home.shim(&[]);
    let r = by_info.request(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "codex", "version": "1"}}),
    );
    assert!(r["result"].is_object());
    assert_eq!(
        by_info.tool_names(),
        ["example__add", "example__echo", "example__list_notes"]
    );

    let mut plain = home.shim(&[]);
    plain.initialize("2025-11-25");
    assert_eq!(plain.tool_names().len(), 4);
}

#[test]
fn the_byte_relay_fallback_serves_the_same_session() {
    let home = Home::new();
    let mut cmd = home.cmd(&["stdio"]);
    cmd.env("MCP_BROKER_RELAY", "bytes");
    let mut shim = super::support::Shim::spawn(cmd);
    shim.initialize("2025-11-25");
    assert_eq!(shim.tool_names().len(), 4);
    let r = shim.call("example.echo", json!({"message": "relayed"}));
    assert_eq!(r["result"]["content"][0]["text"], "relayed");
    let (code, stderr) = shim.finish();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(home.log().contains("pass_fds=false"), "{}", home.log());
}

#[test]
fn the_shim_hands_its_pipes_to_the_daemon_and_a_killed_shim_ends_the_session() {
    let home = Home::new();
    let mut shim = home.shim(&[]);
    shim.initialize("2025-11-25");
    shim.call("example.echo", json!({"message": "x"}));
    assert!(home.log().contains("pass_fds=true"), "{}", home.log());
    assert_eq!(home.status()["daemon"]["sessions"], 1);
    shim.child.kill().unwrap();
    shim.child.wait().unwrap();
    // Our copies of the pipes stay open in this test, so only the shim's end can tell.
    assert!(super::support::wait_until(
        std::time::Duration::from_secs(5),
        || home.status()["daemon"]["sessions"] == 0
    ));
}

#[test]
fn mixed_revisions_list_every_tool_whatever_each_side_speaks() {
    let home = Home::with_config(&super::support::fixture_config(
        &[
            ("old", "--revision, 2024-11-05"),
            ("mid", "--revision, 2025-06-18"),
            ("new", "--revision, 2025-11-25"),
        ],
        "",
    ));
    for client in ["2024-11-05", "2025-06-18", "2025-11-25"] {
        let mut shim = home.shim(&[]);
        assert_eq!(shim.initialize(client)["result"]["protocolVersion"], client);
        let names = shim.tool_names();
        for up in ["old", "mid", "new"] {
            assert!(
                names.contains(&format!("{up}.echo")),
                "{client} client misses {up}: {names:?}"
            );
        }
        // Results carry no fields of another revision: nothing was added on the way.
        let r = shim.call("old.echo", json!({"text": "x"}));
        assert_eq!(
            r["result"],
            json!({"content": [{"type": "text", "text": "x"}], "isError": false})
        );
    }
    let st = home.status();
    let versions: Vec<&str> = st["upstreams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["protocol_version"].as_str().unwrap())
        .collect();
    assert_eq!(versions, ["2025-06-18", "2025-11-25", "2024-11-05"]);
}

#[test]
fn modern_upstreams_get_the_envelope_and_others_fall_back_to_initialize() {
    let home = Home::with_config(&super::support::fixture_config(
        &[
            ("modern", "--modern"),
            ("plain", ""),
            ("fragile", "--die-on-discover"),
        ],
        "",
    ));
    let mut old = home.shim(&[]);
    old.initialize("2025-06-18");
    // The modern fixture refuses any request without the 2026-07-28 envelope: the broker adds it.
    let r = old.call("modern.echo", json!({"text": "hi"}));
    assert_eq!(
        r["result"],
        json!({"content": [{"type": "text", "text": "hi"}], "isError": false}),
        "resultType removed for a 2025 client: {r}"
    );
    assert_eq!(
        old.call("plain.echo", json!({"text": "p"}))["result"]["content"][0]["text"],
        "p"
    );
    // An upstream that dies when asked server/discover is asked only with initialize afterwards.
    let first = old.call("fragile.echo", json!({"text": "f"}));
    assert!(first["error"].is_object(), "{first}");
    let second = old.call("fragile.echo", json!({"text": "f"}));
    assert_eq!(second["result"]["content"][0]["text"], "f", "{second}");
    // input_required cannot be relayed yet: a clear error, not a confusing result.
    let r = old.call("modern.needs_input", json!({}));
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("input_required"),
        "{r}"
    );
    let st = home.status();
    let version = |n: &str| {
        st["upstreams"]
            .as_array()
            .unwrap()
            .iter()
            .find(|u| u["name"] == n)
            .unwrap()["protocol_version"]
            .clone()
    };
    assert_eq!(version("modern"), "2026-07-28");
    assert_eq!(version("plain"), "2025-11-25");
    assert_eq!(version("fragile"), "2025-11-25");
}

#[test]
fn the_underscore_style_names_broker_and_upstream_tools_with_one_underscore() {
    let home = Home::with_config(
        r#"schema_version: 1
upstreams:
  example: {command: "{broker.exe}", args: [example-server], trust_annotations: true}
profiles:
  default: {allow_mutating_upstreams: true, broker_tool_name_style: underscore}
  compact: {compact_tools_enabled: true, allow_mutating_upstreams: true, broker_tool_name_style: underscore}
"#,
    );
    let mut raw = home.shim(&[]);
    raw.initialize("2025-11-25");
    assert_eq!(
        raw.tool_names(),
        [
            "example_add",
            "example_append_note",
            "example_echo",
            "example_list_notes"
        ]
    );
    let r = raw.call("example_echo", json!({"message": "one underscore"}));
    assert_eq!(r["result"]["content"][0]["text"], "one underscore", "{r}");

    let mut compact = home.shim(&["--profile", "compact"]);
    compact.initialize("2025-11-25");
    let names = compact.tool_names();
    for expected in [
        "broker_search_tools",
        "broker_describe_tool",
        "broker_call_tool",
        "broker_status",
        "broker_close_session",
    ] {
        assert!(names.iter().any(|n| n == expected), "{expected}: {names:?}");
    }
    let found = compact.call("broker_search_tools", json!({"query": "echo a message"}));
    let text = found["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("example_echo"), "{found}");
    let called = compact.call(
        "broker_call_tool",
        json!({"name": "example_echo", "arguments": {"message": "through the facade"}}),
    );
    assert!(
        called.to_string().contains("through the facade"),
        "{called}"
    );
}

#[test]
fn server_tools_list_pages_through_one_servers_tools() {
    let mut yaml = super::support::fixture_config(&[("fx", "\"--tools\", \"120\"")], "");
    yaml.push_str("  eb: {compact_tools_enabled: true, facade_vocabulary: exec_broker}\n");
    let home = Home::with_config(&yaml);
    let mut shim = home.shim(&["--profile", "eb"]);
    shim.initialize("2025-11-25");
    let data = |r: &serde_json::Value| r["result"]["structuredContent"].clone();
    let mut names = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut args = json!({"server": "fx"});
        if let Some(c) = &cursor {
            args["cursor"] = c.clone().into();
        }
        let page = data(&shim.call("server_tools_list", args));
        pages += 1;
        for t in page["tools"].as_array().unwrap() {
            names.push(t["name"].as_str().unwrap().to_string());
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => {
                assert_eq!(page["total"].as_u64().unwrap() as usize, names.len());
                break;
            }
        }
        assert!(pages < 10, "{page}");
    }
    assert!(names.len() > 120, "{}", names.len());
    assert_eq!(pages, names.len().div_ceil(50));
    let unique: std::collections::BTreeSet<&String> = names.iter().collect();
    assert_eq!(unique.len(), names.len(), "a tool on two pages");
    let bad = shim.call("server_tools_list", json!({"server": "fx", "cursor": "x"}));
    assert_eq!(bad["result"]["isError"], true, "{bad}");
    let unknown = shim.call("server_tools_list", json!({"server": "nope"}));
    let text = unknown["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("known servers: fx"), "{text}");
}
