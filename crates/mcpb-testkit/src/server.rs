//! The fixture server: newline-delimited JSON-RPC on stdio, one thread per call.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::sync::Arc;
use std::sync::mpsc::{Sender, channel};

use parking_lot::Mutex;
use std::time::Duration;

use serde_json::{Value, json};

mod calls;

#[derive(Debug, Default, Clone)]
pub(crate) struct Options {
    /// Keep running after stdin closes (a server that ignores EOF).
    pub ignore_eof: bool,
    /// Start a long-lived grandchild (`sleep`) at start-up.
    pub grandchild: bool,
    pub slow_start_ms: u64,
    /// Extra generated tools beside the fixed ones.
    pub extra_tools: usize,
    /// Name prefix for this server in serverInfo.
    pub name: String,
    /// Protocol revision to answer `initialize` with (default: the client's).
    pub revision: Option<String>,
    /// Answer `server/discover` as a 2026-07-28 server and require the envelope on requests.
    pub modern: bool,
    /// Exit when asked `server/discover` (a server that dies on unknown methods).
    pub die_on_discover: bool,
    /// More tool definitions, one JSON object per line, re-read at every listing so a test can
    /// change a definition under a running server. Calls to them answer with their arguments.
    pub tools_file: Option<std::path::PathBuf>,
    /// Exit with this code at start-up, before reading anything (a server that cannot start).
    pub exit_at_start: Option<i32>,
    /// Exit at start-up unless this variable is set and not empty (a server that needs its
    /// API key).
    pub require_env: Option<String>,
    /// Apply `slow_start_ms` only while this file does not exist (then create it): slow once.
    pub slow_once: Option<std::path::PathBuf>,
    /// With `modern`: refuse `initialize` even on a fresh connection (2026-07-28 only).
    pub modern_only: bool,
    /// Answer the first `tools/list` only; ignore the later ones.
    pub hang_relist: bool,
    /// Append a line to this file for each `tools/list` answered (a test counts them).
    pub list_log: Option<std::path::PathBuf>,
    /// Wait this long between reading the tools file and answering `tools/list` (a change can
    /// then be announced while a listing is under way).
    pub list_delay_ms: u64,
    /// Offer the hostile tools (`hostile.rs`): what a sandboxed server must not manage.
    pub hostile: bool,
}

impl Options {
    pub(crate) fn parse(args: &[String]) -> Self {
        let mut o = Options {
            name: "fixture".into(),
            ..Options::default()
        };
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "--ignore-eof" => o.ignore_eof = true,
                "--grandchild" => o.grandchild = true,
                "--slow-start-ms" => {
                    o.slow_start_ms = it.next().and_then(|v| v.parse().ok()).unwrap_or(0)
                }
                "--tools" => o.extra_tools = it.next().and_then(|v| v.parse().ok()).unwrap_or(0),
                "--name" => o.name = it.next().cloned().unwrap_or_default(),
                "--revision" => o.revision = it.next().cloned(),
                "--modern" => o.modern = true,
                "--hostile" => o.hostile = true,
                "--die-on-discover" => o.die_on_discover = true,
                "--tools-file" => o.tools_file = it.next().map(Into::into),
                "--exit-at-start" => o.exit_at_start = it.next().and_then(|v| v.parse().ok()),
                "--require-env" => o.require_env = it.next().cloned(),
                "--slow-once" => o.slow_once = it.next().map(Into::into),
                "--modern-only" => o.modern_only = true,
                "--hang-relist" => o.hang_relist = true,
                "--list-log" => o.list_log = it.next().map(Into::into),
                "--list-delay-ms" => {
                    o.list_delay_ms = it.next().and_then(|v| v.parse().ok()).unwrap_or(0)
                }
                other => eprintln!("mcpb-fixture: ignoring unknown argument {other}"),
            }
        }
        o
    }
}

type Out = Arc<Mutex<std::io::Stdout>>;

fn send(out: &Out, msg: &Value) {
    let mut o = out.lock();
    let _ = writeln!(o, "{msg}");
    let _ = o.flush();
}

fn send_raw(out: &Out, line: &str) {
    let mut o = out.lock();
    let _ = o.write_all(line.as_bytes());
    let _ = o.write_all(b"\n");
    let _ = o.flush();
}

fn text(s: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": s.into()}], "isError": false})
}

fn tool(name: &str, description: &str, read_only: bool, props: Value) -> Value {
    json!({
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": props},
        "annotations": {"readOnlyHint": read_only},
    })
}

