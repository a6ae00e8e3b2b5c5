//! Real MCP parts: the reference servers from npm and PyPI behind the broker, driven by the
//! official Python SDK client and the MCP Inspector CLI through `mcp-broker stdio`.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::support::{Home, bin, deps, deps_path};

/// The first listing waits for every server here: these tests are about what real servers
/// and clients say to each other, and a cold Python start on a loaded machine can take longer
/// than the default wait (what a slow server's late list looks like is `first_list`'s concern).
fn interop_config(deps: &Path, data: &Path) -> String {
    let npm = deps.join("npm/node_modules/.bin");
    format!(
        r#"schema_version: 1
broker: {{first_list_wait_ms: 60000}}
upstreams:
  everything: {{command: "{npm}/mcp-server-everything"}}
  filesystem: {{command: "{npm}/mcp-server-filesystem", args: ["{data}"], trust_annotations: true}}
  memory: {{command: "{npm}/mcp-server-memory", env: {{MEMORY_FILE_PATH: "{data}/memory.jsonl"}}}}
  time: {{command: "{venv}/bin/mcp-server-time", args: [--local-timezone, UTC]}}
profiles:
  default: {{allow_mutating_upstreams: true}}
  files: {{compact_tools_enabled: true, upstreams: [filesystem]}}
  compact: {{compact_tools_enabled: true, allow_mutating_upstreams: true}}
  code: {{compact_tools_enabled: true, allow_mutating_upstreams: true, upstreams: [filesystem, memory], exec: {{languages: [python, javascript]}}}}
"#,
        npm = npm.display(),
        data = data.display(),
        venv = deps.join("venv").display()
    )
}

pub(super) fn setup() -> (Home, std::path::PathBuf, String) {
    let deps = deps();
    let mut home = Home::new();
    let data = home.root().join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("hello.txt"), "hello from the filesystem server\n").unwrap();
    let cfg = home.root().join("interop.yaml");
    std::fs::write(&cfg, interop_config(&deps, &data)).unwrap();
    let path = deps_path(&deps);
    home.config = Some(cfg);
    (home, deps, path)
}

fn python_client(
    home: &Home,
    deps: &Path,
    path: &str,
    calls: Value,
    hold: bool,
) -> std::process::Child {
    let spec = shim_spec(
        home,
        path,
        &["stdio"],
        json!({"calls": calls, "hold": hold}),
    );
    py_driver(deps, path, "py_client.py", &spec)
}

/// A driver script's spec: how to start the shim (`args`) against `home`, plus `extra`.
pub(super) fn shim_spec(home: &Home, path: &str, args: &[&str], extra: Value) -> Value {
    let mut spec = json!({
        "command": bin(),
        "args": args,
        "env": {
            "MCP_BROKER_HOME": home.root(),
            "MCP_BROKER_CONFIG": home.config.as_ref().unwrap(),
            "PATH": path,
        },
    });
    if let (Some(s), Value::Object(e)) = (spec.as_object_mut(), extra) {
        s.extend(e);
    }
    spec
}

