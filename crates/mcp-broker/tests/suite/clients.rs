//! `mcp-broker client`: a dry run before anything is written, apply only what it showed,
//! rollback to the byte, status per client, and the rendered entries of Claude Code and Codex
//! driven for real with the official Python SDK client.

use std::path::Path;

use serde_json::{Value, json};

use super::interop::{py_driver, read_result};
use super::support::{Home, deps, deps_path};

const CODEX: &str = "# my codex\nmodel = \"o4\"\n\n[mcp_servers.git]\ncommand = \"uvx\"  # git\nargs = [\"mcp-server-git\"]\n";

fn home_with_example() -> Home {
    Home::with_config(
        "schema_version: 1\nupstreams:\n  example: {command: \"{broker.exe}\", args: [example-server], trust_annotations: true}\nprofiles:\n  default: {allow_mutating_upstreams: true}\n  codex: {broker_tool_name_style: double_underscore, allow_mutating_upstreams: true}\n",
    )
}

fn client(home: &Home, user: &Path, args: &[&str]) -> std::process::Output {
    let mut all = vec!["client"];
    all.extend_from_slice(args);
    home.cmd(&all).env("HOME", user).output().unwrap()
}

#[test]
fn apply_writes_only_what_the_dry_run_showed_and_rollback_gives_the_file_back() {
    let home = home_with_example();
    let user = home.root().join("user");
    let file = user.join(".codex/config.toml");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, CODEX).unwrap();
    let args = ["--client", "codex", "--profile", "codex"];

    let early = client(&home, &user, &[&["apply"][..], &args].concat());
    assert!(!early.status.success(), "no dry run yet");
    assert!(
        String::from_utf8_lossy(&early.stderr).contains("since the dry run (or none was made)")
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), CODEX);

    let dry = client(&home, &user, &[&["render"][..], &args].concat());
    let shown = String::from_utf8_lossy(&dry.stdout).to_string();
    assert!(dry.status.success());
    assert!(shown.contains("+[mcp_servers.mcp-broker]"), "{shown}");
    assert!(shown.contains("\"--profile\", \"codex\""), "{shown}");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        CODEX,
        "a dry run writes nothing"
    );

    // The file changed after the dry run: apply refuses and asks for a new one.
    std::fs::write(&file, format!("{CODEX}# edited\n")).unwrap();
    let stale = client(&home, &user, &[&["apply"][..], &args].concat());
    assert!(!stale.status.success());
    std::fs::write(&file, CODEX).unwrap();
    render_and_apply(&home, &user, &args);
    let written = std::fs::read_to_string(&file).unwrap();
    assert!(written.starts_with("# my codex\n") && written.contains("command = \"uvx\"  # git"));
    assert!(written.contains("[mcp_servers.mcp-broker]"), "{written}");

    let status: Value =
        serde_json::from_slice(&client(&home, &user, &["status", "--json"]).stdout).unwrap();
    let codex = status
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["client"] == "codex")
        .unwrap();
    assert_eq!(codex["entry"], "present", "{status}");

    rolls_back_to(&home, &user, "codex", &file, CODEX);

    // A broken file is left alone, with the place it breaks.
    std::fs::write(&file, "[mcp_servers.git\n").unwrap();
    let broken = client(&home, &user, &[&["render"][..], &args].concat());
    assert!(!broken.status.success());
    assert!(String::from_utf8_lossy(&broken.stderr).contains("config.toml:1:"));
    let unknown = client(&home, &user, &["render", "--client", "notepad"]);
    assert!(
        String::from_utf8_lossy(&unknown.stderr)
            .contains("possible values: claude-desktop, claude-code")
    );
}

/// `client rollback` succeeds and gives `file` back as `was`, byte for byte.
fn rolls_back_to(home: &Home, user: &Path, name: &str, file: &Path, was: &str) {
    let back = client(home, user, &["rollback", "--client", name]);
    assert!(
        back.status.success(),
        "{}",
        String::from_utf8_lossy(&back.stderr)
    );
    assert_eq!(std::fs::read_to_string(file).unwrap(), was, "byte for byte");
}

/// A dry run, then applying it; both must succeed.
fn render_and_apply(home: &Home, user: &Path, args: &[&str]) {
    assert!(
        client(home, user, &[&["render"][..], args].concat())
            .status
            .success()
    );
    let applied = client(home, user, &[&["apply"][..], args].concat());
    assert!(
        applied.status.success(),
        "{}",
        String::from_utf8_lossy(&applied.stderr)
    );
}

/// The entry the file holds, as the client will start it.
fn spec_from(home: &Home, path: &str, client: mcpb_clients::Client, file: &Path) -> Value {
    let text = std::fs::read_to_string(file).unwrap();
    let entry = mcpb_clients::current_entry(client, file, &text)
        .unwrap()
        .unwrap();
    json!({
        "command": entry["command"],
        "args": entry["args"],
        "env": {
            "MCP_BROKER_HOME": home.root(),
            "MCP_BROKER_CONFIG": home.config_path(),
            "PATH": path,
            "HOME": home.root().join("user"),
        },
    })
}

#[test]
fn the_rendered_claude_code_and_codex_entries_run_for_real() {
    let home = home_with_example();
    let user = home.root().join("user");
    let deps = deps();
    let path = deps_path(&deps);
    for (name, c, file, tool) in [
        (
            "claude-code",
            mcpb_clients::Client::ClaudeCode,
            user.join(".claude.json"),
            "example.echo",
        ),
        (
            "codex",
            mcpb_clients::Client::Codex,
            user.join(".codex/config.toml"),
            "example__echo",
        ),
    ] {
        let profile = if name == "codex" { "codex" } else { "default" };
        let args = ["--client", name, "--profile", profile];
        render_and_apply(&home, &user, &args);
        let mut spec = spec_from(&home, &path, c, &file);
        spec["calls"] = json!([[tool, {"message": format!("via {name}")}]]);
        let mut child = py_driver(&deps, &path, "py_client.py", &spec);
        let out = read_result(&mut child);
        let _ = child.wait();
        assert!(
            out.to_string().contains(&format!("via {name}")),
            "{name}: {out}"
        );
    }
}

