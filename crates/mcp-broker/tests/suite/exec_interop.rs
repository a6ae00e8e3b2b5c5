//! Code runs with real parts: the official Python SDK client drives run_code and the exec_*
//! tools through the shim, and the runs call the reference filesystem and memory servers.

use serde_json::{Value, json};

use super::interop::{py_driver, read_result, setup, shim_spec};

const PYTHON_RUN: &str = r#"
from mcp_sdk import call_tool, result
text = call_tool("filesystem.read_text_file", {"path": DATA + "/hello.txt"})
body = text["content"] if isinstance(text, dict) else text
words = len(body.split())
call_tool("memory.create_entities", {"entities": [
    {"name": "hello.txt", "entityType": "file", "observations": [f"{words} words"]}]})
graph = call_tool("memory.open_nodes", {"names": ["hello.txt"]})
result({"words": words, "stored": graph["entities"][0]["observations"]})
"#;

const JS_RUN: &str = r#"
const text = await callTool("filesystem.read_text_file", {path: DATA + "/hello.txt"});
const body = typeof text === "object" ? text.content : text;
const words = body.split(/\s+/).filter(Boolean).length;
await callTool("memory.create_entities", {entities: [
    {name: "hello.js", entityType: "file", observations: [`${words} words (js)`]}]});
const graph = await callTool("memory.open_nodes", {names: ["hello.js"]});
await result({words, stored: graph.entities[0].observations});
"#;

#[test]
fn python_sdk_client_runs_code_that_reads_a_file_and_stores_a_summary_and_uses_the_long_form() {
    let (home, deps, path) = setup();
    let data = home.root().join("data");
    let data_lit = format!("{:?}", data.display().to_string());
    let code = PYTHON_RUN.replace("DATA", &data_lit);
    let js = JS_RUN.replace("DATA", &data_lit);
    let spec = shim_spec(
        &home,
        &path,
        &["stdio", "--profile", "code"],
        json!({
        "runs": [{"language": "python", "code": code}, {"language": "javascript", "code": js}],
        }),
    );
    let mut child = py_driver(&deps, &path, "py_exec.py", &spec);
    let out = read_result(&mut child);
    let _ = child.wait();
    let tools: Vec<&str> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for t in [
        "broker.run_code",
        "broker.exec_open",
        "broker.exec_run",
        "broker.exec_close",
    ] {
        assert!(tools.contains(&t), "{tools:?}");
    }
    let run = &out["runs"][0];
    assert_eq!(run["status"], "ok", "{run}");
    assert_eq!(
        run["result"],
        json!({"words": 5, "stored": ["5 words"]}),
        "{run}"
    );
    let outcomes: Vec<&str> = run["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["ok", "ok", "ok"], "{run}");
    let js = &out["runs"][1];
    assert_eq!(js["status"], "ok", "{js}");
    assert_eq!(
        js["result"],
        json!({"words": 5, "stored": ["5 words (js)"]}),
        "{js}"
    );
    // The memory server really holds it: its file is outside the jail and was written by it.
    let memory = std::fs::read_to_string(data.join("memory.jsonl")).unwrap();
    assert!(
        memory.contains("5 words") && memory.contains("5 words (js)"),
        "{memory}"
    );

    let long = &out["long"];
    assert_eq!(out["upload"]["bytes"], 35, "{out}");
    assert_eq!(long["first"]["status"], "ok", "{long}");
    assert_eq!(
        long["first"]["artifacts"][0]["name"], "report.txt",
        "{long}"
    );
    assert_eq!(long["second"]["result"], "REMEMBERED", "{long}");
    assert!(
        long["artifact"]
            .as_str()
            .unwrap()
            .contains("a long report a long report"),
        "{long}"
    );
    assert_eq!(long["closed"]["removed"], true, "{long}");
    assert_eq!(long["after_close_error"], true, "{long}");
    assert!(
        long["after_close_text"]
            .as_str()
            .unwrap()
            .contains("unknown exec id"),
        "{long}"
    );
}

#[test]
fn python_sdk_client_uses_the_exec_broker_vocabulary() {
    let deps = super::support::deps();
    let path = super::support::deps_path(&deps);
    let home = super::support::Home::with_config(
        r#"schema_version: 1
upstreams:
  example: {command: "{broker.exe}", args: [example-server], trust_annotations: true}
profiles:
  default: {}
  eb:
    compact_tools_enabled: true
    allow_mutating_upstreams: true
    facade_vocabulary: exec_broker
    exec: {languages: [python]}
"#,
    );
    let spec = shim_spec(
        &home,
        &path,
        &["stdio", "--profile", "eb"],
        json!({
            "server": "example",
            "code": "from mcp_sdk import call_tool, result\nresult(call_tool('example.echo', {'message': 'via exec_run'}))",
            "allow": ["example.*"],
        }),
    );
    let mut child = py_driver(&deps, &path, "py_vocab.py", &spec);
    let out = read_result(&mut child);
    let _ = child.wait();
    let mut tools: Vec<&str> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    tools.sort_unstable();
    assert_eq!(
        tools,
        [
            "exec_close",
            "exec_get_artifact",
            "exec_open",
            "exec_run",
            "server_tools_list",
            "servers_list",
            "tool_info"
        ],
        "{out}"
    );
    assert_eq!(out["servers"]["servers"][0]["name"], "example", "{out}");
    let page = &out["page"];
    assert_eq!(page["server"], "example");
    let listed: Vec<&str> = page["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(listed.contains(&"example.echo"), "{page}");
    assert!(
        page["tools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["mutating"].is_boolean())
    );
    assert!(page.get("next_cursor").is_none(), "one page: {page}");
    assert_eq!(out["info"]["tools"][0]["name"], listed[0], "{out}");
    assert!(out["info"]["tools"][0]["inputSchema"].is_object());
    assert_eq!(out["ran_is_error"], false, "{out}");
    assert_eq!(out["ran"]["status"], "ok", "{out}");
    assert_eq!(out["ran"]["result"], "via exec_run", "{out}");
    assert_eq!(out["closed"]["removed"], true, "{out}");
}
