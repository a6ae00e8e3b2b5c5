//! The command line as people meet it: a closed pipe ends a command quietly, `config init`
//! writes where it is told, an unknown client is told which profile it got, a failed upstream
//! shows why (its last stderr lines) in `status`, in a client's error and in `logs`, and
//! `tools search` prints a table (or its data once with `--json`) with errors on stderr.

use std::process::Stdio;

use serde_json::{Value, json};

use super::support::{Home, fixture_config, session};

#[test]
fn a_reader_that_goes_away_ends_the_command_quietly() {
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    let mut cmd = home.cmd(&["config", "schema"]);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    drop(child.stdout.take()); // `| head` that already left
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?} {stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn config_init_writes_where_it_is_told_with_the_schema_beside_it() {
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    let target = home.root().join("elsewhere/team.yaml");
    let out = home.run(&["--config", target.to_str().unwrap(), "config", "init"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&target).unwrap();
    assert!(text.starts_with("# yaml-language-server: $schema=./broker.schema.json\n"));
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(home.root().join("elsewhere/broker.schema.json")).unwrap(),
    )
    .unwrap();
    assert!(schema.get("properties").is_some());
    let again = home.run(&["--config", target.to_str().unwrap(), "config", "init"]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"));
    let valid = home.run(&["config", "validate", target.to_str().unwrap()]);
    assert!(
        valid.status.success(),
        "{}",
        String::from_utf8_lossy(&valid.stderr)
    );
}

#[test]
fn an_unknown_client_is_told_which_profile_it_got() {
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    let mut cmd = home.cmd(&["stdio", "--client", "no-such-client"]);
    cmd.stdin(Stdio::null());
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("client \"no-such-client\" has no profile in `clients:`"),
        "{stderr}"
    );
    assert!(stderr.contains("hint: "), "{stderr}");
}

#[test]
fn a_failed_upstream_says_why_in_status_in_the_error_and_in_its_logs() {
    let home = Home::with_config(&fixture_config(
        &[("fx", ""), ("broken", "\"--exit-at-start\", \"2\"")],
        "",
    ));
    let mut shim = session(&home);
    let r = shim.call("broken.echo", json!({"text": "x"}));
    let message = r["error"]["message"].as_str().unwrap_or("").to_string()
        + r["result"]["content"][0]["text"].as_str().unwrap_or("");
    assert!(
        message.contains("fixture: cannot start") && message.contains("mcp-broker logs broken"),
        "{r}"
    );
    let st = home.status();
    let broken = st["upstreams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["name"] == "broken")
        .unwrap()
        .clone();
    assert!(
        broken["stderr_tail"]
            .to_string()
            .contains("fixture: cannot start"),
        "{broken}"
    );
    let text = String::from_utf8_lossy(&home.run(&["status"]).stdout).to_string();
    assert!(
        text.contains("UPSTREAM") && text.contains("STATE"),
        "{text}"
    );
    assert!(
        text.contains("broken:   stderr: fixture: cannot start"),
        "{text}"
    );
    assert!(
        text.contains("hint: more with `mcp-broker logs broken`"),
        "{text}"
    );
    let search = home.run(&["tools", "search", "echo"]);
    let said = String::from_utf8_lossy(&search.stderr);
    assert!(said.contains("broken is left out"), "{said}");
    let logs = home.run(&["logs", "broken"]);
    let logs = String::from_utf8_lossy(&logs.stdout).to_string();
    assert!(logs.contains("fixture: cannot start"), "{logs}");
    assert!(
        logs.lines()
            .all(|l| l.contains("upstream=broken") || l.contains("upstream=\"broken\"")),
        "{logs}"
    );
    let unknown = home.run(&["logs", "nope"]);
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("upstreams: broken, fx"));
}

#[test]
fn tools_search_prints_a_table_for_people_and_its_data_once_for_scripts() {
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    let out = home.run(&["tools", "search", "echo some text"]);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success());
    assert!(stdout.starts_with("TOOL"), "{stdout}");
    assert!(stdout.contains("fx.echo"), "{stdout}");
    assert!(!stdout.contains("broker.describe_tool"), "{stdout}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("mcp-broker tools describe NAME"));
    let out = home.run(&["tools", "--json", "search", "echo some text"]);
    let data: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(data["results"][0]["name"], "fx.echo", "{data}");
    assert!(
        data.get("content").is_none(),
        "the data, not the MCP envelope: {data}"
    );
}

#[test]
fn validate_warns_of_what_would_fail_at_run_time() {
    let home = Home::with_config(
        "schema_version: 1\nupstreams:\n  git:\n    command: no-such-server-binary\n    env: {GIT_TOKEN: \"${MCPB_TEST_SURELY_UNSET}\"}\n  notes:\n    command: sh\n    env: {KEY: \"${file:notes-key}\"}\n",
    );
    std::fs::create_dir_all(home.root().join("secrets")).unwrap();
    let key = home.root().join("secrets/notes-key");
    std::fs::write(&key, "k").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = home.run(&["config", "validate"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("upstreams.git.command: `no-such-server-binary` is not found on the PATH"),
        "{stderr}"
    );
    assert!(
        stderr.contains("upstreams.git.env.GIT_TOKEN: ${MCPB_TEST_SURELY_UNSET} is not set"),
        "{stderr}"
    );
    assert!(
        stderr.contains("is readable by others (mode 644)"),
        "{stderr}"
    );
    assert!(stderr.contains("hint: chmod 600"), "{stderr}");
    assert!(
        !stderr.contains("upstreams.notes.command"),
        "sh is on the PATH: {stderr}"
    );
}

#[test]
fn a_command_says_when_it_starts_a_daemon_or_meets_one_serving_another_file() {
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    let first = home.run(&["tools", "search", "echo"]);
    assert!(
        String::from_utf8_lossy(&first.stderr).contains("started the daemon"),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let again = home.run(&["tools", "search", "echo"]);
    assert!(!String::from_utf8_lossy(&again.stderr).contains("started the daemon"));
    let other = home.root().join("other.yaml");
    std::fs::write(&other, fixture_config(&[("fx", "")], "")).unwrap();
    let out = home.run(&[
        "--config",
        other.to_str().unwrap(),
        "tools",
        "search",
        "echo",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("the running daemon serves"), "{stderr}");
    assert!(stderr.contains("hint: `mcp-broker stop`"), "{stderr}");
}

#[test]
fn a_variable_exported_after_the_daemon_started_gets_a_restart_hint_and_restart_takes_it() {
    let home = Home::with_config(&fixture_config(
        &[("fx", "")],
        ", env: {LATE: \"${MCPB_TEST_LATE_VALUE}\"}",
    ));
    assert!(home.run(&["start"]).status.success());
    let reload = home
        .cmd(&["reload"])
        .env("MCPB_TEST_LATE_VALUE", "now-set")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&reload.stderr);
    assert!(
        stderr.contains("MCPB_TEST_LATE_VALUE set here but not in the daemon"),
        "{stderr}"
    );
    assert!(stderr.contains("hint: `mcp-broker restart`"), "{stderr}");
    let restart = home
        .cmd(&["restart"])
        .env("MCPB_TEST_LATE_VALUE", "now-set")
        .output()
        .unwrap();
    assert!(
        restart.status.success(),
        "{}",
        String::from_utf8_lossy(&restart.stderr)
    );
    let mut shim = session(&home);
    let env = shim.call("fx.env", json!({}));
    assert!(env.to_string().contains("now-set"), "{env}");
}

#[test]
fn a_slow_first_start_is_said_not_silent() {
    let home = Home::with_config(&fixture_config(
        &[("fx", "\"--slow-start-ms\", \"1200\"")],
        "",
    ));
    let out = home.run(&["tools", "search", "echo"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("waiting for the answer"), "{stderr}");
    // A quick answer says nothing of waiting.
    let out = home.run(&["tools", "search", "echo"]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("waiting"));
}

#[test]
fn doctor_names_each_problem_with_its_fix_and_its_exit_code_says_so() {
    let home = Home::with_config(
        "schema_version: 1\nupstreams:\n  git: {command: no-such-server-binary}\n",
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(home.root(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let fake_home = home.root().join("user");
    std::fs::create_dir_all(fake_home.join(".cursor")).unwrap();
    std::fs::write(
        fake_home.join(".cursor/mcp.json"),
        r#"{"mcpServers": {"git": {"command": "uvx", "args": ["mcp-server-git"]}}}"#,
    )
    .unwrap();
    let out = home
        .cmd(&["doctor", "--json"])
        .env("HOME", &fake_home)
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "a problem makes the exit code say so"
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let checks = report["checks"].as_array().unwrap();
    let problem = checks
        .iter()
        .find(|c| c["level"] == "PROBLEM")
        .unwrap_or_else(|| panic!("{report}"));
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("no-such-server-binary"),
        "{problem}"
    );
    assert!(
        problem["fix"].as_str().is_some_and(
            |f| f.contains("upstreams.git.command") && f.contains("mcp-broker remove git")
        ),
        "the fix names its upstream: {problem}"
    );
    assert!(
        checks
            .iter()
            .any(|c| c["area"] == "client" && c["detail"].as_str().unwrap().contains("cursor")),
        "{report}"
    );
    let text = home
        .cmd(&["doctor"])
        .env("HOME", &fake_home)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout).to_string();
    assert!(text.starts_with("AREA"), "{text}");
    assert!(text.contains("what to do:"), "{text}");
    // Another test's daemon caught between removing its socket and exiting is a lost daemon
    // too (doctor looks at every daemon of the user): counted, not this test's.
    let lost = text
        .lines()
        .filter(|l| l.starts_with("daemon") && l.contains("whose socket is gone"))
        .count();
    assert!(
        text.contains(&format!("{} problem(s) found", 1 + lost)),
        "{text}"
    );
}

#[test]
fn upstreams_are_added_listed_and_removed_keeping_the_file_as_written() {
    use super::support::fixture;
    let original = "# team broker\nschema_version: 1\n\nupstreams:\n  # kept\n  example: {command: \"{broker.exe}\", args: [example-server], trust_annotations: true}\n\nprofiles:\n  default: {allow_mutating_upstreams: true}  # everything\n";
    let home = Home::with_config(original);
    let mut shim = session(&home); // a running daemon, told to reload by each change
    let fx = fixture();
    let add = home.run(&["add", "fx", "--", fx.to_str().unwrap(), "--name", "added"]);
    assert!(
        add.status.success(),
        "{}",
        String::from_utf8_lossy(&add.stderr)
    );
    assert!(String::from_utf8_lossy(&add.stderr).contains("the running daemon reloaded it"));
    let text = std::fs::read_to_string(home.config_path()).unwrap();
    assert!(
        text.starts_with("# team broker\n") && text.contains("  # kept\n"),
        "{text}"
    );
    assert!(text.contains("# everything\n"), "{text}");
    let r = shim.call("fx.echo", json!({"text": "from the added one"}));
    assert!(r.to_string().contains("from the added one"), "{r}");
    let listed: Value = serde_json::from_slice(&home.run(&["list", "--json"]).stdout).unwrap();
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|u| u["name"].as_str())
        .collect();
    assert_eq!(names, ["example", "fx"]);
    let again = home.run(&["add", "fx", "--", "x"]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("exists already"));
    let removed = home.run(&["remove", "fx"]);
    assert!(removed.status.success());
    assert_eq!(
        std::fs::read_to_string(home.config_path()).unwrap(),
        original
    );
    let bad = home.run(&["add", "leaky", "--env", "API_TOKEN=plain-secret", "--", "x"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("nothing was written"));
    assert_eq!(
        std::fs::read_to_string(home.config_path()).unwrap(),
        original
    );
}

#[test]
fn the_version_names_its_commit_and_completions_know_every_command() {
    let home = Home::new();
    let v = String::from_utf8_lossy(&home.run(&["--version"]).stdout).to_string();
    assert!(v.starts_with("mcp-broker 0."), "{v}");
    assert!(v.contains(" (") && v.trim_end().ends_with(')'), "{v}");
    for shell in ["bash", "zsh", "fish"] {
        let script = home.run(&["completions", shell]);
        assert!(script.status.success());
        let text = String::from_utf8_lossy(&script.stdout);
        for cmd in ["doctor", "logs", "add", "remove", "restart", "auth"] {
            assert!(text.contains(cmd), "{shell} lacks {cmd}");
        }
    }
}

#[test]
fn add_takes_only_names_and_keys_that_cannot_reach_into_the_file() {
    let original = "schema_version: 1\nupstreams:\n  a: {command: x}\nprofiles:\n  default: {}\n";
    let home = Home::with_config(original);
    for args in [
        vec!["add", "x\n  evil: {command: sh}", "--", "true"],
        vec!["add", "ok", "--env", "A: 1\n  B=2", "--", "true"],
        vec!["add", "ok", "--transport", "sse", "--", "true"],
    ] {
        let out = home.run(&args);
        assert!(!out.status.success(), "{args:?}");
        assert_eq!(
            std::fs::read_to_string(home.config_path()).unwrap(),
            original,
            "{args:?}"
        );
    }
    // Removing the last one leaves an empty mapping that still loads.
    let out = home.run(&["remove", "a"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        std::fs::read_to_string(home.config_path())
            .unwrap()
            .contains("upstreams: {}")
    );
}

#[test]
fn the_service_unit_is_shown_then_written_verified_and_the_daemon_says_ready() {
    let home = Home::with_config(&fixture_config(
        &[("fx", "")],
        ", env: {TOK: \"${MCPB_TEST_SVC_TOKEN}\"}",
    ));
    let user = home.root().join("user");
    std::fs::create_dir_all(&user).unwrap();
    let run = |args: &[&str]| {
        home.cmd(args)
            .env("HOME", &user)
            .env("MCPB_TEST_SVC_TOKEN", "tok-value")
            .output()
            .unwrap()
    };
    let dry = run(&["service", "install"]);
    let shown = String::from_utf8_lossy(&dry.stdout).to_string();
    assert!(
        shown.contains("Type=notify") && shown.contains(" daemon\n"),
        "{shown}"
    );
    assert!(
        !shown.contains("tok-value"),
        "a dry run shows no values: {shown}"
    );
    let unit = user.join(".config/systemd/user/mcp-broker.service");
    assert!(!unit.exists());
    assert!(
        run(&["service", "install", "--apply", "--no-start"])
            .status
            .success()
    );
    let env = std::fs::read_to_string(home.root().join("service.env")).unwrap();
    assert!(env.contains("MCPB_TEST_SVC_TOKEN=\"tok-value\""), "{env}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(home.root().join("service.env"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0);
    if std::path::Path::new("/usr/bin/systemd-analyze").exists() {
        let verify = std::process::Command::new("systemd-analyze")
            .arg("verify")
            .arg(&unit)
            .output()
            .unwrap();
        assert!(
            verify.status.success(),
            "{}",
            String::from_utf8_lossy(&verify.stderr)
        );
    }
    let status = run(&["service", "status"]);
    assert!(String::from_utf8_lossy(&status.stdout).contains("installed, current"));
    assert!(run(&["service", "uninstall", "--apply"]).status.success());
    assert!(!unit.exists());

    // Under systemd (Type=notify) the daemon says READY=1 once its socket answers.
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("notify");
    let listener = std::os::unix::net::UnixDatagram::bind(&sock).unwrap();
    listener
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut daemon = home
        .cmd(&["daemon"])
        .env("NOTIFY_SOCKET", &sock)
        .spawn()
        .unwrap();
    let mut buf = [0u8; 64];
    let n = listener.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"READY=1");
    assert!(
        home.run(&["status"]).status.success(),
        "it answers once it said so"
    );
    assert!(home.run(&["stop"]).status.success());
    let _ = daemon.wait();
}

#[test]
fn metrics_say_the_daemons_state_and_a_stopped_one_reads_as_down() {
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    let down = home.run(&["metrics"]);
    assert!(down.status.success());
    assert!(String::from_utf8_lossy(&down.stdout).contains("\nmcp_broker_up 0\n"));
    let mut shim = session(&home);
    shim.call("fx.echo", json!({"text": "x"}));
    let text = String::from_utf8_lossy(&home.run(&["metrics"]).stdout).to_string();
    assert!(text.contains("\nmcp_broker_up 1\n"), "{text}");
    assert!(
        text.contains("mcp_broker_upstream_up{upstream=\"fx\",state=\"running\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("mcp_broker_upstream_starts_total{upstream=\"fx\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE mcp_broker_upstream_failures_total counter"),
        "{text}"
    );
}

#[test]
fn profile_validate_runs_each_smoke_probe_through_the_profiles_view() {
    let fx = super::support::fixture();
    let home = Home::with_config(&format!(
        "schema_version: 1\nupstreams:\n  fx:\n    command: \"{f}\"\n    trust_annotations: true\n    smoke: {{query: \"echo some text\", tool: echo, arguments: {{text: hi}}, call: true}}\n  other:\n    command: \"{f}\"\n    trust_annotations: true\n    smoke: {{query: \"echo\", tool: no_such_tool}}\n  bare: {{command: \"{f}\"}}\n  dotted:\n    command: \"{f}\"\n    trust_annotations: true\n    smoke: {{tool: dotted.echo, arguments: {{text: hi}}, call: true}}\n  writer:\n    command: \"{f}\"\n    trust_annotations: true\n    smoke: {{tool: hang, call: true}}\nprofiles:\n  default: {{allow_mutating_upstreams: true}}\n",
        f = fx.display()
    ));
    // Before any listing, config validate cannot check the probes' tool names, and says so.
    let before = home.run(&["config", "validate"]);
    let said = String::from_utf8_lossy(&before.stderr).to_string();
    assert!(before.status.success(), "{said}");
    assert!(
        said.contains("not checked: never listed") && said.contains("other"),
        "{said}"
    );
    let out = home.run(&["profile", "validate", "default"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        !out.status.success(),
        "a failed probe fails the command: {text}"
    );
    // Once the lists are known, a probe naming a tool its upstream lacks is a config error;
    // the exposed form of a name that exists is not.
    let after = home.run(&["config", "validate"]);
    let said = String::from_utf8_lossy(&after.stderr).to_string();
    assert!(!after.status.success(), "{said}");
    assert!(
        said.contains("upstreams.other.smoke.tool: other has no tool \"no_such_tool\""),
        "{said}"
    );
    assert!(
        !said.contains("upstreams.dotted") && !said.contains("upstreams.fx"),
        "{said}"
    );
    let line = |up: &str, step: &str| {
        text.lines()
            .find(|l| l.starts_with(up) && l.split_whitespace().nth(1) == Some(step))
            .unwrap_or_else(|| panic!("{up} {step}: {text}"))
            .to_string()
    };
    assert!(line("fx", "status").contains("pass"), "{text}");
    assert!(line("fx", "search").contains("pass"), "{text}");
    assert!(line("fx", "describe").contains("pass"), "{text}");
    assert!(line("fx", "call").contains("pass"), "{text}");
    assert!(line("other", "search").contains("FAIL"), "{text}");
    assert!(line("bare", "-").contains("no smoke probe"), "{text}");
    assert!(line("bare", "-").contains("WARN"), "{text}");
    // The exposed name form is the same tool.
    assert!(line("dotted", "describe").contains("pass"), "{text}");
    assert!(line("dotted", "call").contains("pass"), "{text}");
    // A probe never changes anything unless it says so.
    let writer = line("writer", "call");
    assert!(
        writer.contains("FAIL") && writer.contains("not called"),
        "{text}"
    );
    let unknown = home.run(&["profile", "validate", "nope"]);
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("profiles: default"));
}

/// Raw ESC and BEL from an upstream's description (`tools search`) or a config's name
/// (`config validate`) reached the operator's terminal; every piece of untrusted text the CLI
/// prints now goes through one sanitiser.
#[test]
fn no_raw_escape_reaches_the_terminal_from_upstreams_or_configs() {
    let tools = [
        json!({"name": "paint", "description": "Colours text \u{1b}[31mred\u{7} and \u{9b}2J.",
        "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}}),
    ];
    let (home, _) = super::support::tools_home(&tools, "", "", "", "  default: {}\n");
    let names = session(&home).tool_names();
    assert!(
        !names.contains(&"fx.paint".to_string()),
        "quarantined first: {names:?}"
    );
    let approved = home.run(&["pins", "approve", "--yes", "fx.paint"]);
    assert!(
        approved.status.success(),
        "{}",
        String::from_utf8_lossy(&approved.stderr)
    );
    let raw = |out: &std::process::Output| {
        [&out.stdout[..], &out.stderr[..]]
            .iter()
            .flat_map(|b| String::from_utf8_lossy(b).chars().collect::<Vec<_>>())
            .filter(|c| c.is_control() && !matches!(c, '\n' | '\t'))
            .collect::<Vec<char>>()
    };
    assert!(
        raw(&approved).is_empty(),
        "pins approve: {:?}",
        raw(&approved)
    );
    for args in [
        &["tools", "search", "colours"][..],
        &["tools", "describe", "fx.paint"],
        &["pins", "list"],
    ] {
        let out = home.run(args);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("paint"), "{args:?}: {text}");
        assert!(raw(&out).is_empty(), "{args:?}: {:?} in {text}", raw(&out));
    }
    let bad = home.root().join("bad.yaml");
    std::fs::write(
        &bad,
        "schema_version: 1\nupstreams:\n  \"bad\\e[2Jname\\a\": {command: x}\n",
    )
    .unwrap();
    let out = home.run(&["config", "validate", bad.to_str().unwrap()]);
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("name"), "{text}");
    assert!(
        raw(&out).is_empty(),
        "config validate: {:?} in {text}",
        raw(&out)
    );
}