#[test]
fn rollback_keeps_later_edits_home_must_be_set_and_a_symlink_stays_a_symlink() {
    let home = home_with_example();
    let user = home.root().join("user");
    let dotfiles = home.root().join("dotfiles");
    std::fs::create_dir_all(&dotfiles).unwrap();
    std::fs::create_dir_all(user.join(".cursor")).unwrap();
    let real = dotfiles.join("cursor-mcp.json");
    std::fs::write(&real, "{\"mcpServers\": {}}\n").unwrap();
    let link = user.join(".cursor/mcp.json");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    render_and_apply(&home, &user, &["--client", "cursor"]);
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(
        std::fs::read_to_string(&real)
            .unwrap()
            .contains("mcp-broker")
    );

    // The client (or a person) changed the broker's own entry after the broker wrote it:
    // taking it back would lose that, so nothing is changed.
    let written = std::fs::read_to_string(&real).unwrap();
    let edited = written.replacen("\"stdio\"", "\"stdio\", \"--verbose\"", 1);
    std::fs::write(&real, &edited).unwrap();
    let refused = client(&home, &user, &["rollback", "--client", "cursor"]);
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("changed since the broker wrote it"), "{said}");
    assert!(said.contains("--force"), "{said}");
    assert_eq!(std::fs::read_to_string(&real).unwrap(), edited);
    // A change elsewhere in the file (clients rewrite their own files): only the broker's
    // entry goes, the rest stays as the client left it.
    let elsewhere = written.replacen('{', "{\"x\": 1, ", 1);
    std::fs::write(&real, &elsewhere).unwrap();
    let merged = client(&home, &user, &["rollback", "--client", "cursor"]);
    assert!(
        merged.status.success(),
        "{}",
        String::from_utf8_lossy(&merged.stderr)
    );
    let now: Value = serde_json::from_str(&std::fs::read_to_string(&real).unwrap()).unwrap();
    assert_eq!(now, json!({"x": 1, "mcpServers": {}}));
    std::fs::write(&real, &written).unwrap();

    let homeless = home
        .cmd(&["client", "render", "--client", "cursor"])
        .env_remove("HOME")
        .current_dir(&user)
        .output()
        .unwrap();
    assert!(!homeless.status.success());
    assert!(String::from_utf8_lossy(&homeless.stderr).contains("HOME is not set"));
    assert!(!user.join(".claude.json").exists());
}

#[test]
fn import_moves_a_clients_servers_into_the_broker_without_copying_secrets_and_rolls_back() {
    let home = Home::with_config(
        "schema_version: 1\nupstreams: {}\nprofiles:\n  default: {allow_mutating_upstreams: true}\n",
    );
    let user = home.root().join("user");
    let file = user.join(".cursor/mcp.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let theirs = format!(
        "{{\n  // mine\n  \"mcpServers\": {{\n    \"Notes Server\": {{\"command\": \"{}\", \"args\": [\"example-server\"], \"env\": {{\"NOTES_API_KEY\": \"sk-live-0123456789abcdef\"}}}}\n  }}\n}}\n",
        super::support::bin()
    );
    std::fs::write(&file, &theirs).unwrap();
    let early = client(&home, &user, &["import", "--client", "cursor", "--apply"]);
    assert!(!early.status.success(), "no dry run yet");
    let dry = client(&home, &user, &["import", "--client", "cursor"]);
    let shown = String::from_utf8_lossy(&dry.stdout).to_string();
    assert!(
        dry.status.success(),
        "{}",
        String::from_utf8_lossy(&dry.stderr)
    );
    assert!(shown.contains("+  notes-server:"), "{shown}");
    assert!(
        shown.contains("NOTES_API_KEY: \"${file:notes-server-notes_api_key}\""),
        "{shown}"
    );
    assert!(!shown.contains("sk-live-0123456789abcdef"), "{shown}");
    let applied = client(&home, &user, &["import", "--client", "cursor", "--apply"]);
    assert!(
        applied.status.success(),
        "{}",
        String::from_utf8_lossy(&applied.stderr)
    );
    let config = std::fs::read_to_string(home.config_path()).unwrap();
    assert!(config.contains("notes-server:"), "{config}");
    assert!(!config.contains("sk-live"), "a secret was copied: {config}");
    let now = std::fs::read_to_string(&file).unwrap();
    assert!(
        now.contains("// mine") && now.contains("\"mcp-broker\""),
        "{now}"
    );
    assert!(!now.contains("Notes Server"), "{now}");
    // The client's new entry reaches the moved server through the broker.
    let deps = deps();
    let path = deps_path(&deps);
    let mut spec = spec_from(&home, &path, mcpb_clients::Client::Cursor, &file);
    spec["env"]["NOTES_API_KEY"] = json!("sk-live-0123456789abcdef");
    spec["calls"] = json!([["notes-server.echo", {"message": "moved"}]]);
    let mut child = py_driver(&deps, &path, "py_client.py", &spec);
    let out = read_result(&mut child);
    let _ = child.wait();
    assert!(out.to_string().contains("moved"), "{out}");
    rolls_back_to(&home, &user, "cursor", &file, &theirs);
}
