//! `config import`: an MCP Exec Broker config becomes upstreams, a profile in that broker's
//! tool names with its run defaults, and its workspace root; a dry run first, nothing written
//! while a target is refused, and the result serves through the shim.

use std::os::unix::fs::PermissionsExt;

use serde_json::{Value, json};

use super::support::{Home, fixture};

fn exec_config(home: &Home) -> std::path::PathBuf {
    let dir = home.root().join("exec-broker");
    std::fs::create_dir_all(dir.join("srv")).unwrap();
    let cfg = json!({
        "workspace_root": "./work",
        "defaults": {"wall_clock_ms": 45000, "per_call_ms": 15000, "max_calls": 8,
                     "max_output_kb": 256, "persist": true, "telemetry": "off"},
        "targets": [
            {"name": "Fixture Tools", "command": fixture(), "args": ["--name", "fx"],
             "env": {"GREETING": "${USER_GREETING}", "MODE": "fast"},
             "tags": ["demo"], "tools_allow": ["echo", "env"]},
            {"name": "keyed", "command": fixture(), "cwd": "srv",
             "env": {"API_KEY": "sk-live-abcdef0123456789abcdef"}, "color": "blue"},
            {"name": "leaky", "command": "uvx",
             "args": ["tool", "--token", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"]}
        ]
    });
    let path = dir.join("exec.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&cfg).unwrap()).unwrap();
    path
}

/// Output with this run's folders replaced, so it reads the same on every machine.
fn portable(home: &Home, out: &std::process::Output) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    text.replace(&fixture().display().to_string(), "$FIXTURE")
        .replace(&home.root().display().to_string(), "$HOME")
}

fn call(shim: &mut super::support::Shim, tool: &str, args: Value) -> Value {
    let r = shim.call(tool, args);
    assert!(r["result"]["isError"] != true, "{r}");
    r["result"]["structuredContent"].clone()
}

#[test]
fn an_exec_broker_config_is_imported_after_a_dry_run_and_serves_in_its_own_tool_names() {
    let home = Home::with_config("schema_version: 1\nprofiles:\n  default: {}\n");
    let file = exec_config(&home);
    let file_arg = file.display().to_string();
    let config_before = std::fs::read_to_string(home.config_path()).unwrap();

    // A dry run shows everything, and with a target it cannot take, writes nothing.
    let dry = home.run(&["config", "import", &file_arg]);
    assert!(!dry.status.success());
    insta::assert_snapshot!("exec_config_dry_run", portable(&home, &dry));
    let apply = home.run(&["config", "import", &file_arg, "--apply"]);
    assert!(!apply.status.success(), "{}", portable(&home, &apply));
    assert_eq!(
        std::fs::read_to_string(home.config_path()).unwrap(),
        config_before
    );
    assert!(!home.root().join("secrets/keyed-api_key").exists());

    // Without it, from MCP_EXEC_CONFIG: the dry run, then exactly that written.
    let run = |apply: bool| {
        let mut args = vec!["config", "import", "--skip", "leaky"];
        if apply {
            args.push("--apply");
        }
        home.cmd(&args)
            .env("MCP_EXEC_CONFIG", &file)
            .output()
            .unwrap()
    };
    assert!(run(false).status.success());
    let applied = run(true);
    assert!(applied.status.success(), "{}", portable(&home, &applied));
    insta::assert_snapshot!(
        "exec_config_written",
        std::fs::read_to_string(home.config_path())
            .unwrap()
            .replace(&fixture().display().to_string(), "$FIXTURE")
            .replace(&home.root().display().to_string(), "$HOME")
    );
    let secret = home.root().join("secrets/keyed-api_key");
    assert_eq!(
        std::fs::read_to_string(&secret).unwrap(),
        "sk-live-abcdef0123456789abcdef"
    );
    assert_eq!(
        std::fs::metadata(&secret).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(home.run(&["config", "validate"]).status.success());

    // Again: everything is there already.
    assert!(run(false).status.success());
    let again = run(true);
    assert!(
        portable(&home, &again).contains("nothing to write"),
        "{}",
        portable(&home, &again)
    );

    // The profile serves the targets under the exec broker's names, with its filter and
    // defaults.
    home.start_with(&[("USER_GREETING", "hello")]);
    let mut shim = home.shim(&["--profile", "exec-broker"]);
    shim.initialize("2025-11-25");
    let servers = call(&mut shim, "servers_list", json!({}));
    let names: Vec<&str> = servers["servers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(names, ["fixture-tools", "keyed"], "{servers}");
    let tools = call(
        &mut shim,
        "server_tools_list",
        json!({"server": "fixture-tools"}),
    );
    let mut listed: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    listed.sort_unstable();
    assert_eq!(
        listed,
        ["fixture-tools.echo", "fixture-tools.env"],
        "{tools}"
    );
    let opened = call(&mut shim, "exec_open", json!({}));
    assert_eq!(opened["persist"], true, "the profile's default: {opened}");
    let workspaces = home.root().join("exec-broker/work");
    assert!(workspaces.is_dir(), "runs live under the imported root");
}

#[test]
fn a_file_that_is_not_an_exec_broker_config_is_refused_with_its_place() {
    let home = Home::with_config("schema_version: 1\n");
    let path = home.root().join("bad.json");
    std::fs::write(&path, "{\"targets\": [{\"name\": \"x\"}]}").unwrap();
    let out = home.run(&["config", "import", &path.display().to_string()]);
    let text = portable(&home, &out);
    assert!(!out.status.success());
    assert!(
        text.contains("is not an MCP Exec Broker config: missing field `command`")
            && text.contains("line 1")
            && text.contains("hint: its keys:"),
        "{text}"
    );
    let none = home.run(&["config", "import"]);
    assert!(
        String::from_utf8_lossy(&none.stderr).contains("MCP_EXEC_CONFIG"),
        "{}",
        String::from_utf8_lossy(&none.stderr)
    );
}

#[test]
fn targets_the_broker_cannot_hold_as_written_are_refused_with_the_reason() {
    let home = Home::with_config("schema_version: 1\n");
    let path = home.root().join("odd.json");
    let fx = fixture().display().to_string();
    std::fs::write(
        &path,
        json!({"targets": [
            {"name": "eq", "command": fx, "env": {"A=B": "x"}},
            {"name": "empty", "command": ""},
            {"name": "var", "command": fx, "cwd": "${HOME}/p"},
            {"name": "hook", "command": fx, "env": {"HOOK": "https://hooks.example.test/services/T0A1B2C3/B0B2C3D4/aB3dE5fG6hI7jK8lM9nO0pQ1"}},
            {"name": "home", "command": "~/bin/srv", "cwd": "~/proj"}
        ]})
        .to_string(),
    )
    .unwrap();
    let out = home.run(&["config", "import", &path.display().to_string()]);
    let text = portable(&home, &out);
    assert!(!out.status.success(), "{text}");
    let row = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name}: {text}"))
            .to_string()
    };
    assert!(row("eq").contains("is not a variable name"), "{text}");
    assert!(row("empty").contains("its command is empty"), "{text}");
    assert!(row("var").contains("holds a variable"), "{text}");
    // A credential in a URL goes to a secret file like any other; the dry run never shows it.
    assert!(row("hook").contains("new upstream hook"), "{text}");
    assert!(!text.contains("aB3dE5fG6hI7jK8lM9nO0pQ1"), "{text}");
    assert!(text.contains("${file:hook-hook}"), "{text}");
    // `~/` is the home's, once.
    assert!(
        text.contains("command: \"$HOME/bin/srv\"") && text.contains("cwd: \"$HOME/proj\""),
        "{text}"
    );
}

/// A file's values cannot forge lines of what the import prints: a target whose `cwd` (a
/// folder that exists, so the target is taken) holds a line break is shown on one line, the
/// break escaped, in the table and in the grants.
#[test]
fn a_cwd_holding_line_breaks_cannot_forge_printed_lines() {
    let home = Home::with_config("schema_version: 1\nprofiles:\n  default: {}\n");
    let dir = home.root().join("exec-broker");
    let forged = "srv\nsandbox evil: sandboxed, network host; writes /";
    std::fs::create_dir_all(dir.join(forged)).unwrap();
    let cfg = json!({"targets": [{"name": "odd", "command": fixture(), "cwd": forged}]});
    let path = dir.join("exec.json");
    std::fs::write(&path, serde_json::to_vec(&cfg).unwrap()).unwrap();
    let dry = home.run(&["config", "import", &path.display().to_string()]);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&dry.stdout),
        String::from_utf8_lossy(&dry.stderr)
    );
    assert!(dry.status.success(), "{said}");
    assert!(said.contains("sandbox odd:"), "{said}");
    assert!(
        !said.lines().any(|l| l.starts_with("sandbox evil")),
        "a forged line: {said}"
    );
    assert!(said.contains("srv\\nsandbox evil"), "{said}");
}