fn tools(opts: &Options) -> Vec<Value> {
    let mut t = process_tools();
    t.extend(wire_tools());
    t.extend(protocol_tools());
    t.push(described_tool());
    t.extend(file_tools(opts));
    if opts.hostile {
        t.extend(crate::hostile::tools());
    }
    for i in 0..opts.extra_tools {
        t.push(tool(
            &format!("extra_{i}"),
            &format!("Generated tool number {i}."),
            true,
            json!({}),
        ));
    }
    t
}

/// Tools that act on this process: echo, sleep, say what it is, crash, hang, leak, report progress.
fn process_tools() -> Vec<Value> {
    vec![
        tool(
            "echo",
            "Return the text.",
            true,
            json!({"text": {"type": "string"}}),
        ),
        tool(
            "sleep",
            "Answer after ms milliseconds.",
            true,
            json!({"ms": {"type": "integer"}}),
        ),
        tool(
            "pid",
            "This process's pid and process group.",
            true,
            json!({}),
        ),
        tool("env", "This process's environment.", true, json!({})),
        tool(
            "crash",
            "Exit with the given code before answering.",
            false,
            json!({"code": {"type": "integer"}}),
        ),
        tool("hang", "Never answer.", false, json!({})),
        tool(
            "say_secrets",
            "Say the values of the named environment variables everywhere a server can: on stderr (whole, and split across two lines), in a log notification, and in its error; exit first when `exit` is set.",
            true,
            json!({"vars": {"type": "array", "items": {"type": "string"}}, "exit": {"type": "boolean"}}),
        ),
        tool(
            "progress",
            "Send count progress notifications, interval_ms apart, then answer.",
            true,
            json!({"count": {"type": "integer"}, "interval_ms": {"type": "integer"}}),
        ),
    ]
}

/// Tools that misbehave on the wire: bad lines, huge lines, foreign ids, vendor fields, stalls.
fn wire_tools() -> Vec<Value> {
    vec![
        tool(
            "garbage",
            "Write lines (default 1) that are not JSON, then answer.",
            true,
            json!({}),
        ),
        tool(
            "bigline",
            "Write one line of mib MiB, then answer.",
            true,
            json!({"mib": {"type": "integer"}}),
        ),
        tool(
            "foreign",
            "Answer a request id never sent, then this one twice.",
            true,
            json!({}),
        ),
        tool(
            "vendor",
            "Answer with vendor fields everywhere.",
            true,
            json!({}),
        ),
        tool("error", "Answer with a JSON-RPC error.", true, json!({})),
        tool(
            "bigstderr",
            "Write one stderr line of kib KiB, then a short one, then answer.",
            true,
            json!({"kib": {"type": "integer"}}),
        ),
        tool(
            "escape",
            "Start a grandchild in a new session (setsid) and answer with its pid.",
            false,
            json!({}),
        ),
        tool(
            "big",
            "Answer with a text of kib KiB.",
            true,
            json!({"kib": {"type": "integer"}}),
        ),
        tool(
            "stall",
            "Answer, then stop reading stdin for good.",
            false,
            json!({}),
        ),
    ]
}

/// Tools that use the protocol both ways: `_meta`, list changes, requests to the client.
fn protocol_tools() -> Vec<Value> {
    vec![
        tool(
            "meta",
            "Answer with the request's _meta as JSON text.",
            true,
            json!({}),
        ),
        tool(
            "list_changed",
            "Announce a changed tool list, then answer.",
            true,
            json!({}),
        ),
        tool(
            "sample",
            "Ask the client for a sampling/createMessage, answer with its reply.",
            true,
            json!({}),
        ),
        tool(
            "roots",
            "Ask the client for roots/list, answer with its reply.",
            true,
            json!({}),
        ),
        tool(
            "needs_input",
            "Answer with a 2026-07-28 input_required result.",
            true,
            json!({}),
        ),
    ]
}

/// A definition with every optional field, vendor ones too, to check they reach the client.
fn described_tool() -> Value {
    json!({
        "name": "described",
        "title": "Described tool",
        "description": "A tool with every optional field.",
        "inputSchema": {"type": "object", "properties": {"n": {"type": "number", "minimum": 1.5}}},
        "outputSchema": {"type": "object", "properties": {"n": {"type": "number"}}},
        "annotations": {"readOnlyHint": true, "x-vendor-hint": "kept"},
        "icons": [{"src": "data:image/png;base64,AAAA", "mimeType": "image/png"}],
        "_meta": {"vendor/tool": {"k": [1, 2.50, "three"]}},
        "x-unknown-top-level": true,
    })
}

