//! Secrets an upstream says (on stderr, in its errors, in log notifications) never reach a
//! client, the daemon's log, the audit log or the CLI: every value a `${ENV}` or `${file:}`
//! reference resolved to is taken out wherever upstream text leaves the daemon.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use serde_json::{Value, json};

use super::support::{Home, Shim, fixture, text, wait_until};

const TOKEN: &str = "tok-4f9a8c7e1b2d3f60";
/// A short secret (under 8 characters) counts too.
const PIN: &str = "Zq81x";

fn home() -> Home {
    let fx = fixture();
    let home = Home::with_config(&format!(
        r#"schema_version: 1
broker: {{call_timeout_ms: 3000, startup_timeout_ms: 5000, shutdown_grace_ms: 1000, audit: {{arguments: true}}}}
upstreams:
  fx:
    command: "{fx}"
    env: {{API_TOKEN: "${{MCPB_T_TOKEN}}", PIN: "${{file:pin}}"}}
    trust_annotations: true
  broken:
    command: /bin/sh
    args: ["-c", "echo \"cannot log in with $API_TOKEN (pin $PIN)\" >&2; exit 2"]
    env: {{API_TOKEN: "${{MCPB_T_TOKEN}}", PIN: "${{file:pin}}"}}
profiles:
  default: {{}}
  compact: {{compact_tools_enabled: true}}
"#,
        fx = fx.display()
    ));
    let secrets = home.root().join("secrets");
    std::fs::create_dir_all(&secrets).unwrap();
    std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(secrets.join("pin"), format!("{PIN}\n")).unwrap();
    std::fs::set_permissions(secrets.join("pin"), std::fs::Permissions::from_mode(0o600)).unwrap();
    home.start_with(&[("MCPB_T_TOKEN", TOKEN)]);
    home
}

/// No secret, and no run of 8 characters of the token, in `text` or in any of its lines read
/// as JSON (an escaped secret decodes to itself).
#[track_caller]
fn clean(what: &str, text: &str) {
    let decoded: String = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join("\n");
    let windows: Vec<&str> = (0..=TOKEN.len() - 8).map(|i| &TOKEN[i..i + 8]).collect();
    for form in [text, decoded.as_str()] {
        for s in windows.iter().copied().chain([TOKEN, PIN]) {
            assert!(!form.contains(s), "{what} shows {s:?}: {form}");
        }
    }
}

/// Sends a request and returns every line up to its answer (notifications included).
fn exchange(shim: &mut Shim, id: u64, method: &str, params: Value) -> String {
    shim.send_request(id, method, params);
    let mut all = String::new();
    loop {
        let line = shim.recv_line().expect("an answer");
        all.push_str(&line);
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["id"] == id {
            return all;
        }
    }
}

