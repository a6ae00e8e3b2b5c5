//! A project's upstream (`project: FOLDER`) shows only to sessions started in that folder:
//! listed, searched and called there; elsewhere absent from the list, from search (whichever
//! session built the profile's index first) and from calls.

use std::path::Path;

use serde_json::{Value, json};

use super::support::{Home, Shim, fixture};

fn session_in(home: &Home, cwd: &Path, profile: &str) -> Shim {
    let mut cmd = home.cmd(&["stdio", "--profile", profile]);
    cmd.current_dir(cwd);
    let mut shim = Shim::spawn(cmd);
    shim.initialize("2025-11-25");
    shim
}

fn found(r: &Value) -> Vec<String> {
    let text = r["result"]["content"][0]["text"].as_str().unwrap_or("{}");
    let v: Value = serde_json::from_str(text).unwrap_or_default();
    v["results"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn a_projects_upstream_shows_in_its_folder_only_in_lists_searches_and_calls() {
    let folders = tempfile::tempdir().unwrap();
    let app = folders.path().join("w/app");
    let evil = folders.path().join("w/app-evil");
    std::fs::create_dir_all(&app).unwrap();
    std::fs::create_dir_all(&evil).unwrap();
    let yaml = format!(
        "schema_version: 1\nbroker: {{call_timeout_ms: 5000}}\nupstreams:\n  fx: {{command: \"{fx}\", args: [--name, fx], trust_annotations: true, project: \"{app}\"}}\n  everyone: {{command: \"{fx}\", args: [--name, everyone], trust_annotations: true}}\nprofiles:\n  work: {{allow_mutating_upstreams: true}}\n  c: {{allow_mutating_upstreams: true, compact_tools_enabled: true}}\n",
        fx = fixture().display(),
        app = app.display()
    );
    let home = Home::with_config(&yaml);
    // The folder's session searches first, so the profile's index holds its upstream.
    let mut here = session_in(&home, &app, "work");
    assert!(here.tool_names().iter().any(|n| n == "fx.echo"));
    let mut here = session_in(&home, &app, "c");
    let hits = found(&here.call("broker.search_tools", json!({"query": "echo"})));
    assert!(hits.iter().any(|n| n == "fx.echo"), "{hits:?}");

    let mut there = session_in(&home, &evil, "work");
    let names = there.tool_names();
    assert!(
        !names.iter().any(|n| n.starts_with("fx.")) && names.iter().any(|n| n == "everyone.echo"),
        "{names:?}"
    );
    let r = there.call("fx.echo", json!({"message": "x"}));
    assert!(r["error"].is_object(), "{r}");
    let mut there = session_in(&home, &evil, "c");
    let hits = found(&there.call("broker.search_tools", json!({"query": "echo"})));
    assert!(
        !hits.iter().any(|n| n.starts_with("fx.")) && hits.iter().any(|n| n == "everyone.echo"),
        "{hits:?}"
    );
    let _ = home.run(&["stop"]);
}
