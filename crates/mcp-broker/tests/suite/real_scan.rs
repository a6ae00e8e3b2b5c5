//! The description scan against real servers as they are: every tool definition of every real
//! server the tests install (the reference servers, and Lark's official server with all of its
//! 1,271 tools in English and in Chinese, whose generated docs carry zero-width spaces and soft
//! hyphens) passes the broker unquarantined, so a client sees through the broker every tool it
//! sees directly.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::support::{Home, Shim, deps, deps_path};

/// Every tool Lark's server can offer, by the names its generated tool table gives.
fn lark_tools(deps: &Path, path: &str) -> String {
    let index = deps.join(
        "lark/node_modules/@larksuiteoapi/lark-mcp/dist/mcp-tool/tools/en/gen-tools/index.js",
    );
    let out = Command::new("node")
        .arg("-e")
        .arg(format!(
            "console.log(require({:?}).GenTools.map(t => t.name).join(','))",
            index.display().to_string()
        ))
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The tool names a server lists when a client talks to it directly.
fn direct_names(command: &Path, args: &[String], path: &str) -> Vec<String> {
    let mut child = Command::new(command)
        .args(args)
        .env_clear()
        .env("PATH", path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut send = |m: Value| writeln!(stdin, "{m}").unwrap();
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "direct", "version": "1"}}}),
    );
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let mut line = String::new();
    let names = loop {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "the server closed");
        let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        if v["id"] == 2 {
            break v["result"]["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_string())
                .collect();
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    names
}

#[test]
fn no_tool_of_a_real_server_is_quarantined() {
    let deps = deps();
    let path = deps_path(&deps);
    let npm = deps.join("npm/node_modules/.bin");
    let venv = deps.join("venv/bin");
    // Lark's server is pointed at a loopback listener of this test's own; listing makes no
    // request, and none could leave the machine.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let domain = format!("http://{}", listener.local_addr().unwrap());
    let lark = deps.join("lark/node_modules/.bin/lark-mcp");
    let all = lark_tools(&deps, &path);
    let lark_args = |lang: &str| -> Vec<String> {
        [
            "mcp",
            "-a",
            "cli_test",
            "-s",
            "not-a-secret",
            "-d",
            &domain,
            "-l",
            lang,
            "-t",
            &all,
        ]
        .map(String::from)
        .to_vec()
    };
    let mut home = Home::new();
    let data = home.root().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let repo = home.root().join("repo");
    assert!(
        Command::new("git")
            .args(["init", "-q"])
            .arg(&repo)
            .status()
            .unwrap()
            .success()
    );
    let servers: Vec<(&str, std::path::PathBuf, Vec<String>)> = vec![
        ("everything", npm.join("mcp-server-everything"), vec![]),
        (
            "filesystem",
            npm.join("mcp-server-filesystem"),
            vec![data.display().to_string()],
        ),
        ("memory", npm.join("mcp-server-memory"), vec![]),
        ("github", npm.join("mcp-server-github"), vec![]),
        ("time", venv.join("mcp-server-time"), vec![]),
        (
            "git",
            venv.join("mcp-server-git"),
            vec!["--repository".into(), repo.display().to_string()],
        ),
        ("lark_en", lark.clone(), lark_args("en")),
        ("lark_zh", lark.clone(), lark_args("zh")),
    ];
    let mut yaml =
        String::from("schema_version: 1\nbroker: {first_list_wait_ms: 120000}\nupstreams:\n");
    let mut direct = BTreeMap::new();
    for (name, command, args) in &servers {
        yaml += &format!(
            "  {name}: {{command: {}, args: {}, env: {{MEMORY_FILE_PATH: {}}}}}\n",
            json!(command),
            json!(args),
            json!(data.join("memory.jsonl"))
        );
        direct.insert(name.to_string(), direct_names(command, args, &path));
    }
    yaml += "profiles:\n  default: {allow_mutating_upstreams: true}\n";
    let cfg = home.root().join("real.yaml");
    std::fs::write(&cfg, yaml).unwrap();
    home.config = Some(cfg);
    let mut cmd = home.cmd(&["stdio"]);
    cmd.env("PATH", &path);
    let mut shim = Shim::spawn(cmd);
    shim.initialize("2025-11-25");
    let listed = shim.tool_names();
    let status = home.status();
    let quarantined = &status["catalog"]["quarantined"];
    assert_eq!(quarantined, &json!([]), "quarantined: {quarantined:#}");
    // Every tool a client sees directly it sees through the broker (the broker may see more:
    // it tells servers it can answer sampling, elicitation and roots, which some offer tools for).
    // A name over 64 characters is exposed shortened with a hash: those are counted.
    for (name, names) in &direct {
        assert!(!names.is_empty(), "{name} listed nothing directly");
        let exposed = |n: &String| format!("{name}.{n}");
        let missing: Vec<&String> = names
            .iter()
            .filter(|n| exposed(n).len() <= 64 && !listed.contains(&exposed(n)))
            .collect();
        assert!(
            missing.is_empty(),
            "{name}: not through the broker: {missing:?}"
        );
        let through = listed
            .iter()
            .filter(|n| n.starts_with(&format!("{name}.")))
            .count();
        assert!(
            through >= names.len(),
            "{name}: {through} of {}",
            names.len()
        );
    }
    assert!(
        direct["lark_en"].len() > 1000,
        "{}",
        direct["lark_en"].len()
    );
    // The notes are there for a person: Lark's pasted zero-width spaces are seen, not held.
    let notes = status["catalog"]["findings"].as_array().unwrap();
    assert!(
        notes
            .iter()
            .any(|f| f["detail"].as_str().unwrap().contains("U+200B") && f["severity"] == "note"),
        "{notes:?}"
    );
    assert!(notes.iter().all(|f| f["severity"] == "note"), "{notes:?}");
}