#[test]
fn secrets_an_upstream_says_reach_no_client_log_or_cli() {
    let home = home();
    let mut compact = home.shim(&["--profile", "compact"]);
    compact.initialize("2025-11-25");
    let leak = |exit: bool| {
        json!({"name": "broker.call_tool", "arguments": {"name": "fx.say_secrets",
            "arguments": {"vars": ["API_TOKEN", "PIN"], "exit": exit}}})
    };
    // The upstream's error, its log notifications and its stderr.
    let said = exchange(&mut compact, 10, "tools/call", leak(false));
    assert!(said.contains("refused"), "{said}");
    assert!(
        said.contains("log says"),
        "the log notification arrives: {said}"
    );
    clean("an upstream's error and log notifications", &said);
    // An error result, written by the upstream as a tool result.
    let said = exchange(
        &mut compact,
        15,
        "tools/call",
        json!({"name": "broker.call_tool", "arguments": {"name": "fx.say_secrets",
            "arguments": {"vars": ["API_TOKEN", "PIN"], "as_result": true}}}),
    );
    assert!(said.contains("bad"), "{said}");
    clean("an error result", &said);
    // A result's `_meta` (the tool's own data stays as written).
    let said = exchange(
        &mut compact,
        16,
        "tools/call",
        json!({"name": "broker.call_tool", "arguments": {"name": "fx.say_secrets",
            "arguments": {"vars": ["API_TOKEN", "PIN"], "meta_result": true}}}),
    );
    assert!(said.contains("fine"), "{said}");
    clean("a result's _meta", &said);
    // A crash: the error carries the server's last words.
    let said = exchange(&mut compact, 11, "tools/call", leak(true));
    clean("a crashed call's error", &said);
    // An upstream that cannot start: the call, search and status.
    let said = exchange(
        &mut compact,
        12,
        "tools/call",
        json!({"name": "broker.call_tool", "arguments": {"name": "broken.anything", "arguments": {}}}),
    );
    clean("a failed start's error", &said);
    assert!(
        wait_until(Duration::from_secs(5), || {
            let s = exchange(
                &mut compact,
                13,
                "tools/call",
                json!({"name": "broker.search_tools", "arguments": {"query": "secrets"}}),
            );
            clean("search", &s);
            s.contains("unavailable") && s.contains("cannot log in")
        }),
        "search names the failed upstream"
    );
    let status = exchange(
        &mut compact,
        14,
        "tools/call",
        json!({"name": "broker.status", "arguments": {}}),
    );
    assert!(status.contains("cannot log in"), "{status}");
    clean("broker.status", &status);
    // A raw listing's warning about the failed upstream.
    let mut raw = home.shim(&[]);
    raw.initialize("2025-11-25");
    let listed = exchange(&mut raw, 20, "tools/list", json!({}));
    assert!(listed.contains("unavailable"), "{listed}");
    clean("the raw listing's warning", &listed);
    // The operator's side: CLI, daemon log, audit log.
    for args in [
        &["status"][..],
        &["status", "--json"],
        &["logs", "broken"],
        &["logs", "fx"],
    ] {
        let out = home.run(args);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        clean(&format!("mcp-broker {}", args.join(" ")), &text);
    }
    let log = home.log();
    assert!(log.contains("leak whole"), "stderr is logged: {log}");
    clean("the daemon log", &log);
    // The audit log is written in batches, a few milliseconds behind the calls.
    let read_audit =
        || std::fs::read_to_string(home.root().join("logs/audit.jsonl")).unwrap_or_default();
    wait_until(Duration::from_secs(5), || {
        read_audit().contains("fx.say_secrets")
    });
    let audit = read_audit();
    assert!(
        audit.contains("fx.say_secrets") || audit.contains("leak"),
        "{audit}"
    );
    clean("the audit log", &audit);
}

/// A server given a secret that puts it in every surface but a tool result: its instructions,
/// tool definitions, resources, prompts and completions reach no client, search, describe or
/// file on disk; an ordinary result is passed as written unless the upstream says
/// `redact_results: true`.
#[test]
fn secrets_a_server_puts_in_its_definitions_reach_no_surface() {
    let deps = super::support::deps();
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/leaky_server.py");
    let python = deps.join("venv/bin/python");
    let home = Home::with_config(&format!(
        r#"schema_version: 1
broker: {{first_list_wait_ms: 30000}}
upstreams:
  leaky:
    command: "{python}"
    args: ["{script}"]
    env: {{LEAK: "${{MCPB_T_TOKEN}}"}}
    trust_annotations: true
  quiet:
    command: "{python}"
    args: ["{script}"]
    env: {{LEAK: "${{MCPB_T_TOKEN}}"}}
    trust_annotations: true
    redact_results: true
profiles:
  default: {{}}
  compact: {{compact_tools_enabled: true}}
"#,
        python = python.display(),
        script = script.display()
    ));
    home.start_with(&[("MCPB_T_TOKEN", TOKEN)]);
    let mut raw = home.shim(&[]);
    let init = raw.initialize("2025-06-18");
    clean("initialize", &init.to_string());
    let mut seen = String::new();
    for (method, params) in [
        ("tools/list", json!({})),
        ("resources/list", json!({})),
        ("resources/templates/list", json!({})),
        ("prompts/list", json!({})),
    ] {
        let r = raw.request(method, params);
        assert!(r.get("result").is_some(), "{method}: {r}");
        clean(method, &r.to_string());
        seen.push_str(&r.to_string());
    }
    let listed: Value = raw.request("resources/list", json!({}));
    let uri = listed["result"]["resources"][0]["uri"]
        .as_str()
        .unwrap()
        .to_string();
    let read = raw.request("resources/read", json!({"uri": uri}));
    assert!(
        read["result"]["contents"][0]["text"]
            .as_str()
            .unwrap()
            .contains("[redacted]"),
        "{read}"
    );
    clean("resources/read", &read.to_string());
    let big_uri = uri.replace("leaky://key", "leaky://big");
    let big = raw.request("resources/read", json!({"uri": big_uri}));
    let body = big["result"]["contents"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        body.len() > 200_000 && body.ends_with("key=[redacted]"),
        "{}",
        &big.to_string()[..300.min(big.to_string().len())]
    );
    let prompts = raw.request("prompts/list", json!({}));
    let prompt = prompts["result"]["prompts"][0]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let got = raw.request(
        "prompts/get",
        json!({"name": prompt, "arguments": {"who": "x"}}),
    );
    assert!(got.get("result").is_some(), "{got}");
    clean("prompts/get", &got.to_string());
    let done = raw.request(
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": prompt}, "argument": {"name": "who", "value": ""}}),
    );
    assert!(done.get("result").is_some(), "{done}");
    clean("completion/complete", &done.to_string());
    // An ordinary result is the tool's data: as written, unless the upstream asks.
    let plain = raw.call("leaky.echo_secret", json!({}));
    assert!(text(&plain).contains(TOKEN), "{plain}");
    let quiet = raw.call("quiet.echo_secret", json!({}));
    assert!(text(&quiet).contains("[redacted]"), "{quiet}");
    clean(
        "a result of an upstream with redact_results",
        &quiet.to_string(),
    );
    // The compact facade's describe and search, and the files on disk.
    let mut compact = home.shim(&["--profile", "compact"]);
    compact.initialize("2025-06-18");
    for (tool, args) in [
        ("broker.describe_tool", json!({"name": "leaky.echo_secret"})),
        ("broker.search_tools", json!({"query": "account key"})),
    ] {
        let r = compact.call(tool, args);
        assert!(!text(&r).is_empty(), "{tool}: {r}");
        clean(tool, &r.to_string());
    }
    for dir in ["state/catalog", "state"] {
        for entry in std::fs::read_dir(home.root().join(dir)).unwrap().flatten() {
            if entry.path().is_file() {
                let body = std::fs::read_to_string(entry.path()).unwrap_or_default();
                clean(&entry.path().display().to_string(), &body);
            }
        }
    }
}

