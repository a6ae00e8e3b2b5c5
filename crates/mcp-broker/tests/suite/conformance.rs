//! The official MCP conformance suite's server scenarios against the broker's HTTP front, in
//! transparent mode in front of our fixture upstream (`tests/conformance/upstream.mjs`). The
//! suite's client sends no token, so a small loopback proxy of the test adds it. A scenario
//! that fails and is not in `tests/conformance/expected-failures.yml` fails this test.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use super::support::{Home, deps, deps_path};

const TOKEN: &str = "conformance-token-0123456789";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn the_official_server_scenarios_pass_through_the_http_front() {
    let deps = deps();
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance");
    // ES modules resolve packages from their own directory: the fixture runs beside them.
    let fixture = deps.join("npm/conformance-upstream.mjs");
    std::fs::copy(here.join("upstream.mjs"), &fixture).unwrap();
    let (front, proxied) = (free_port(), free_port());
    let home = Home::with_config(&format!(
        r#"schema_version: 1
upstreams:
  conf: {{command: node, args: ["{f}"]}}
profiles:
  default: {{upstreams: [conf], namespace: false, allow_mutating_upstreams: true}}
http:
  listen: 127.0.0.1:{front}
  allowed_hosts: ["localhost:{proxied}", "127.0.0.1:{proxied}"]
  allowed_origins: ["http://localhost:{proxied}", "http://127.0.0.1:{proxied}"]
  tokens:
    - {{token: "${{MCPB_CONFORMANCE_TOKEN}}", profile: default}}
"#,
        f = fixture.display()
    ));
    let path = deps_path(&deps);
    home.start_with(&[("MCPB_CONFORMANCE_TOKEN", TOKEN), ("PATH", &path)]);
    let mut proxy = Command::new("python3")
        .arg(here.join("auth_proxy.py"))
        .args([proxied.to_string(), front.to_string(), TOKEN.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    BufReader::new(proxy.stdout.as_mut().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert_eq!(ready.trim(), "ready");
    let results = home.root().join("conformance");
    let run = Command::new(deps.join("npm/node_modules/.bin/conformance"))
        .args([
            "server",
            "--url",
            &format!("http://localhost:{proxied}/mcp"),
        ])
        .arg("--expected-failures")
        .arg(here.join("expected-failures.yml"))
        .arg("-o")
        .arg(&results)
        .env("PATH", &path)
        .output()
        .unwrap();
    let _ = proxy.kill();
    let _ = proxy.wait();
    let stdout = String::from_utf8_lossy(&run.stdout);
    let summary = stdout.rsplit("=== SUMMARY ===").next().unwrap_or(&stdout);
    assert!(
        run.status.success(),
        "conformance regressed:\n{summary}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let total = summary
        .lines()
        .find(|l| l.starts_with("Total:"))
        .unwrap_or("");
    let passed: usize = total
        .trim_start_matches("Total: ")
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    eprintln!("conformance: {total}");
    // 31 server scenarios of 0.1.16, 39 checks: a suite that ran nothing is no pass.
    assert!(passed >= 39, "{summary}");
    assert!(total.ends_with(" 0 failed"), "{summary}");
}

/// Every client scenario: the broker's own upstream client (`mcpb-upstream`'s remote transport,
/// with `mcpb-oauth` for the auth/* ones) is what the suite judges, through the wrapper
/// `tests/conformance/client.py`, which starts a broker with the suite's server as its one
/// remote upstream, signs in when the scenario asks for it, and drives a session through the
/// shim. The baseline lists the few the broker is known to fail, each with its reason.
#[test]
fn the_official_client_scenarios_judge_the_brokers_remote_client() {
    let deps = deps();
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance");
    let path = deps_path(&deps);
    let command = format!(
        "{} {}",
        deps.join("venv/bin/python").display(),
        here.join("client.py").display()
    );
    let work = tempfile::tempdir().unwrap();
    let listed = Command::new(deps.join("npm/node_modules/.bin/conformance"))
        .arg("list")
        .env("PATH", &path)
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    let scenarios: Vec<&str> = listed
        .split("Client scenarios")
        .nth(1)
        .unwrap_or("")
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    // 0.1.16 has 26 client scenarios: a list that came out short is no pass.
    assert!(scenarios.len() >= 26, "{listed}");
    for scenario in scenarios {
        let run = Command::new(deps.join("npm/node_modules/.bin/conformance"))
            .args(["client", "--command", &command, "--scenario", scenario])
            .arg("--expected-failures")
            .arg(here.join("expected-failures.yml"))
            .arg("-o")
            .arg(work.path())
            .env("PATH", &path)
            .env("MCPB_BIN", super::support::bin())
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&run.stdout);
        assert!(
            run.status.success(),
            "{scenario} regressed:\n{}\n{}",
            out.lines().rev().take(15).collect::<Vec<_>>().join("\n"),
            String::from_utf8_lossy(&run.stderr)
        );
    }
}
