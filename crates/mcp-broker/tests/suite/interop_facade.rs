//! The compact facade with real parts: the official Python SDK client through a compact profile
//! over the reference filesystem server, and `measure` over the reference servers.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::interop::{read_result, setup, shim_spec};

#[test]
fn python_client_with_a_compact_profile_searches_describes_and_calls_with_a_projection() {
    let (home, deps, path) = setup();
    let data = home.root().join("data");
    std::fs::create_dir_all(data.join("docs")).unwrap();
    std::fs::write(data.join("docs/notes.md"), "# notes\n").unwrap();
    let spec = shim_spec(
        &home,
        &path,
        &["stdio", "--profile", "files"],
        json!({
        "query": "show the directory tree of a folder as JSON",
        "arguments": {"path": data},
        "projection": {"paths": ["[].name"]},
        }),
    );
    let mut child = Command::new(deps.join("venv/bin/python"))
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/py_facade.py"))
        .arg(spec.to_string())
        .env("PATH", &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = read_result(&mut child);
    let _ = child.wait();
    let tools: Vec<&str> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(tools.len(), 7, "the facade only: {tools:?}");
    assert!(tools.contains(&"broker.search_tools") && tools.contains(&"broker.call_tool"));
    assert_eq!(out["hits"][0], "filesystem.directory_tree", "{out}");
    let described = &out["described"]["tools"][0];
    assert_eq!(described["name"], "filesystem.directory_tree");
    assert_eq!(described["mutating"], false);
    assert!(
        described["inputSchema"]["properties"]["path"].is_object(),
        "{described}"
    );
    assert_eq!(out["is_error"], false, "{out}");
    let listed: Value = serde_json::from_str(out["content"][0]["text"].as_str().unwrap()).unwrap();
    let mut names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["docs", "hello.txt"], "{out}");
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e.as_object().unwrap().len() == 1),
        "only the projected field: {listed}"
    );
    // A write tool is not visible in this read-only profile, whatever the query.
    assert!(!out["hits"].to_string().contains("write_file"));
}

#[test]
fn measure_prints_the_table_for_the_interop_servers() {
    let (home, _deps, path) = setup();
    let out = home
        .cmd(&["measure", "--profile", "compact"])
        .env("PATH", &path)
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{table}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(table.starts_with("profile compact\nscope "), "{table}");
    for row in [
        "tool definitions",
        "bytes",
        "o200k_base tokens",
        "  everything",
        "  filesystem",
        "  memory",
        "  time",
    ] {
        assert!(
            table.lines().any(|l| l.starts_with(row)),
            "{row} missing:\n{table}"
        );
    }
    let json = home
        .cmd(&["measure", "--profile", "compact", "--json"])
        .env("PATH", &path)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&json.stdout).unwrap();
    let before: u64 = v["upstreams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["tokens"].as_u64().unwrap())
        .sum();
    let after = v["after"]["tokens"].as_u64().unwrap();
    assert!(after <= 1200, "facade {after} tokens");
    assert!(before > 5 * after, "before {before}, after {after}");
}
