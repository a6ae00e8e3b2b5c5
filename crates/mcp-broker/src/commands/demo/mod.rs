//! `mcp-broker demo`: the whole path a real client takes, on the embedded default config, in a
//! temporary runtime dir so it never touches the user's own daemon: a shim starts the daemon, an
//! MCP session lists tools and calls them, then the daemon stops and takes its upstream with it.

pub(crate) mod example_server;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitCode, Stdio};
use std::time::Instant;

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::fail;

pub(crate) fn run() -> ExitCode {
    match demo() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(
            &format!("mcp-broker demo failed: {e:#}"),
            &["run it again with MCP_BROKER_LOG=debug for details"],
        ),
    }
}

struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Client {
    fn request(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        self.next_id += 1;
        let msg = json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params});
        let stdin = self.stdin.as_mut().context("stdin closed")?;
        writeln!(stdin, "{msg}")?;
        stdin.flush()?;
        let mut line = String::new();
        if self.stdout.read_line(&mut line)? == 0 {
            bail!("the shim closed its output");
        }
        let v: Value = serde_json::from_str(&line)?;
        if let Some(err) = v.get("error") {
            bail!("{method} failed: {err}");
        }
        Ok(v["result"].clone())
    }

    fn call(&mut self, name: &str, arguments: Value) -> anyhow::Result<Value> {
        self.request("tools/call", json!({"name": name, "arguments": arguments}))
    }

    /// The MCP handshake; the server's answer.
    fn initialize(&mut self) -> anyhow::Result<Value> {
        let init = self.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "mcp-broker-demo", "version": env!("CARGO_PKG_VERSION")}}),
        )?;
        self.notify("notifications/initialized")?;
        Ok(init)
    }

    fn notify(&mut self, method: &str) -> anyhow::Result<()> {
        let stdin = self.stdin.as_mut().context("stdin closed")?;
        writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "method": method}))?;
        Ok(())
    }
}