/// The CLI redacts through the same registry as the daemon: `sandbox check` (a server that
/// says its secret in its JSON-RPC error and on stderr), `measure --client` (a client's literal
/// credential said back in a server's error) and `service install --manager launchd`'s dry
/// run (the plist holds the environment's values) print no secret.
#[test]
fn cli_paths_print_no_secret() {
    let say = "read l; echo \"bad key $API_TOKEN\" >&2; echo \"{\\\"jsonrpc\\\":\\\"2.0\\\",\\\"id\\\":1,\\\"error\\\":{\\\"code\\\":-32000,\\\"message\\\":\\\"bad key $API_TOKEN\\\"}}\"; sleep 1";
    let home = Home::with_config(&format!(
        "schema_version: 1\nupstreams:\n  talker:\n    command: /bin/sh\n    args: [\"-c\", {say:?}]\n    env: {{API_TOKEN: \"${{MCPB_T_TOKEN}}\"}}\n    sandbox: standard\n"
    ));
    let check = home
        .cmd(&["sandbox", "check", "talker"])
        .env("MCPB_T_TOKEN", TOKEN)
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    assert!(said.contains("talker"), "{said}");
    clean("sandbox check", &said);
    let service = home
        .cmd(&["service", "install", "--manager", "launchd"])
        .env("MCPB_T_TOKEN", TOKEN)
        .output()
        .unwrap();
    let plist = String::from_utf8_lossy(&service.stdout).into_owned();
    assert!(plist.contains("MCPB_T_TOKEN"), "{plist}");
    clean("service install --manager launchd", &plist);
    // A client file with a literal key its server says back.
    let user = home.root().join("user");
    std::fs::create_dir_all(&user).unwrap();
    let literal = "sk-literal-7c1e92b4d0a5f3";
    std::fs::write(
        user.join(".claude.json"),
        serde_json::json!({"mcpServers": {"talker": {"command": "/bin/sh", "args": ["-c", say],
            "env": {"API_TOKEN": literal}}}})
        .to_string(),
    )
    .unwrap();
    for json in [false, true] {
        let mut args = vec!["measure", "--client", "claude-code"];
        if json {
            args.push("--json");
        }
        let out = home.cmd(&args).env("HOME", &user).output().unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(said.contains("talker"), "{said}");
        assert!(
            !said.contains(literal) && !said.contains(&literal[..12]),
            "{said}"
        );
    }
}
