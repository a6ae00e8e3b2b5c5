//! Resources, prompts and completion across upstreams: the official Python SDK client against
//! server-everything through the shim, and the cases a single server never shows (two upstreams
//! listing the same URI, a prompt or resource of an upstream the profile hides).

use serde_json::{Value, json};

use super::interop::{py_driver, read_result, setup, shim_spec};
use super::support::{Home, deps, deps_path};

#[test]
fn python_sdk_client_lists_and_reads_resources_gets_prompts_and_completes_through_the_broker() {
    let (home, deps, path) = setup();
    let spec = shim_spec(
        &home,
        &path,
        &["stdio"],
        json!({
        "prefix": "everything.",
        }),
    );
    let mut child = py_driver(&deps, &path, "py_content.py", &spec);
    let out = read_result(&mut child);
    let _ = child.wait();
    for cap in ["resources", "prompts", "completions", "tools"] {
        assert!(out["caps"].get(cap).is_some(), "{cap}: {}", out["caps"]);
    }
    let resources: Vec<&str> = out["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        resources.contains(&"demo://resource/static/document/architecture.md"),
        "{resources:?}"
    );
    assert_eq!(
        out["read"][0]["uri"],
        "demo://resource/static/document/architecture.md"
    );
    assert!(
        out["read"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Architecture")
    );
    assert!(
        out["templates"]
            .as_array()
            .unwrap()
            .contains(&json!("demo://resource/dynamic/text/{resourceId}"))
    );
    assert!(
        out["dynamic"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("Resource 7"),
        "{}",
        out["dynamic"]
    );
    let prompts: Vec<&str> = out["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for p in [
        "everything.simple-prompt",
        "everything.args-prompt",
        "everything.completable-prompt",
    ] {
        assert!(prompts.contains(&p), "{prompts:?}");
    }
    assert!(
        out["prompt"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("Lyon"),
        "{}",
        out["prompt"]
    );
    assert_eq!(out["completion"], json!(["Engineering"]));
    assert!(
        out["hidden"].as_str().unwrap().contains("Unknown prompt"),
        "{}",
        out["hidden"]
    );
    assert!(
        out["unknown_resource"]
            .as_str()
            .unwrap()
            .contains("Resource not found"),
        "{}",
        out["unknown_resource"]
    );
}

/// `resources/list` and the URIs it lists.
fn list_uris(shim: &mut super::support::Shim) -> (Value, Vec<String>) {
    let list = shim.request("resources/list", json!({}));
    let uris = list["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["uri"].as_str().map(str::to_string))
        .collect();
    (list, uris)
}

/// A shim session of `home` whose daemon finds the reference servers on its PATH.
fn shim_on(home: &Home, path: &str, args: &[&str]) -> super::support::Shim {
    let mut c = home.cmd(args);
    c.env("PATH", path);
    super::support::Shim::spawn(c)
}

fn two_everythings() -> Home {
    let deps = deps();
    let bin = deps.join("npm/node_modules/.bin/mcp-server-everything");
    Home::with_config(&format!(
        r#"schema_version: 1
upstreams:
  one: {{command: "{b}"}}
  two: {{command: "{b}"}}
  example: {{command: "{{broker.exe}}", args: [example-server], trust_annotations: true}}
  guarded:
    command: "{b}"
    resources_allow: ["demo://resource/static/document/*"]
    resources_deny: ["*/architecture.md"]
profiles:
  default: {{allow_mutating_upstreams: true}}
  narrow: {{upstreams: [example]}}
  solo: {{upstreams: [one], namespace: false, allow_mutating_upstreams: true}}
  compact: {{upstreams: [one], compact_tools_enabled: true, allow_mutating_upstreams: true}}
  guarded: {{upstreams: [guarded]}}
"#,
        b = bin.display()
    ))
}

#[test]
fn a_uri_two_upstreams_share_is_made_unambiguous_and_a_hidden_upstream_answers_as_unknown() {
    let home = two_everythings();
    let path = deps_path(&deps());
    let mut shim = shim_on(&home, &path, &["stdio"]);
    shim.initialize("2025-11-25");
    let (_, uris) = list_uris(&mut shim);
    let uris: Vec<&str> = uris.iter().map(String::as_str).collect();
    let doc = "demo://resource/static/document/architecture.md";
    assert!(
        uris.contains(&format!("mcpb://one/{doc}").as_str()),
        "{uris:?}"
    );
    assert!(
        uris.contains(&format!("mcpb://two/{doc}").as_str()),
        "{uris:?}"
    );
    assert!(!uris.contains(&doc), "{uris:?}");
    let read = shim.request(
        "resources/read",
        json!({"uri": format!("mcpb://two/{doc}")}),
    );
    assert_eq!(
        read["result"]["contents"][0]["uri"],
        format!("mcpb://two/{doc}"),
        "{read}"
    );
    let prompts = shim.request("prompts/list", json!({}));
    let names: Vec<&str> = prompts["result"]["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert!(
        names.contains(&"one.args-prompt") && names.contains(&"two.args-prompt"),
        "{names:?}"
    );

    // A profile that does not see the everything servers: their prompts and URIs are unknown,
    // exactly like made-up ones, and nothing of theirs is listed.
    let mut narrow = shim_on(&home, &path, &["stdio", "--profile", "narrow"]);
    narrow.initialize("2025-11-25");
    let hidden = narrow.request(
        "prompts/get",
        json!({"name": "one.args-prompt", "arguments": {"city": "x", "state": "y"}}),
    );
    let made_up = narrow.request("prompts/get", json!({"name": "zzz.args-prompt"}));
    assert_eq!(hidden["error"]["code"], made_up["error"]["code"]);
    assert_eq!(
        hidden["error"]["message"],
        "Unknown prompt: one.args-prompt"
    );
    let read = narrow.request(
        "resources/read",
        json!({"uri": format!("mcpb://one/{doc}")}),
    );
    assert_eq!(read["error"]["code"], -32002, "{read}");
    let read = narrow.request("resources/read", json!({"uri": doc}));
    assert_eq!(read["error"]["code"], -32002, "{read}");
    let listed = narrow.request("resources/list", json!({}));
    assert_eq!(listed["result"]["resources"], json!([]), "{listed}");
    let bad = narrow.request("completion/complete", json!({"ref": {"type": "ref/prompt", "name": "one.completable-prompt"}, "argument": {"name": "department", "value": "E"}}));
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Unknown prompt"),
        "{bad}"
    );
    let bad = narrow.request("resources/read", json!({}));
    assert_eq!(bad["error"]["code"], -32602, "{bad}");

    // Capabilities are the union of what the profile's upstreams offer: before the example
    // server ever started it may offer anything; once it said it has tools only, a new session
    // is offered tools only.
    let caps = |shim: &mut super::support::Shim| {
        shim.initialize("2025-11-25")["result"]["capabilities"].clone()
    };
    let _ = narrow.tool_names();
    let mut again = shim_on(&home, &path, &["stdio", "--profile", "narrow"]);
    let offered = caps(&mut again);
    assert!(offered.get("tools").is_some(), "{offered}");
    for absent in ["resources", "prompts", "completions"] {
        assert!(offered.get(absent).is_none(), "{absent}: {offered}");
    }
    let mut wide = shim_on(&home, &path, &["stdio"]);
    let offered = caps(&mut wide);
    assert_eq!(offered["resources"]["subscribe"], true, "{offered}");
    assert!(offered.get("prompts").is_some(), "{offered}");
}

#[test]
fn an_upstreams_resource_filter_hides_uris_on_every_path() {
    let home = two_everythings();
    let path = deps_path(&deps());
    let mut shim = shim_on(&home, &path, &["stdio", "--profile", "guarded"]);
    shim.initialize("2025-11-25");
    let (list, uris) = list_uris(&mut shim);
    let uris: Vec<&str> = uris.iter().map(String::as_str).collect();
    assert!(!uris.is_empty(), "{list}");
    assert!(
        uris.iter()
            .all(|u| u.starts_with("demo://resource/static/document/")
                && !u.ends_with("/architecture.md")),
        "{uris:?}"
    );
    let denied = "demo://resource/static/document/architecture.md";
    let allowed = uris[0].to_string();
    let read = shim.request("resources/read", json!({"uri": denied}));
    assert_eq!(read["error"]["code"], -32002, "{read}");
    let read = shim.request(
        "resources/read",
        json!({"uri": "demo://resource/dynamic/text/1"}),
    );
    assert_eq!(read["error"]["code"], -32002, "{read}");
    let read = shim.request("resources/read", json!({"uri": allowed}));
    assert_eq!(
        read["result"]["contents"][0]["uri"],
        allowed.as_str(),
        "{read}"
    );
    // Forms that could name another resource once decoded or resolved are refused too.
    for disguised in [
        "mcpb://guarded/demo://resource/static/document/x/../architecture.md",
        "demo://resource/static/document/..%2Farchitecture.md",
    ] {
        let read = shim.request("resources/read", json!({"uri": disguised}));
        assert_eq!(read["error"]["code"], -32002, "{disguised}: {read}");
    }
    let sub = shim.request("resources/subscribe", json!({"uri": denied}));
    assert_eq!(sub["error"]["code"], -32002, "{sub}");
    let templates = shim.request("resources/templates/list", json!({}));
    assert_eq!(
        templates["result"]["resourceTemplates"],
        json!([]),
        "{templates}"
    );
    let found = shim.call(
        "broker.search_tools",
        json!({"query": "architecture document", "kind": "resource"}),
    );
    let hits = found["result"]["structuredContent"]["results"].to_string();
    assert!(!hits.contains("architecture.md"), "{hits}");
}

#[test]
fn python_sdk_client_subscribes_to_a_resource_and_hears_its_updates_and_log_messages() {
    let (home, deps, path) = setup();
    let spec = shim_spec(
        &home,
        &path,
        &["stdio"],
        json!({
        "prefix": "everything.",
        "uri": "demo://resource/static/document/architecture.md",
        }),
    );
    let mut child = py_driver(&deps, &path, "py_notices.py", &spec);
    let out = read_result(&mut child);
    let _ = child.wait();
    assert!(out.get("timeout").is_none(), "{out}");
    assert_eq!(
        out["updated"][0], "demo://resource/static/document/architecture.md",
        "{out}"
    );
    assert_eq!(out["logs"][0]["logger"], "everything", "{out}");
}

#[test]
fn a_transparent_profile_exposes_its_one_upstream_without_renaming_anything() {
    let home = two_everythings();
    let path = deps_path(&deps());
    let mut shim = shim_on(&home, &path, &["stdio", "--profile", "solo"]);
    shim.initialize("2025-11-25");
    let tools = shim.tool_names();
    assert!(tools.contains(&"echo".to_string()), "{tools:?}");
    assert!(tools.iter().all(|t| !t.starts_with("one.")), "{tools:?}");
    let echo = shim.call("echo", json!({"message": "as it is"}));
    assert!(
        echo["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("as it is"),
        "{echo}"
    );
    let prompts = shim.request("prompts/list", json!({}));
    let names: Vec<&str> = prompts["result"]["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert!(names.contains(&"args-prompt"), "{names:?}");
    let got = shim.request(
        "prompts/get",
        json!({"name": "args-prompt", "arguments": {"city": "Oslo", "state": "Oslo"}}),
    );
    assert!(
        got["result"]["messages"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("Oslo"),
        "{got}"
    );
    let prefixed = shim.call("one.echo", json!({"message": "x"}));
    assert!(
        prefixed.get("error").is_some() || prefixed["result"]["isError"] == true,
        "{prefixed}"
    );
    // The config refuses namespace: false over more than one upstream.
    let bad = Home::with_config(
        "schema_version: 1\nupstreams:\n  a: {command: x}\n  b: {command: y}\nprofiles:\n  p: {namespace: false}\n",
    );
    let out = bad.run(&["config", "validate"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("namespace: false but sees 2 upstreams"));
}

#[test]
fn a_compact_profile_finds_resources_and_prompts_through_the_facade_search() {
    let home = two_everythings();
    let path = deps_path(&deps());
    let mut shim = shim_on(&home, &path, &["stdio", "--profile", "compact"]);
    shim.initialize("2025-11-25");
    let found = shim.call(
        "broker.search_tools",
        json!({"query": "architecture document", "kind": "resource"}),
    );
    let hits = &found["result"]["structuredContent"]["results"];
    assert_eq!(
        hits[0]["uri"], "demo://resource/static/document/architecture.md",
        "{found}"
    );
    assert_eq!(hits[0]["server"], "one");
    let found = shim.call(
        "broker.search_tools",
        json!({"query": "weather in a city", "kind": "prompt"}),
    );
    let hits = &found["result"]["structuredContent"]["results"];
    assert_eq!(hits[0]["name"], "one.args-prompt", "{found}");
    assert_eq!(hits[0]["required"], json!(["city"]), "{found}");
    // Tools stay the default kind.
    let found = shim.call("broker.search_tools", json!({"query": "echo a message"}));
    assert_eq!(
        found["result"]["structuredContent"]["results"][0]["name"], "one.echo",
        "{found}"
    );

    // The lists are kept like tool lists: a daemon started afresh finds them without
    // starting the upstream.
    drop(shim);
    assert!(home.run(&["stop"]).status.success());
    let mut shim = shim_on(&home, &path, &["stdio", "--profile", "compact"]);
    shim.initialize("2025-11-25");
    for (query, kind, key, want) in [
        (
            "architecture document",
            "resource",
            "uri",
            "demo://resource/static/document/architecture.md",
        ),
        ("weather in a city", "prompt", "name", "one.args-prompt"),
    ] {
        let found = shim.call("broker.search_tools", json!({"query": query, "kind": kind}));
        assert_eq!(
            found["result"]["structuredContent"]["results"][0][key], want,
            "{found}"
        );
    }
    let one = home.status()["upstreams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["name"] == "one")
        .cloned()
        .unwrap();
    assert_eq!(one["state"], "stopped", "{one}");
}

#[test]
fn the_upstream_hears_one_subscribe_and_one_unsubscribe_when_the_last_subscriber_ends() {
    use super::support::{fixture_config, session, wait_until};
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    let mut a = session(&home);
    let mut b = session(&home);
    for shim in [&mut a, &mut b] {
        let r = shim.request("resources/subscribe", json!({"uri": "fixture://note"}));
        assert_eq!(r["result"], json!({}), "{r}");
    }
    let said = |what: &str| home.log().matches(what).count();
    assert!(wait_until(std::time::Duration::from_secs(2), || said(
        "fixture: subscribe"
    ) == 1));
    let closed = said("session closed");
    drop(a);
    // The daemon has handled the end of `a` (where an unsubscribe would be decided) ...
    assert!(wait_until(std::time::Duration::from_secs(3), || said(
        "session closed"
    ) == closed
        + 1));
    assert_eq!(
        said("fixture: unsubscribe"),
        0,
        "another session still listens"
    );
    drop(b);
    assert!(
        wait_until(std::time::Duration::from_secs(3), || said(
            "fixture: unsubscribe \"fixture://note\""
        ) == 1),
        "{}",
        home.log()
    );
    assert_eq!(said("fixture: subscribe"), 1);
    // ... and the one unsubscribe the upstream heard is the last session's.
    assert_eq!(said("fixture: unsubscribe"), 1, "{}", home.log());
}
