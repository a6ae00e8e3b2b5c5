//! Real remote MCP parts: the npm reference server serving streamable HTTP and legacy SSE on
//! loopback, behind the broker like a stdio server.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::json;

use super::support::{Home, deps, deps_path};

/// server-everything serving HTTP on a free loopback port; killed on drop.
pub(super) struct HttpServer {
    child: std::process::Child,
    pub(super) port: u16,
}

impl HttpServer {
    pub(super) fn start(deps: &Path, path: &str, mode: &str) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(deps.join("npm/node_modules/.bin/mcp-server-everything"))
            .arg(mode)
            .env("PORT", port.to_string())
            .env("PATH", path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let up = super::support::wait_until(std::time::Duration::from_secs(15), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        assert!(up, "server-everything {mode} did not listen on {port}");
        Self { child, port }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn streamable_http_and_legacy_sse_upstreams_work_like_stdio_ones() {
    let deps = deps();
    let path = deps_path(&deps);
    let http = HttpServer::start(&deps, &path, "streamableHttp");
    let sse = HttpServer::start(&deps, &path, "sse");
    let home = Home::with_config(&format!(
        r#"schema_version: 1
broker: {{first_list_wait_ms: 60000}}
upstreams:
  web: {{transport: streamable_http, url: "http://127.0.0.1:{}/mcp", headers: {{X-Client: mcp-broker-test}}}}
  old: {{transport: sse, url: "http://127.0.0.1:{}/sse"}}
profiles:
  default: {{allow_mutating_upstreams: true}}
"#,
        http.port, sse.port
    ));
    let mut shim = home.shim(&[]);
    shim.initialize("2025-11-25");
    let names = shim.tool_names();
    assert!(
        names.contains(&"web.echo".to_string()) && names.contains(&"old.echo".to_string()),
        "{names:?}"
    );
    for up in ["web", "old"] {
        let r = shim.call(
            &format!("{up}.echo"),
            json!({"message": format!("via {up}")}),
        );
        assert!(
            r["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains(&format!("via {up}")),
            "{r}"
        );
        // Progress travels over HTTP too.
        shim.send_raw(format!("{}\n", json!({"jsonrpc": "2.0", "id": format!("p-{up}"), "method": "tools/call", "params": {
            "name": format!("{up}.trigger-long-running-operation"), "arguments": {"duration": 1, "steps": 2},
            "_meta": {"progressToken": format!("tok-{up}")}}})).as_bytes()).unwrap();
        let mut progress = 0;
        let answer = loop {
            let v = shim.recv().unwrap();
            if v["method"] == "notifications/progress" {
                assert_eq!(v["params"]["progressToken"], format!("tok-{up}"));
                progress += 1;
            } else if v.get("id").is_some() {
                break v;
            }
        };
        assert_eq!(answer["id"], format!("p-{up}"));
        assert!(progress >= 1, "no progress from {up}");
    }
    let st = home.status();
    for u in st["upstreams"].as_array().unwrap() {
        assert_eq!(u["state"], "running", "{u}");
        assert!(
            u["pid"].is_null() && u["pids"] == json!([]),
            "a remote upstream has no process: {u}"
        );
    }
    // A remote upstream that goes away fails calls at once with a clear error.
    drop(http);
    let r = shim.call("web.echo", json!({"message": "gone"}));
    let msg = r["error"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("'web'") && (msg.contains("unreachable") || msg.contains("HTTP")),
        "{r}"
    );
}