/// One of the Python SDK driver scripts of `tests/interop/`, given its JSON spec.
pub(super) fn py_driver(
    deps: &Path,
    path: &str,
    script: &str,
    spec: &Value,
) -> std::process::Child {
    Command::new(deps.join("venv/bin/python"))
        .arg(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/interop")
                .join(script),
        )
        .arg(spec.to_string())
        .env("PATH", path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

pub(super) fn read_result(child: &mut std::process::Child) -> Value {
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    if line.is_empty() {
        let mut err = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
        panic!("python client gave no result:\n{err}");
    }
    serde_json::from_str(&line).unwrap()
}

fn text(call: &Value) -> String {
    call["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn python_sdk_client_lists_and_calls_every_reference_server_and_two_clients_share_processes() {
    let (home, deps, path) = setup();
    let data = home.root().join("data");
    let calls = json!([
        ["everything.echo", {"message": "hi from python"}],
        ["filesystem.read_text_file", {"path": data.join("hello.txt")}],
        ["memory.create_entities", {"entities": [{"name": "broker", "entityType": "program", "observations": ["shares upstreams"]}]}],
        ["memory.read_graph", {}],
        ["time.get_current_time", {"timezone": "UTC"}],
    ]);
    let mut first = python_client(&home, &deps, &path, calls.clone(), true);
    let a = read_result(&mut first);
    let tools: Vec<&str> = a["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    for expected in [
        "everything.echo",
        "filesystem.read_text_file",
        "memory.read_graph",
        "time.get_current_time",
        "time.convert_time",
    ] {
        assert!(
            tools.contains(&expected),
            "{expected} missing from {tools:?}"
        );
    }
    assert!(
        tools.iter().all(|t| t.contains('.')),
        "every tool is namespaced"
    );
    let results = a["calls"].as_array().unwrap();
    for r in results {
        assert_eq!(r["is_error"], false, "{r}");
    }
    assert!(text(&results[0]).contains("hi from python"));
    assert!(text(&results[1]).contains("hello from the filesystem server"));
    assert!(text(&results[3]).contains("shares upstreams"));
    assert!(text(&results[4]).contains("UTC"), "{}", results[4]);
    assert_eq!(a["server"], "mcp-broker");
    assert_eq!(
        a["protocol"], "2026-07-28",
        "the 2.x client adopts the modern era through server/discover"
    );

    let pids = |home: &Home| -> Vec<(String, u64)> {
        home.status()["upstreams"]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| {
                (
                    u["name"].as_str().unwrap().to_string(),
                    u["pid"].as_u64().unwrap_or(0),
                )
            })
            .collect()
    };
    let before = pids(&home);
    assert!(before.iter().all(|(_, p)| *p > 0), "{before:?}");

    let mut second = python_client(
        &home,
        &deps,
        &path,
        json!([["everything.echo", {"message": "second"}]]),
        true,
    );
    let b = read_result(&mut second);
    assert!(text(&b["calls"][0]).contains("second"));
    assert_eq!(home.status()["daemon"]["sessions"], 2);
    assert_eq!(
        pids(&home),
        before,
        "the second client must reuse the same upstream processes"
    );

    for mut c in [first, second] {
        c.stdin.as_mut().unwrap().write_all(b"done\n").unwrap();
        assert!(c.wait().unwrap().success());
    }
    assert!(home.run(&["stop"]).status.success());
    for (name, pid) in before {
        assert!(
            !super::support::group_alive(pid as u32),
            "{name} (group {pid}) survived stop"
        );
    }
}

#[test]
fn inspector_cli_lists_and_calls_through_the_shim() {
    let (home, deps, path) = setup();
    let inspector = deps.join("npm/node_modules/.bin/mcp-inspector");
    let run = |extra: &[&str]| {
        let mut cmd = Command::new(&inspector);
        cmd.arg("--cli")
            .arg("-e")
            .arg(format!("MCP_BROKER_HOME={}", home.root().display()))
            .arg("-e")
            .arg(format!(
                "MCP_BROKER_CONFIG={}",
                home.config.as_ref().unwrap().display()
            ))
            .arg("-e")
            .arg(format!("PATH={path}"))
            .arg(bin())
            .arg("stdio")
            .args(extra)
            .env("PATH", &path)
            .env("HOME", home.root());
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "inspector failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let list = run(&["--method", "tools/list"]);
    let names: Vec<&str> = list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"everything.echo") && names.contains(&"time.get_current_time"),
        "{names:?}"
    );
    let call = run(&[
        "--method",
        "tools/call",
        "--tool-name",
        "everything.echo",
        "--tool-arg",
        "message=from inspector",
    ]);
    assert!(
        call["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("from inspector"),
        "{call}"
    );
    let call = run(&[
        "--method",
        "tools/call",
        "--tool-name",
        "time.convert_time",
        "--tool-arg",
        "source_timezone=UTC",
        "time=12:00",
        "target_timezone=Europe/Paris",
    ]);
    assert!(call["isError"] != true, "{call}");
}

#[test]
fn upstreams_get_a_cleared_environment_plus_their_config() {
    let (mut home, deps, path) = setup();
    let cfg = format!(
        "schema_version: 1\nupstreams:\n  everything:\n    command: \"{}\"\n    env: {{NEWS_LANG: en, API_KEY: \"${{file:api}}\"}}\nprofiles:\n  default: {{allow_mutating_upstreams: true}}\n",
        deps.join("npm/node_modules/.bin/mcp-server-everything")
            .display()
    );
    let cfg_path = home.root().join("env.yaml");
    std::fs::write(&cfg_path, cfg).unwrap();
    home.config = Some(cfg_path);
    std::fs::create_dir_all(home.root().join("secrets")).unwrap();
    std::fs::write(home.root().join("secrets/api"), "k-123\n").unwrap();
    let mut cmd = home.cmd(&["stdio"]);
    cmd.env("PATH", &path)
        .env("SOME_OTHER_TOOL_TOKEN", "must-not-leak");
    let mut shim = super::support::Shim::spawn(cmd);
    shim.initialize("2025-11-25");
    let r = shim.call("everything.get-env", json!({}));
    let text = r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let env: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{r}"));
    assert_eq!(env["NEWS_LANG"], "en");
    assert_eq!(
        env["API_KEY"], "k-123",
        "secret file resolved into the child only"
    );
    assert!(
        env.get("SOME_OTHER_TOOL_TOKEN").is_none(),
        "daemon environment leaked: {env}"
    );
    assert!(env.get("MCP_BROKER_CONFIG").is_none(), "{env}");
    assert!(env.get("PATH").is_some());
    assert!(!home.log().contains("k-123"), "secret value in the log");
}

/// A daemon in the foreground (so the test can signal it) over the interop config, and a warm
/// session with server-everything running.
fn foreground_daemon_with_session() -> (Home, std::process::Child, super::support::Shim) {
    let (home, _deps, path) = setup();
    let daemon = home
        .cmd(&["daemon"])
        .env("PATH", &path)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(super::support::wait_until(
        std::time::Duration::from_secs(10),
        || home.socket().exists()
    ));
    let mut shim = super::support::Shim::spawn(home.cmd(&["stdio"]));
    shim.initialize("2025-11-25");
    shim.call("everything.echo", json!({"message": "warm"}));
    (home, daemon, shim)
}

/// Waits until `upstream` has a call in flight: what the signal tests need before signalling.
fn in_flight(home: &Home, upstream: &str) {
    assert!(
        super::support::wait_until(std::time::Duration::from_secs(5), || {
            super::support::upstream_status(home, upstream)["active_call_count"] == 1
        }),
        "the call never reached {upstream}"
    );
}

#[test]
fn sigterm_lets_an_in_flight_call_finish_before_exiting() {
    let (home, mut daemon, mut shim) = foreground_daemon_with_session();
    let slow = json!({"jsonrpc": "2.0", "id": "slow", "method": "tools/call",
        "params": {"name": "everything.trigger-long-running-operation", "arguments": {"duration": 1, "steps": 2}}});
    shim.send_raw(format!("{slow}\n").as_bytes()).unwrap();
    in_flight(&home, "everything");
    let t = std::time::Instant::now();
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(daemon.id() as i32).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let answer: Value = serde_json::from_str(
        &shim
            .recv_answer_line()
            .expect("the in-flight call was answered"),
    )
    .unwrap();
    assert_eq!(answer["id"], "slow");
    assert!(
        answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Long running operation completed"),
        "{answer}"
    );
    let status =
        super::support::wait_timeout(&mut daemon, std::time::Duration::from_secs(20)).unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(
        t.elapsed() < std::time::Duration::from_secs(5),
        "drained, not waited out: {:?}",
        t.elapsed()
    );
}

#[test]
fn a_second_sigterm_stops_at_once_and_kills_the_upstreams() {
    let (home, mut daemon, mut shim) = foreground_daemon_with_session();
    let up = home.upstream_pid("everything").unwrap();
    let slow = json!({"jsonrpc": "2.0", "id": "slow", "method": "tools/call",
        "params": {"name": "everything.trigger-long-running-operation", "arguments": {"duration": 30, "steps": 3}}});
    shim.send_raw(format!("{slow}\n").as_bytes()).unwrap();
    in_flight(&home, "everything");
    let pid = rustix::process::Pid::from_raw(daemon.id() as i32).unwrap();
    let t = std::time::Instant::now();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    // The first signal is being handled once the daemon took its socket away.
    assert!(super::support::wait_until(
        std::time::Duration::from_secs(10),
        || !home.socket().exists()
    ));
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let status = super::support::wait_timeout(&mut daemon, std::time::Duration::from_secs(10))
        .expect("daemon exits");
    assert!(
        t.elapsed() < std::time::Duration::from_secs(3),
        "took {:?}",
        t.elapsed()
    );
    assert_eq!(status.code(), Some(0));
    assert!(super::support::wait_until(
        std::time::Duration::from_secs(3),
        || !super::support::group_alive(up)
    ));
}

/// Talks to `mcp-server-everything` directly and returns raw answer lines.
fn direct_lines(deps: &Path, path: &str, requests: &[Value]) -> Vec<String> {
    let mut child = Command::new(deps.join("npm/node_modules/.bin/mcp-server-everything"))
        .env("PATH", path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut lines = Vec::new();
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    writeln!(stdin, "{init}").unwrap();
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    writeln!(
        stdin,
        "{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}}"
    )
    .unwrap();
    for r in requests {
        writeln!(stdin, "{r}").unwrap();
        loop {
            let mut line = String::new();
            out.read_line(&mut line).unwrap();
            // Skip the server's own notifications; keep the answer.
            if line.contains("\"id\"") {
                lines.push(line);
                break;
            }
        }
    }
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    lines
}

/// The raw text of the `result` member, cut out of the line without re-serialising it.
fn raw_result(line: &str) -> String {
    #[derive(serde::Deserialize)]
    struct R<'a> {
        #[serde(borrow)]
        result: &'a serde_json::value::RawValue,
    }
    serde_json::from_str::<R<'_>>(line)
        .unwrap_or_else(|e| panic!("{e}: {line}"))
        .result
        .get()
        .to_string()
}

#[test]
fn results_and_tool_definitions_pass_through_unchanged() {
    let (home, deps, path) = setup();
    let call = |name: &str, args: Value| json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": args}});
    let direct = direct_lines(
        &deps,
        &path,
        &[
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
            call("get-structured-content", json!({"location": "Chicago"})),
            call("get-tiny-image", json!({})),
            call("get-sum", json!({"a": 1.5, "b": 2})),
        ],
    );
    let mut shim = super::support::Shim::spawn({
        let mut c = home.cmd(&["stdio"]);
        c.env("PATH", &path);
        c
    });
    shim.initialize("2025-11-25");
    let mut brokered = Vec::new();
    for (name, args) in [
        ("tools/list", None),
        (
            "everything.get-structured-content",
            Some(json!({"location": "Chicago"})),
        ),
        ("everything.get-tiny-image", Some(json!({}))),
        ("everything.get-sum", Some(json!({"a": 1.5, "b": 2}))),
    ] {
        let msg = match args {
            None => json!({"jsonrpc": "2.0", "id": 1, "method": name}),
            Some(a) => call(name, a),
        };
        shim.send_raw(format!("{msg}\n").as_bytes()).unwrap();
        brokered.push(shim.recv_answer_line().unwrap());
    }
    for i in 1..4 {
        assert_eq!(
            raw_result(&brokered[i]),
            raw_result(&direct[i]),
            "result {i} changed on the way"
        );
    }
    let d: Value = serde_json::from_str(&direct[0]).unwrap();
    let b: Value = serde_json::from_str(&brokered[0]).unwrap();
    let d_tools = d["result"]["tools"].as_array().unwrap();
    let b_tools = b["result"]["tools"].as_array().unwrap();
    assert!(d_tools.len() >= 10);
    for dt in d_tools {
        let name = dt["name"].as_str().unwrap();
        let bt = b_tools
            .iter()
            .find(|t| t["name"] == format!("everything.{name}"))
            .unwrap_or_else(|| panic!("{name} missing"));
        let mut bt = bt.clone();
        bt["name"] = dt["name"].clone();
        assert_eq!(&bt, dt, "definition of {name} changed");
    }
    assert!(
        d_tools.iter().any(|t| t.get("outputSchema").is_some()),
        "the fixture has an outputSchema to carry"
    );
}

#[test]
fn a_cancelled_call_gets_no_answer_and_the_session_goes_on() {
    let (home, _deps, path) = setup();
    let mut cmd = home.cmd(&["stdio"]);
    cmd.env("PATH", &path);
    let mut shim = super::support::Shim::spawn(cmd);
    shim.initialize("2025-11-25");
    shim.call("everything.echo", json!({"message": "warm"}));
    let slow = json!({"jsonrpc": "2.0", "id": "slow", "method": "tools/call",
        "params": {"name": "everything.trigger-long-running-operation", "arguments": {"duration": 2, "steps": 2}}});
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "slow", "reason": "user"}});
    let inflight = || {
        home.status()["daemon"]["inflight_calls"]
            .as_u64()
            .unwrap_or(0)
    };
    shim.send_raw(format!("{slow}\n").as_bytes()).unwrap();
    assert!(
        super::support::wait_until(std::time::Duration::from_secs(10), || inflight() == 1),
        "the call never started"
    );
    shim.send_raw(format!("{cancel}\n").as_bytes()).unwrap();
    // The operation takes 2 s: a call that ends well before that was cancelled, not finished.
    assert!(
        super::support::wait_until(std::time::Duration::from_millis(1500), || inflight() == 0),
        "the cancellation did not end the call"
    );
    // The control: the same operation, started later and not cancelled, does answer. Had the
    // first one not been cancelled, its answer would have come before this one.
    let control = json!({"jsonrpc": "2.0", "id": "control", "method": "tools/call",
        "params": {"name": "everything.trigger-long-running-operation", "arguments": {"duration": 2, "steps": 2}}});
    shim.send_raw(format!("{control}\n").as_bytes()).unwrap();
    let first: Value = serde_json::from_str(&shim.recv_answer_line().expect("an answer")).unwrap();
    assert_eq!(
        first["id"], "control",
        "the cancelled call answered: {first}"
    );
    let r = shim.request("ping", json!({}));
    assert_eq!(
        r["result"],
        json!({}),
        "the next answer is the ping's, not the cancelled call's: {r}"
    );
}

