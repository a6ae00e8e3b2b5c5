//! The fixed tools' answers: each call runs on a thread of its own.

use std::time::Duration;

use serde_json::{Value, json};

use super::{Shared, ask_client, send, send_raw, text};

/// One `tools/call` under way: where its answer goes and what it asked.
struct Call<'a> {
    shared: &'a Shared,
    id: Value,
    params: &'a Value,
}

impl Call<'_> {
    fn args(&self) -> &Value {
        &self.params["arguments"]
    }

    fn answer(&self, result: Value) {
        send(
            &self.shared.out,
            &json!({"jsonrpc": "2.0", "id": self.id, "result": result}),
        );
    }

    fn send(&self, msg: &Value) {
        send(&self.shared.out, msg);
    }

    fn send_raw(&self, line: &str) {
        send_raw(&self.shared.out, line);
    }
}

pub(super) fn call(shared: &Shared, id: Value, params: &Value) {
    let call = Call { shared, id, params };
    let args = call.args();
    if let Some(said) = crate::hostile::call(params["name"].as_str().unwrap_or(""), args) {
        return call.answer(text(said));
    }
    match params["name"].as_str().unwrap_or("") {
        "echo" => echo(&call),
        "sleep" => {
            std::thread::sleep(Duration::from_millis(args["ms"].as_u64().unwrap_or(0)));
            call.answer(text("slept"));
        }
        "pid" => call.answer(pid()),
        "env" => {
            let env: serde_json::Map<String, Value> = std::env::vars()
                .map(|(k, v)| (k, Value::String(v)))
                .collect();
            call.answer(text(Value::Object(env).to_string()));
        }
        "crash" => {
            eprintln!("fixture: crashing on purpose");
            std::process::exit(args["code"].as_i64().unwrap_or(3) as i32);
        }
        "say_secrets" => say_secrets(&call),
        "hang" => loop {
            std::thread::sleep(Duration::from_secs(3600));
        },
        "progress" => progress(&call),
        "big" => call.answer(text(
            "b".repeat(args["kib"].as_u64().unwrap_or(1024) as usize * 1024),
        )),
        "escape" => call.answer(text(escape())),
        "bigstderr" => {
            let kib = args["kib"].as_u64().unwrap_or(100) as usize;
            eprintln!("{}", "e".repeat(kib * 1024));
            eprintln!("fixture: after the long stderr line");
            call.answer(text("after bigstderr"));
        }
        "garbage" => {
            for _ in 0..args["lines"].as_u64().unwrap_or(1) {
                call.send_raw("this is not json {{{");
            }
            call.answer(text("after garbage"));
        }
        "bigline" => bigline(&call),
        "foreign" => foreign(&call),
        "vendor" => vendor(&call),
        "error" => call.send(&json!({"jsonrpc": "2.0", "id": call.id,
            "error": {"code": -32601, "message": "upstream says no", "data": {"why": "fixture"}}})),
        "list_changed" => list_changed(&call),
        "sample" => relay(
            &call,
            "sampling/createMessage",
            json!({
            "messages": [{"role": "user", "content": {"type": "text", "text": "say hi"}}], "maxTokens": 10}),
        ),
        "meta" => call.answer(text(params["_meta"].to_string())),
        "needs_input" => call.answer(json!({"resultType": "input_required",
            "inputRequests": {"q": {"method": "elicitation/create", "params": {"message": "which?"}}}})),
        "roots" => relay(&call, "roots/list", json!({})),
        other => call.send(&json!({"jsonrpc": "2.0", "id": call.id,
            "error": {"code": -32602, "message": format!("Unknown tool: {other}")}})),
    }
}

fn echo(call: &Call) {
    let mut r = text(call.args()["text"].as_str().unwrap_or(""));
    if call.params["_meta"]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28" {
        r["resultType"] = json!("complete");
    }
    call.answer(r)
}

/// This process's pid and process group, as the host sees them.
fn pid() -> Value {
    // Sandboxed, the pids here are the namespace's; the sandbox says the host's, and
    // the server leads a session of its own there, so its group is its pid.
    let host: Option<u32> = std::env::var("MCP_BROKER_SANDBOX_PID")
        .ok()
        .and_then(|p| p.parse().ok());
    let pgid = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .and_then(|(_, r)| r.split_whitespace().nth(2).map(str::to_string))
        });
    let pid = host.unwrap_or_else(std::process::id);
    let pgid = host.map(|h| h.to_string()).or(pgid);
    json!({"content": [{"type": "text", "text": pid.to_string()}],
    "structuredContent": {"pid": pid, "pgid": pgid}})
}