fn raw_file_tools(opts: &Options) -> Vec<String> {
    let Some(path) = &opts.tools_file else {
        return Vec::new();
    };
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.trim_start().starts_with('{') && serde_json::from_str::<Value>(l).is_err())
        .map(str::to_string)
        .collect()
}

fn file_tools(opts: &Options) -> Vec<Value> {
    let Some(path) = &opts.tools_file else {
        return Vec::new();
    };
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|mut t| {
            // Data-set lines carry fields of their own; a definition keeps the MCP ones.
            if let Some(obj) = t.as_object_mut() {
                obj.retain(|k, _| {
                    matches!(
                        k.as_str(),
                        "name"
                            | "title"
                            | "description"
                            | "inputSchema"
                            | "outputSchema"
                            | "annotations"
                            | "_meta"
                            | "icons"
                    )
                });
            }
            t
        })
        .collect()
}

struct Shared {
    out: Out,
    /// Answers from the client to our own requests, by id.
    waiting: Mutex<HashMap<String, Sender<Value>>>,
    next: Mutex<u64>,
}

pub(crate) fn run(opts: Options) {
    let grandchild = start(&opts);
    let shared = Arc::new(Shared {
        out: Arc::new(Mutex::new(std::io::stdout())),
        waiting: Mutex::new(HashMap::new()),
        next: Mutex::new(0),
    });
    let mut connection = Connection {
        opts: &opts,
        shared,
        served_discover: false,
        initialized: false,
        listed: false,
    };
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        connection.handle(&line);
    }
    if opts.ignore_eof {
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    if let Some(mut g) = grandchild {
        // Leave it running on purpose: the broker must kill it through the process group.
        let _ = g.try_wait();
    }
}

/// Starts up as the options say: exits when the environment lacks a variable or when asked to,
/// sleeps a slow start, and gives the grandchild when one was asked for.
fn start(opts: &Options) -> Option<std::process::Child> {
    if let Some(var) = &opts.require_env
        && std::env::var(var).map_or(true, |v| v.is_empty())
    {
        eprintln!("mcpb-fixture: {var} is not set; this server needs it");
        std::process::exit(3);
    }
    let slow = match &opts.slow_once {
        Some(marker) if marker.exists() => false,
        Some(marker) => std::fs::write(marker, b"started once").is_ok(),
        None => true,
    };
    if slow && opts.slow_start_ms > 0 {
        std::thread::sleep(Duration::from_millis(opts.slow_start_ms));
    }
    // After the slow start, so a server can also fail slowly.
    if let Some(code) = opts.exit_at_start {
        eprintln!("fixture: cannot start (exit code {code} on purpose)");
        std::process::exit(code);
    }
    if opts.grandchild {
        return std::process::Command::new("sleep").arg("1000").spawn().ok();
    }
    None
}

/// The client on stdio and what it has done so far.
struct Connection<'a> {
    opts: &'a Options,
    shared: Arc<Shared>,
    // A 2026-07-28 server serves one era per connection, as the SDKs do.
    served_discover: bool,
    initialized: bool,
    listed: bool,
}

