//! The fixture itself speaks MCP well enough to be a fair upstream.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

#[test]
fn answers_the_handshake_lists_and_calls() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcpb-fixture"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut ask = |msg: Value| -> Value {
        writeln!(stdin, "{msg}").unwrap();
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    };
    let init = ask(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}),
    );
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    let list = ask(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    assert!(list["result"]["tools"].as_array().unwrap().len() > 10);
    let echo = ask(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}}),
    );
    assert_eq!(echo["result"]["content"][0]["text"], "hi");
    drop(stdin);
    assert!(child.wait().unwrap().success());
}