fn text_of(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

fn demo() -> anyhow::Result<()> {
    let exe = std::env::current_exe()?;
    let home = tempdir()?;
    outln!("mcp-broker demo (runtime dir {})", home.display());
    let t0 = Instant::now();
    raw_session(&exe, &home, t0)?;
    // The same upstream through the compact facade: search, call, then code that calls tools.
    let mut c = open(&exe, &home, Some("compact"))?;
    c.initialize()?;
    facade_calls(&mut c)?;
    code_runs(&mut c)?;
    drop(c.stdin.take());
    c.child.wait()?;
    stop(&exe, &home)?;
    outln!("done in {:.0} ms", t0.elapsed().as_secs_f64() * 1000.0);
    Ok(())
}

/// Steps 1-6: the default profile's raw tools, listed and called, then the session closed.
fn raw_session(exe: &std::path::Path, home: &std::path::Path, t0: Instant) -> anyhow::Result<()> {
    let mut c = open(exe, home, None)?;
    let init = c.initialize()?;
    outln!(
        "1. shim started the daemon and the session opened in {:.1} ms (protocol {})",
        t0.elapsed().as_secs_f64() * 1000.0,
        init["protocolVersion"].as_str().unwrap_or("?")
    );
    let t = Instant::now();
    let tools = c.request("tools/list", json!({}))?;
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .collect();
    outln!(
        "2. tools/list started upstream 'example' and returned {} tools in {:.1} ms: {}",
        names.len(),
        t.elapsed().as_secs_f64() * 1000.0,
        names.join(", ")
    );
    let t = Instant::now();
    let echo = c.call(
        "example.echo",
        json!({"message": "hello through the broker"}),
    )?;
    outln!(
        "3. example.echo answered {:?} in {:.2} ms",
        text_of(&echo),
        t.elapsed().as_secs_f64() * 1000.0
    );
    let sum = c.call("example.add", json!({"a": 2, "b": 40}))?;
    outln!("4. example.add(2, 40) = {}", text_of(&sum));
    c.call("example.append_note", json!({"text": "first note"}))?;
    let notes = c.call("example.list_notes", json!({}))?;
    outln!(
        "5. example.append_note then example.list_notes -> {:?}",
        text_of(&notes)
    );
    drop(c.stdin.take());
    let status = c.child.wait()?;
    outln!("6. client closed stdin; shim exited with {status}");
    Ok(())
}

/// Step 7: the facade's listing, a search, and a call of what it found.
fn facade_calls(c: &mut Client) -> anyhow::Result<()> {
    let facade = c.request("tools/list", json!({}))?;
    let count = facade["tools"].as_array().map_or(0, Vec::len);
    let found = c.call(
        "broker.search_tools",
        json!({"query": "add two numbers", "limit": 2}),
    )?;
    let hits: Value = serde_json::from_str(&text_of(&found)).unwrap_or(Value::Null);
    let top = hits["results"][0]["name"]
        .as_str()
        .unwrap_or("?")
        .to_string();
    let sum = c.call(
        "broker.call_tool",
        json!({"name": top, "arguments": {"a": 1, "b": 1}}),
    )?;
    outln!(
        "7. profile 'compact' lists {count} broker.* tools; broker.search_tools(\"add two numbers\") -> {top}; broker.call_tool({top}, 1, 1) = {}",
        text_of(&sum)
    );
    Ok(())
}

/// Step 8: code in each language, run in the sandbox, calling tools through the SDK.
fn code_runs(c: &mut Client) -> anyhow::Result<()> {
    for (language, code) in [
        (
            "python",
            "from mcp_sdk import call_tool, result\n\
             total = call_tool('example.add', {'a': 20, 'b': 22})\n\
             result({'total': total, 'echo': call_tool('example.echo', {'message': 'from a sandbox'})})",
        ),
        (
            "javascript",
            "const [x, y] = await Promise.all([callTool('example.add', {a: 1, b: 2}), \
             callTool('example.add', {a: 3, b: 4})]);\nawait result({x, y});",
        ),
    ] {
        let t = Instant::now();
        let run = c.call(
            "broker.run_code",
            json!({"code": code, "language": language, "allow": ["example.*"]}),
        )?;
        let data = &run["structuredContent"];
        let reason = data["reason"]
            .as_str()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default();
        outln!(
            "8. broker.run_code ({language}, sandboxed): {} {} after {} tool calls in {:.0} ms{reason}",
            data["status"].as_str().unwrap_or("?"),
            data["result"],
            data["calls"].as_array().map_or(0, Vec::len),
            t.elapsed().as_secs_f64() * 1000.0
        );
    }
    Ok(())
}

/// Steps 9-10: the daemon stopped, its socket gone; the runtime dir removed when it was clean.
fn stop(exe: &std::path::Path, home: &std::path::Path) -> anyhow::Result<()> {
    let stop = Command::new(exe)
        .arg("stop")
        .env(mcpb_config::env::HOME, home)
        .env_remove(mcpb_config::env::CONFIG)
        .stdout(Stdio::piped())
        .output()?;
    out!("9. {}", String::from_utf8_lossy(&stop.stdout));
    let socket_gone = !home.join("sockets/broker.sock").exists();
    outln!("10. socket removed: {socket_gone}");
    if !stop.status.success() || !socket_gone {
        // Kept for reading: the runtime dir and its log say what went wrong.
        bail!(
            "the daemon did not stop cleanly; its log is {}",
            home.join("logs/daemon.log").display()
        );
    }
    let _ = std::fs::remove_dir_all(home);
    Ok(())
}

/// A client session through `mcp-broker stdio`, as an MCP client would open it.
fn open(
    exe: &std::path::Path,
    home: &std::path::Path,
    profile: Option<&str>,
) -> anyhow::Result<Client> {
    let mut cmd = Command::new(exe);
    cmd.arg("stdio");
    if let Some(p) = profile {
        cmd.args(["--profile", p]);
    }
    let mut child = cmd
        .env(mcpb_config::env::HOME, home)
        .env_remove(mcpb_config::env::CONFIG)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("cannot start `mcp-broker stdio`")?;
    let stdin = child.stdin.take();
    let stdout = BufReader::new(child.stdout.take().context("no stdout")?);
    Ok(Client {
        child,
        stdin,
        stdout,
        next_id: 0,
    })
}

fn tempdir() -> anyhow::Result<std::path::PathBuf> {
    // Short and private: Unix socket paths are limited to 107 bytes.
    let base = std::env::temp_dir();
    for n in 0..100u32 {
        let p = base.join(format!("mcpb-demo-{}-{n}", std::process::id()));
        if std::fs::create_dir(&p).is_ok() {
            return Ok(p);
        }
    }
    bail!(
        "cannot create a temporary directory under {}",
        base.display()
    )
}