fn say_secrets(call: &Call) {
    let args = call.args();
    let values: Vec<String> = args["vars"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| std::env::var(v.as_str()?).ok())
        .collect();
    for v in &values {
        leak(call, v);
    }
    if args["exit"] == true {
        std::thread::sleep(Duration::from_millis(100));
        std::process::exit(3);
    }
    if args["meta_result"] == true {
        call.answer(json!({"content": [{"type": "text", "text": "fine"}],
            "_meta": {"said": values.join(" ")}}));
    } else if args["as_result"] == true {
        call.answer(json!({"content": [{"type": "text",
            "text": format!("bad: {}", values.join(" "))}], "isError": true}));
    } else {
        // Every character escaped, as some JSON writers do.
        let escaped: String = values
            .join(" ")
            .encode_utf16()
            .map(|u| format!("\\u{u:04x}"))
            .collect();
        call.send_raw(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{},\"error\":{{\"code\":-32000,\"message\":\"refused: {escaped}\"}}}}",
            call.id
        ));
    }
}

/// Says one secret on stderr (whole, split across lines, and without its ends) and in a log
/// notification.
fn leak(call: &Call, v: &str) {
    let half = v
        .char_indices()
        .nth(v.chars().count() / 2)
        .map_or(0, |(i, _)| i);
    eprintln!("fixture: leak whole {v}");
    eprintln!("fixture: leak split {}", &v[..half]);
    eprintln!("{} end", &v[half..]);
    let inner: String = v
        .chars()
        .skip(1)
        .take(v.chars().count().saturating_sub(2))
        .collect();
    eprintln!("fixture: mid x {inner} y");
    eprintln!("piece one {}", &v[..half]);
    eprintln!("piece two {}", &v[half..]);
    call.send(&json!({"jsonrpc": "2.0", "method": "notifications/message",
        "params": {"level": "error", "data": format!("log says {v}")}}));
}

fn progress(call: &Call) {
    let token = call.params["_meta"]["progressToken"].clone();
    let count = call.args()["count"].as_u64().unwrap_or(3);
    let interval = call.args()["interval_ms"].as_u64().unwrap_or(10);
    for i in 0..count {
        if !token.is_null() {
            // Integers and a float, so number fidelity shows.
            let progress = if i % 2 == 0 {
                json!(i)
            } else {
                json!(i as f64 + 0.5)
            };
            call.send(&json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": token, "progress": progress, "total": count, "message": format!("step {i}")}}));
        }
        std::thread::sleep(Duration::from_millis(interval));
    }
    call.answer(text(format!("{count} steps")));
}

/// Starts a grandchild in a session of its own and gives its pid.
fn escape() -> String {
    // Out of reach of a process-group kill.
    let out = std::process::Command::new("sh")
        .args(["-c", "setsid sleep 4321 >/dev/null 2>&1 & echo $!"])
        .output();
    out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn bigline(call: &Call) {
    let mib = call.args()["mib"].as_u64().unwrap_or(50) as usize;
    let payload = "x".repeat(mib * 1024 * 1024);
    call.send_raw(&format!(
        "{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{{\"data\":\"{payload}\"}}}}"
    ));
    call.answer(text("after bigline"));
}

fn foreign(call: &Call) {
    call.send(&json!({"jsonrpc": "2.0", "id": 987654321, "result": text("foreign")}));
    call.send(&json!({"jsonrpc": "2.0", "id": "not-ours", "result": text("foreign")}));
    call.answer(text("the real answer"));
    call.answer(text("a duplicate answer"));
}

fn vendor(call: &Call) {
    call.send_raw(&format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"v\",\"x-vendor\":{{\"a\":1}},\"_meta\":{{\"k\":\"v\"}}}}],\"structuredContent\":{{\"n\":1.0e3,\"i\":10,\"f\":2.50}},\"_meta\":{{\"vendor/k\":true}},\"x-extra\":[1,2.0,\"3\"]}}}}",
        call.id
    ));
}

fn list_changed(call: &Call) {
    let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
    call.send(&changed);
    // `times` announcements `every_ms` apart: a storm.
    let times = call.args()["times"].as_u64().unwrap_or(1);
    let every = Duration::from_millis(call.args()["every_ms"].as_u64().unwrap_or(0));
    if times > 1 {
        let out = call.shared.out.clone();
        std::thread::spawn(move || {
            for _ in 1..times {
                std::thread::sleep(every);
                send(&out, &changed);
            }
        });
    }
    call.answer(text("announced"));
}

/// Asks the client `method` and answers with its reply.
fn relay(call: &Call, method: &str, params: Value) {
    match ask_client(call.shared, method, params) {
        Some(reply) => call.answer(text(reply.to_string())),
        None => call.answer(text("no reply")),
    }
}
