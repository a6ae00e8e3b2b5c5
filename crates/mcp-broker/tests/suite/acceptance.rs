//! `profile acceptance`: the calls it prints for a live client session are the probes, in
//! the client's names, and each one works when the client passes it on to the broker.

use serde_json::{Value, json};

use super::interop::{py_driver, read_result, shim_spec};
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
    // the underscore style): every call answers through the official Python SDK client, none
    // with an error.
    let answers = |profile: &str| -> Vec<Value> {
        let out = home.run(&["profile", "acceptance", profile, "--client", "codex"]);
        let calls: Vec<Value> = calls(&String::from_utf8_lossy(&out.stdout))
            .into_iter()
            .map(|(name, args)| json!([name.strip_prefix("mcp__mcp_broker__").unwrap(), args]))
            .collect();
        let deps = super::support::deps();
        let path = super::support::deps_path(&deps);
        let spec = shim_spec(
            &home,
            &path,
            &["stdio", "--profile", profile],
            json!({"calls": calls}),
        );
        let mut child = py_driver(&deps, &path, "py_calls.py", &spec);
        let out = read_result(&mut child);
        let _ = child.wait();
        out.as_array().unwrap().clone()
    };
    let codex = answers("codex");
    assert_eq!(codex.len(), 4, "{codex:?}");
    for a in &codex {
        assert_eq!(a["is_error"], false, "{a}");
    }
    assert_eq!(
        codex[1]["data"]["results"][0]["name"], "fx_echo",
        "{codex:?}"
    );
    assert_eq!(codex[3]["data"], "accepted", "{codex:?}");

    // The exec broker's vocabulary: the run's exec_id comes from exec_open, as the expectation
    // line says.
    let eb = answers("eb");
    let tools: Vec<&str> = eb.iter().filter_map(|a| a["tool"].as_str()).collect();
    assert_eq!(
        tools,
        [
            "servers_list",
            "server_tools_list",
            "tool_info",
            "exec_open",
            "exec_run",
            "exec_close"
        ],
        "{eb:?}"
    );
    for a in &eb {
        assert_eq!(a["is_error"], false, "{a}");
    }
    assert_eq!(eb[4]["data"]["result"], "accepted", "{eb:?}");
}

/// A probe whose call `profile validate` refuses (a tool that may change something, without
/// `smoke.allow_mutating`) is never printed as a call, only why; the same probe allowed to
/// change something is printed, and a tool the config says is read-only is too.
#[test]
fn a_call_validate_refuses_is_never_printed() {
    let fx = fixture().display().to_string();
    let probe =
        "smoke: {query: \"echo some text\", tool: echo, arguments: {text: accepted}, call: true";
    let home = Home::with_config(&format!(
        "schema_version: 1\nupstreams:\n  wild: {{command: \"{fx}\", {probe}}}}}\n  allowed: {{command: \"{fx}\", {probe}, allow_mutating: true}}}}\n  listed: {{command: \"{fx}\", read_only_tools: [echo], {probe}}}}}\nprofiles:\n  codex: {{compact_tools_enabled: true, broker_tool_name_style: underscore, allow_mutating_upstreams: true}}\n"
    ));
    let validated = home.run(&["profile", "validate", "codex"]);
    let table = String::from_utf8_lossy(&validated.stdout).to_string();
    assert!(!validated.status.success(), "{table}");
    let refused: Vec<&str> = table.lines().filter(|l| l.contains("not called")).collect();
    assert!(
        refused.len() == 1 && refused[0].starts_with("wild"),
        "{table}"
    );
    let out = home.run(&["profile", "acceptance", "codex", "--client", "codex"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let called: Vec<Value> = calls(&text)
        .into_iter()
        .filter(|(name, _)| name.ends_with("call_tool"))
        .map(|(_, args)| args["name"].clone())
        .collect();
    assert_eq!(
        called,
        [json!("allowed_echo"), json!("listed_echo")],
        "{text}"
    );
    assert!(
        text.contains("# wild: wild_echo is not called: it may change something"),
        "{text}"
    );
}