impl Connection<'_> {
    fn send(&self, msg: &Value) {
        send(&self.shared.out, msg);
    }

    /// Answers one line from the client.
    fn handle(&mut self, line: &str) {
        let Ok(msg) = serde_json::from_str::<Value>(line) else {
            self.send(
                &json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "parse error"}}),
            );
            return;
        };
        let id = msg.get("id").cloned();
        let method = msg
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_string);
        let opts = self.opts;
        match (method.as_deref(), id) {
            (None, Some(id)) => {
                let key = id.to_string();
                if let Some(tx) = self.shared.waiting.lock().remove(&key) {
                    let _ = tx.send(msg.clone());
                }
            }
            (Some("server/discover"), Some(id)) => self.discover(id),
            (Some("initialize"), Some(id)) if self.served_discover || opts.modern_only => self.send(
                &json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32600,
                "message": "connection is serving the 2026-07-28 protocol; the initialize handshake is not accepted"}}),
            ),
            (Some(m), Some(id))
                if opts.modern
                    && !self.initialized
                    && m != "initialize"
                    && msg["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"]
                        != "2026-07-28" =>
            {
                self.send(&json!({"jsonrpc": "2.0", "id": id,
                    "error": {"code": -32602, "message": "the 2026-07-28 envelope is missing"}}));
            }
            (Some("initialize"), Some(id)) => self.initialize(id, &msg),
            (Some("tools/list"), Some(_)) if opts.hang_relist && self.listed => {}
            (Some("tools/list"), Some(id)) => self.list_tools(id),
            (Some("tools/call"), Some(id)) if msg["params"]["name"] == "stall" => {
                // Answer, then never read stdin again: the broker's writes pile up.
                self.send(&json!({"jsonrpc": "2.0", "id": id, "result": text("stalled")}));
                loop {
                    std::thread::sleep(Duration::from_secs(3600));
                }
            }
            (Some("tools/call"), Some(id)) => self.call_tool(id, msg),
            // One resource, and subscriptions said on stderr (the broker's log), so a test sees
            // what the broker passes on.
            (Some("resources/list"), Some(id)) => self.send(
                &json!({"jsonrpc": "2.0", "id": id, "result": {"resources": [
                    {"uri": "fixture://note", "name": "note", "mimeType": "text/plain"}]}}),
            ),
            (Some(m @ ("resources/subscribe" | "resources/unsubscribe")), Some(id)) => {
                eprintln!("fixture: {} {}", &m[10..], msg["params"]["uri"]);
                self.send(&json!({"jsonrpc": "2.0", "id": id, "result": {}}));
            }
            (Some("ping"), Some(id)) => {
                self.send(&json!({"jsonrpc": "2.0", "id": id, "result": {}}))
            }
            (Some(_), Some(id)) => self.send(&json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": "method not found"}})),
            (Some(m), None) => {
                if m == "notifications/cancelled" {
                    eprintln!("fixture: cancelled {}", msg["params"]["requestId"]);
                }
            }
            (None, None) => {}
        }
    }

    fn discover(&mut self, id: Value) {
        if self.opts.die_on_discover {
            eprintln!("fixture: unknown method server/discover, exiting");
            std::process::exit(2);
        }
        if self.opts.modern {
            self.served_discover = true;
            self.send(&json!({"jsonrpc": "2.0", "id": id, "result": {
            "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
            "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}}));
        } else {
            self.send(&json!({"jsonrpc": "2.0", "id": id,
            "error": {"code": -32601, "message": "method not found"}}));
        }
    }

    fn initialize(&mut self, id: Value, msg: &Value) {
        let requested = msg["params"]["protocolVersion"]
            .as_str()
            .unwrap_or("2025-11-25")
            .to_string();
        let version = self.opts.revision.clone().unwrap_or(requested);
        self.initialized = true;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": true},
                "resources": {"subscribe": true}},
            "serverInfo": {"name": self.opts.name, "version": "1.0.0"},
        }}));
    }

    fn list_tools(&mut self, id: Value) {
        self.listed = true;
        if let Some(path) = &self.opts.list_log
            && let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
        {
            let _ = writeln!(f, "listed");
        }
        // Lines of the tools file this parser cannot read (too deep, say) go out as
        // written, so the broker meets them as a hostile server would send them.
        let mut items: Vec<String> = tools(self.opts).iter().map(Value::to_string).collect();
        items.extend(raw_file_tools(self.opts));
        std::thread::sleep(Duration::from_millis(self.opts.list_delay_ms));
        send_raw(
            &self.shared.out,
            &format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"tools\":[{}]}}}}",
                items.join(",")
            ),
        );
    }

    /// Answers a tool from the tools file with its arguments, any other on a thread of its own.
    fn call_tool(&self, id: Value, msg: Value) {
        let from_file = file_tools(self.opts)
            .iter()
            .any(|t| t["name"] == msg["params"]["name"]);
        if from_file {
            let args = msg["params"]["arguments"].clone();
            self.send(&json!({"jsonrpc": "2.0", "id": id, "result": {
                "content": [{"type": "text", "text": args.to_string()}],
                "structuredContent": args,
            }}));
            return;
        }
        let shared = self.shared.clone();
        std::thread::spawn(move || calls::call(&shared, id, &msg["params"]));
    }
}

fn ask_client(shared: &Shared, method: &str, params: Value) -> Option<Value> {
    let id = {
        let mut n = shared.next.lock();
        *n += 1;
        format!("fixture-{n}")
    };
    let (tx, rx) = channel();
    shared
        .waiting
        .lock()
        .insert(Value::String(id.clone()).to_string(), tx);
    send(
        &shared.out,
        &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
    );
    rx.recv_timeout(Duration::from_secs(10)).ok()
}