#[test]
fn python_client_across_revisions_and_lifecycles() {
    let (mut home, deps, path) = setup();
    let npm = deps.join("npm/node_modules/.bin");
    let repo = home.root().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let git = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&repo)
        .status()
        .unwrap();
    assert!(git.success());
    std::fs::write(repo.join("README"), "hello\n").unwrap();
    let cfg = format!(
        r#"schema_version: 1
broker: {{first_list_wait_ms: 60000}}
upstreams:
  github: {{command: "{npm}/mcp-server-github", env: {{GITHUB_PERSONAL_ACCESS_TOKEN: "${{file:github}}"}}}}
  git: {{command: "{venv}/bin/mcp-server-git", args: [--repository, "{repo}"], lifecycle: per_session}}
  time: {{command: "{venv}/bin/mcp-server-time", args: [--local-timezone, UTC], lifecycle: per_call}}
  everything: {{command: "{npm}/mcp-server-everything", lifecycle: per_session}}
profiles:
  default: {{allow_mutating_upstreams: true}}
"#,
        npm = npm.display(),
        venv = deps.join("venv").display(),
        repo = repo.display()
    );
    let cfg_path = home.root().join("revisions.yaml");
    std::fs::write(&cfg_path, cfg).unwrap();
    home.config = Some(cfg_path);
    let calls = json!([
        ["git.git_status", {"repo_path": repo}],
        ["time.get_current_time", {"timezone": "UTC"}],
        ["everything.echo", {"message": "per session"}],
    ]);
    // Listing needs no real token; the reference is resolved from the secrets dir.
    std::fs::create_dir_all(home.root().join("secrets")).unwrap();
    std::fs::write(home.root().join("secrets/github"), "not-a-real-token\n").unwrap();
    let mut client = python_client(&home, &deps, &path, calls, true);
    let r = read_result(&mut client);
    let tools: Vec<&str> = r["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"github.search_repositories"),
        "the 2024-11-05 upstream is listed: {tools:?}"
    );
    assert!(
        tools.contains(&"git.git_status") && tools.contains(&"time.get_current_time"),
        "{tools:?}"
    );
    let results = r["calls"].as_array().unwrap();
    assert!(text(&results[0]).contains("README"), "{}", results[0]);
    assert!(text(&results[1]).contains("UTC"), "{}", results[1]);
    assert!(text(&results[2]).contains("per session"), "{}", results[2]);
    let status = home.status();
    let up = |n: &str| {
        status["upstreams"]
            .as_array()
            .unwrap()
            .iter()
            .find(|u| u["name"] == n)
            .cloned()
            .unwrap()
    };
    assert_eq!(up("github")["protocol_version"], "2024-11-05");
    // Each is spoken to at its newest revision, unless it did not answer `server/discover`
    // within the probe's time (a cold Python start on a loaded machine): then it gets the
    // `initialize` handshake on a fresh process, and the log says so.
    for name in ["git", "time"] {
        let slow_probe = home.log().lines().any(|l| {
            l.contains("no answer to server/discover") && l.contains(&format!("upstream={name}"))
        });
        let want = if slow_probe {
            "2025-11-25"
        } else {
            "2026-07-28"
        };
        assert_eq!(
            up(name)["protocol_version"],
            want,
            "{name}: spoken to at its newest revision (probe timed out: {slow_probe})"
        );
    }
    assert_eq!(up("everything")["protocol_version"], "2025-11-25");
    assert_eq!(up("git")["session_count"], 1);
    assert_eq!(up("time")["active_call_count"], 0);
    assert!(
        up("time")["pids"].as_array().unwrap().is_empty(),
        "per-call instance gone after its call"
    );
    client.stdin.as_mut().unwrap().write_all(b"done\n").unwrap();
    assert!(client.wait().unwrap().success());
    assert!(
        super::support::wait_until(std::time::Duration::from_secs(5), || {
            let s = home.status();
            s["upstreams"]
                .as_array()
                .unwrap()
                .iter()
                .all(|u| u["session_count"] == 0)
        }),
        "per-session instances end with the session"
    );
}
