//! `profile acceptance`: the calls it prints for a live client session are the probes, in
//! the client's names, and each one works when the client passes it on to the broker.

use serde_json::{Value, json};

use super::support::{Home, fixture};

fn home() -> Home {
    Home::with_config(&format!(
        "schema_version: 1\nupstreams:\n  fx:\n    command: \"{}\"\n    trust_annotations: true\n    smoke: {{query: \"echo some text\", tool: fx.echo, arguments: {{text: accepted}}, call: true}}\n  quiet: {{command: \"{0}\"}}\nprofiles:\n  codex: {{compact_tools_enabled: true, broker_tool_name_style: underscore, allow_mutating_upstreams: true}}\n  eb: {{compact_tools_enabled: true, facade_vocabulary: exec_broker, broker_tool_name_style: underscore, allow_mutating_upstreams: true, exec: {{languages: [python]}}}}\n",
        fixture().display()
    ))
}

/// The printed calls of one client: (name as the model calls it, arguments).
fn calls(text: &str) -> Vec<(String, Value)> {
    text.lines()
        .filter(|l| l.starts_with("mcp__"))
        .map(|l| {
            let (name, args) = l.split_once(' ').unwrap();
            (name.to_string(), serde_json::from_str(args).unwrap())
        })
        .collect()
}

#[test]
fn the_printed_calls_are_the_probes_in_each_clients_names_and_each_one_works() {
    let home = home();
    let out = home.run(&["profile", "acceptance", "codex"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    insta::assert_snapshot!("acceptance_codex_profile", text);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no smoke probe for quiet"),
        "an upstream without a probe is named"
    );

    // What Codex passes on for `mcp__mcp_broker__X` is X (the names are already plain with
    // the underscore style): every call answers, none with an error.
    let codex = home.run(&["profile", "acceptance", "codex", "--client", "codex"]);
    let mut shim = home.shim(&["--profile", "codex"]);
    shim.initialize("2025-11-25");
    let list = calls(&String::from_utf8_lossy(&codex.stdout));
    assert_eq!(list.len(), 4, "{list:?}");
    for (name, args) in list {
        let tool = name.strip_prefix("mcp__mcp_broker__").unwrap();
        let r = shim.call(tool, args);
        assert!(
            r["result"].is_object() && r["result"]["isError"] != true,
            "{tool}: {r}"
        );
        if tool == "broker_call_tool" {
            assert_eq!(r["result"]["content"][0]["text"], "accepted", "{r}");
        }
    }

    // The exec broker's vocabulary: the run's exec_id comes from exec_open, as the expectation
    // line says.
    let eb = home.run(&["profile", "acceptance", "eb", "--client", "codex"]);
    let text = String::from_utf8_lossy(&eb.stdout).to_string();
    assert!(text.contains("mcp__mcp_broker__servers_list {}"), "{text}");
    let mut shim = home.shim(&["--profile", "eb"]);
    shim.initialize("2025-11-25");
    let mut exec_id = String::new();
    for (name, mut args) in calls(&text) {
        let tool = name.strip_prefix("mcp__mcp_broker__").unwrap();
        if args.get("exec_id").is_some() {
            args["exec_id"] = json!(exec_id);
        }
        let r = shim.call(tool, args);
        assert!(r["result"]["isError"] != true, "{tool}: {r}");
        let data = &r["result"]["structuredContent"];
        match tool {
            "exec_open" => exec_id = data["exec_id"].as_str().unwrap().to_string(),
            "exec_run" => assert_eq!(data["result"], "accepted", "{r}"),
            _ => {}
        }
    }
    assert!(!exec_id.is_empty(), "{text}");
}
