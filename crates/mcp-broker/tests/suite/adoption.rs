//! What a user meets while moving clients onto the broker: an entry under another key is
//! recognised, hints repeat the flags given, the entry carries a non-default broker home,
//! backups stay private, `doctor` names the command that moves a client, `add` warns of a
//! command that is not there, a second daemon says which one runs, and the shim's hint for an
//! unmapped client is valid config.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;

use serde_json::Value;

use super::support::{Home, bin, fixture_config};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn user_home(home: &Home) -> std::path::PathBuf {
    let u = home.root().join("user");
    std::fs::create_dir_all(&u).unwrap();
    u
}

/// doctor's check of Cursor, run as `user` in `cwd`.
fn cursor_check(home: &Home, user: &Path, cwd: &Path) -> Value {
    let doctor = home
        .cmd(&["doctor", "--json"])
        .env("HOME", user)
        .current_dir(cwd)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&doctor.stdout).unwrap();
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["area"] == "client" && c["detail"].as_str().unwrap().starts_with("cursor"))
        .cloned()
        .unwrap_or_else(|| panic!("{report}"))
}

#[test]
fn an_entry_under_another_key_is_the_brokers_and_is_updated_not_doubled() {
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    let user = user_home(&home);
    let file = user.join(".cursor/mcp.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let theirs = format!(
        "{{\"mcpServers\": {{\"broker\": {{\"command\": \"{}\", \"args\": [\"stdio\", \"--client\", \"cursor\"]}}}}}}\n",
        bin()
    );
    std::fs::write(&file, &theirs).unwrap();
    let status = home
        .cmd(&["client", "status", "--client", "cursor", "--json"])
        .env("HOME", &user)
        .output()
        .unwrap();
    let rows: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(rows[0]["entry"], "present", "{rows}");
    let dry = home
        .cmd(&[
            "client",
            "render",
            "--client",
            "cursor",
            "--profile",
            "default",
        ])
        .env("HOME", &user)
        .output()
        .unwrap();
    let shown = text(&dry.stdout);
    assert!(
        !shown.contains("+    \"mcp-broker\""),
        "a second entry: {shown}"
    );
    assert!(shown.contains("\"--profile\""), "{shown}");
    assert!(
        shown.contains("MCP_BROKER_HOME"),
        "the home is carried: {shown}"
    );
    let cursor = cursor_check(&home, &user, &user);
    assert_eq!(cursor["level"], "ok", "{cursor}");
}

#[test]
fn doctor_names_the_import_for_a_client_not_moved_and_hints_repeat_the_flags() {
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    let user = user_home(&home);
    let proj = user.join("proj");
    std::fs::create_dir_all(proj.join(".cursor")).unwrap();
    std::fs::write(
        proj.join(".cursor/mcp.json"),
        "{\"mcpServers\": {\"git\": {\"command\": \"uvx\", \"args\": [\"mcp-server-git\"]}, \"other\": {\"command\": \"uvx\", \"args\": [\"other\"]}}}\n",
    )
    .unwrap();
    let cursor = cursor_check(&home, &user, &proj);
    assert!(
        cursor["detail"].as_str().unwrap().contains("git (project)"),
        "{cursor}"
    );
    assert!(
        cursor["fix"]
            .as_str()
            .unwrap()
            .contains("mcp-broker client import --client cursor"),
        "{cursor}"
    );
    let dry = home
        .cmd(&[
            "client",
            "import",
            "--client",
            "cursor",
            "--project",
            "--keep",
            "other",
        ])
        .env("HOME", &user)
        .current_dir(&proj)
        .output()
        .unwrap();
    let said = text(&dry.stderr);
    assert!(dry.status.success(), "{said}");
    assert!(
        said.contains("--scope project")
            && said.contains("--keep other")
            && said.contains("--apply"),
        "{said}"
    );
    let table = text(&dry.stdout);
    assert!(table.contains("stays: --keep"), "{table}");
    let service = home
        .cmd(&["service", "install", "--manager", "launchd"])
        .env("HOME", &user)
        .output()
        .unwrap();
    assert!(
        text(&service.stderr).contains("--manager launchd --apply"),
        "{}",
        text(&service.stderr)
    );
}

#[test]
fn backups_and_dry_run_notes_are_the_users_alone() {
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    let user = user_home(&home);
    for args in [
        &["client", "render", "--client", "cursor"][..],
        &["client", "apply", "--client", "cursor"][..],
    ] {
        let out = home.cmd(args).env("HOME", &user).output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    // Backups live apart from the runtime dir, which a user may delete; one folder per
    // runtime dir.
    let key = home.root().display().to_string().replace('/', "%2F");
    let backups = user.join(".local/state/mcp-broker/backups").join(key);
    for dir in [
        backups.clone(),
        backups.join("cursor"),
        home.root().join("state/renders"),
    ] {
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "{} is {mode:o}", dir.display());
    }
    assert!(!home.root().join("backups").exists());
}

#[test]
fn add_warns_of_a_command_that_is_not_there() {
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    let out = home.run(&["add", "ghost", "--", "no-such-server-binary-here"]);
    let said = text(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("ghost") && said.contains("no-such-server-binary-here is not found"),
        "{said}"
    );
    let ok = home.run(&["add", "fine", "--", "sh"]);
    assert!(
        !text(&ok.stderr).contains("not found"),
        "{}",
        text(&ok.stderr)
    );
}

#[test]
fn a_second_daemon_says_which_one_runs() {
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    home.start_with(&[]);
    let pid = home.daemon_pid().expect("a running daemon");
    let out = home.cmd(&["daemon"]).stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    let said = text(&out.stderr);
    assert!(
        said.contains("mcp-broker:") && said.contains(&format!("pid {pid}")),
        "{said}"
    );
    assert!(said.contains("hint:"), "{said}");
}

#[test]
fn the_hint_for_an_unmapped_client_is_valid_config() {
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    let out = home
        .cmd(&["stdio", "--client", "newcomer"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let said = text(&out.stderr);
    let start = said.find("`clients: ").expect(&said) + 1;
    let snippet = &said[start..start + said[start..].find('`').unwrap()];
    let yaml =
        format!("schema_version: 1\nupstreams: {{}}\nprofiles:\n  PROFILE: {{}}\n{snippet}\n");
    let path = home.root().join("hinted.yaml");
    std::fs::write(&path, yaml).unwrap();
    let valid = home.run(&["config", "validate", path.to_str().unwrap()]);
    assert!(valid.status.success(), "{snippet}: {}", text(&valid.stderr));
    assert!(Path::new(&path).exists());
}

#[test]
fn a_killed_upstream_says_why_and_top_shows_the_last_error() {
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    let mut shim = super::support::session(&home);
    shim.call("fx.echo", serde_json::json!({"text": "up"}));
    let pid = home.upstream_pid("fx").expect("fx runs");
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    super::support::wait_until(std::time::Duration::from_secs(5), || {
        home.status()["upstreams"][0]["state"] == "failed"
    });
    let fx = home.status()["upstreams"][0].clone();
    assert_eq!(fx["state"], "failed", "{fx}");
    assert_eq!(fx["failures"], 1, "{fx}");
    let why = fx["last_error"].as_str().unwrap_or_default();
    assert!(
        why.contains("exited") && why.contains(&pid.to_string()),
        "{fx}"
    );
    let table = text(&home.run(&["status"]).stdout);
    assert!(table.contains("exited"), "{table}");
    // A call that fails while the upstream is fine: top's LAST ERROR shows it.
    shim.call("fx.echo", serde_json::json!({"text": "back"}));
    shim.call("fx.no_such_tool", serde_json::json!({}));
    shim.call("fx.crash", serde_json::json!({"code": 4}));
    let top = home.run(&["top", "--count", "1"]);
    let frame = text(&top.stdout);
    let row = frame
        .lines()
        .find(|l| l.starts_with("fx "))
        .unwrap_or_else(|| panic!("{frame}"));
    assert!(row.contains("crash") || row.contains("exited"), "{frame}");
}

#[test]
fn doctor_asks_the_running_daemon_for_its_variables_not_this_shell() {
    let home = Home::with_config(&fixture_config(
        &[("fx", "")],
        ", env: {K: \"${MCPB_DOCTOR_ONLY_IN_DAEMON}\"}",
    ));
    let problems = |home: &Home| -> Vec<String> {
        let out = home.run(&["doctor", "--json"]);
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["level"] == "PROBLEM")
            .map(|c| c["detail"].as_str().unwrap().to_string())
            .collect()
    };
    let without = problems(&home);
    assert!(
        without
            .iter()
            .any(|p| p.contains("MCPB_DOCTOR_ONLY_IN_DAEMON") && p.contains("this environment")),
        "{without:?}"
    );
    home.start_with(&[("MCPB_DOCTOR_ONLY_IN_DAEMON", "set")]);
    let with = problems(&home);
    assert!(
        !with
            .iter()
            .any(|p| p.contains("MCPB_DOCTOR_ONLY_IN_DAEMON")),
        "the daemon has it: {with:?}"
    );
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

#[test]
fn a_daemon_whose_runtime_dir_is_deleted_stops_with_its_upstreams_and_frees_its_port() {
    let port = super::http_front::free_port();
    let home = Home::with_config(&format!(
        "schema_version: 1\nupstreams:\n  fx: {{command: {}}}\nprofiles:\n  default: {{}}\nhttp:\n  listen: 127.0.0.1:{port}\n  tokens:\n    - {{token: \"${{MCPB_TEST_HTTP_TOKEN}}\", profile: default}}\n",
        super::support::fixture().display()
    ));
    home.start_with(&[(
        "MCPB_TEST_HTTP_TOKEN",
        "a-long-enough-token-for-the-front-0123456789",
    )]);
    let mut shim = super::support::session(&home);
    shim.call("fx.echo", serde_json::json!({"text": "up"}));
    let daemon = home.daemon_pid().unwrap();
    let upstream = home.upstream_pid("fx").unwrap();
    drop(shim);
    // Everything but the config file goes, as `rm -rf ~/mcp/mcp-broker/*` would.
    for entry in std::fs::read_dir(home.root()).unwrap().flatten() {
        if entry.file_name() != "test.yaml" {
            let p = entry.path();
            let _ = std::fs::remove_dir_all(&p).or_else(|_| std::fs::remove_file(&p));
        }
    }
    super::support::wait_until(std::time::Duration::from_secs(10), || {
        !alive(daemon) && !alive(upstream)
    });
    assert!(!alive(daemon), "the daemon went on without its socket");
    assert!(!alive(upstream), "its upstream went on");
    assert!(
        std::net::TcpListener::bind(("127.0.0.1", port)).is_ok(),
        "the port is free"
    );
    home.start_with(&[(
        "MCPB_TEST_HTTP_TOKEN",
        "a-long-enough-token-for-the-front-0123456789",
    )]);
    assert!(home.daemon_pid().is_some());
}

#[test]
fn start_says_the_daemons_own_reason_when_it_does_not_come_up() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let home = Home::with_config(&format!(
        "schema_version: 1\nupstreams: {{}}\nprofiles:\n  default: {{}}\nhttp:\n  listen: 127.0.0.1:{port}\n  tokens:\n    - {{token: \"${{MCPB_TEST_HTTP_TOKEN}}\", profile: default}}\n"
    ));
    let started = std::time::Instant::now();
    let out = home
        .cmd(&["start"])
        .env(
            "MCPB_TEST_HTTP_TOKEN",
            "a-long-enough-token-for-the-front-0123456789",
        )
        .output()
        .unwrap();
    let said = text(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(8),
        "it waited out its limit for a daemon that was gone: {:?}",
        started.elapsed()
    );
    assert!(
        !home.socket().exists(),
        "a socket nobody answers on was left"
    );
    assert!(said.contains("the daemon said:"), "{said}");
    assert!(said.to_lowercase().contains("in use"), "{said}");
}

#[test]
fn status_and_doctor_find_a_daemon_that_lost_its_runtime_dir() {
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    // A daemon of an older build that did not notice: its argv and environment, nothing else.
    let gone = home.root().join("gone");
    let mut lost = std::process::Command::new("bash")
        .args(["-c", "exec -a mcp-broker perl -e 'sleep 60' daemon"])
        .env("MCP_BROKER_HOME", &gone)
        .spawn()
        .unwrap();
    // Once its argv reads as the broker's, it is the daemon the commands must find.
    let argv = format!("/proc/{}/cmdline", lost.id());
    assert!(super::support::wait_until(
        std::time::Duration::from_secs(10),
        || std::fs::read(&argv).is_ok_and(|a| a.starts_with(b"mcp-broker\0"))
    ));
    let status = home.run(&["status"]);
    let said = text(&status.stderr);
    let doctor = home.run(&["doctor", "--json"]);
    let _ = lost.kill();
    let _ = lost.wait();
    assert!(
        said.contains(&format!(
            "daemon pid {} runs for {}",
            lost.id(),
            gone.display()
        )),
        "{said}"
    );
    assert!(said.contains(&format!("kill {}", lost.id())), "{said}");
    let report: Value = serde_json::from_slice(&doctor.stdout).unwrap();
    assert!(
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["level"] == "PROBLEM"
                && c["detail"]
                    .as_str()
                    .unwrap()
                    .contains(&format!("daemon pid {}", lost.id()))),
        "{report}"
    );
}

/// A `systemctl` on PATH that answers as `mode` says and logs its arguments: this machine has
/// no systemd user manager, and a test must never touch a real one.
pub(super) fn fake_systemctl(dir: &Path, mode: &str) -> String {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = match mode {
        "no-bus" => "#!/bin/sh\necho \"$@\" >> \"$(dirname \"$0\")/calls\"\necho 'Failed to connect to bus: No medium found' >&2\nexit 1\n".to_string(),
        _ => "#!/bin/sh\necho \"$@\" >> \"$(dirname \"$0\")/calls\"\n[ \"$2\" = is-active ] && echo active\nexit 0\n".to_string(),
    };
    let path = bin.join("systemctl");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[test]
fn service_install_starts_the_service_when_a_user_manager_answers_and_says_so_when_none_does() {
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    let user = user_home(&home);
    let no_bus = home.root().join("nobus");
    let path = fake_systemctl(&no_bus, "no-bus");
    let run = |path: &str, args: &[&str], extra: &[(&str, &str)]| {
        let mut c = home.cmd(args);
        c.env("HOME", &user).env("PATH", path);
        for (k, v) in extra {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    let out = run(&path, &["service", "install", "--apply"], &[]);
    let said = text(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("no systemd user manager answers")
            && said.contains("No medium found")
            && said.contains("nothing was started"),
        "{said}"
    );
    let status = text(&run(&path, &["service", "status"], &[]).stdout);
    assert!(
        status.contains("installed, current") && status.contains("not run as a service"),
        "{status}"
    );

    let bus = home.root().join("bus");
    let path = fake_systemctl(&bus, "ok");
    let out = run(
        &path,
        &["service", "install", "--apply"],
        &[(
            "MCP_BROKER_DAEMON_COMMAND",
            "/opt/pkg/bin/mcp-broker-wrapper --quiet",
        )],
    );
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{said}");
    assert!(said.contains("enabled and started"), "{said}");
    let calls = std::fs::read_to_string(bus.join("bin/calls")).unwrap();
    assert!(
        calls.contains("--user daemon-reload\n--user enable --now mcp-broker\n"),
        "{calls}"
    );
    let unit =
        std::fs::read_to_string(user.join(".config/systemd/user/mcp-broker.service")).unwrap();
    assert!(
        unit.contains("ExecStart=/opt/pkg/bin/mcp-broker-wrapper --quiet --config "),
        "{unit}"
    );
    let status = text(
        &run(
            &path,
            &["service", "status"],
            &[(
                "MCP_BROKER_DAEMON_COMMAND",
                "/opt/pkg/bin/mcp-broker-wrapper --quiet",
            )],
        )
        .stdout,
    );
    assert!(status.contains("installed, current; active"), "{status}");
}

fn import(home: &Home, user: &Path, cwd: &Path, extra: &[&str]) -> (bool, String, String) {
    let mut args = vec!["client", "import"];
    args.extend_from_slice(extra);
    let out = home
        .cmd(&args)
        .env("HOME", user)
        .current_dir(cwd)
        .output()
        .unwrap();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

#[test]
fn import_creates_no_file_it_has_nothing_for_and_refuses_a_read_only_one_before_writing() {
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    let user = user_home(&home);
    let proj = user.join("proj");
    std::fs::create_dir_all(proj.join("sub")).unwrap();
    let file = user.join(".cursor/mcp.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let theirs = format!(
        "{{\"mcpServers\": {{\"mine\": {{\"command\": \"{}\", \"args\": [\"--name\", \"mine\"]}}}}}}\n",
        super::support::fixture().display()
    );
    std::fs::write(&file, &theirs).unwrap();
    let config_before = std::fs::read_to_string(home.config_path()).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o444)).unwrap();
    let (ok, _, err) = import(&home, &user, &proj, &["--client", "cursor"]);
    assert!(ok, "{err}");
    let (ok, _, err) = import(&home, &user, &proj, &["--client", "cursor", "--apply"]);
    assert!(
        !ok && err.contains("read-only") && err.contains("nothing was written"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(home.config_path()).unwrap(),
        config_before
    );
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (ok, _, err) = import(&home, &user, &proj, &["--client", "cursor"]);
    assert!(ok, "{err}");
    let (ok, out, err) = import(&home, &user, &proj, &["--client", "cursor", "--apply"]);
    assert!(ok, "{out}{err}");
    assert!(
        !proj.join(".cursor").exists(),
        "a project file nobody asked for was made"
    );
}

#[test]
fn a_second_import_extends_the_profile_the_entry_names_and_parity_checks_both() {
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    let user = user_home(&home);
    let file = user.join(".cursor/mcp.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let fx = super::support::fixture();
    let one = format!(
        "{{\"mcpServers\": {{\"one\": {{\"command\": \"{}\", \"args\": [\"--name\", \"one\"]}}}}}}\n",
        fx.display()
    );
    std::fs::write(&file, &one).unwrap();
    for args in [
        &["--client", "cursor", "--profile", "work"][..],
        &["--client", "cursor", "--profile", "work", "--apply"][..],
    ] {
        let (ok, out, err) = import(&home, &user, &user, args);
        assert!(ok || !args.contains(&"--apply"), "{out}{err}");
        if !ok {
            // `work` does not exist yet: made for the client.
            panic!("{out}{err}");
        }
    }
    // The client gains a server of its own; a later import without --profile keeps `work`.
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    v["mcpServers"]["two"] = serde_json::json!({"command": fx, "args": ["--name", "two"]});
    std::fs::write(&file, v.to_string()).unwrap();
    let (ok, out, err) = import(&home, &user, &user, &["--client", "cursor"]);
    assert!(ok, "{out}{err}");
    assert!(
        out.contains("profile work: two added to its upstreams"),
        "{out}"
    );
    let (ok, out, err) = import(&home, &user, &user, &["--client", "cursor", "--apply"]);
    assert!(ok, "{out}{err}");
    let parity = home
        .cmd(&["client", "parity", "--client", "cursor", "--json"])
        .env("HOME", &user)
        .output()
        .unwrap();
    let p: Value = serde_json::from_slice(&parity.stdout).unwrap();
    let names: Vec<&str> = p["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["server"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["one", "two"], "{p}");
    assert_eq!(
        (p["missing"].as_u64(), p["added"].as_u64()),
        (Some(0), Some(0)),
        "{p}"
    );
}

#[test]
fn import_refuses_before_writing_when_the_running_daemon_serves_another_file() {
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    home.start_with(&[]);
    let user = user_home(&home);
    let file = user.join(".cursor/mcp.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let theirs = format!(
        "{{\"mcpServers\": {{\"mine\": {{\"command\": \"{}\"}}}}}}\n",
        super::support::fixture().display()
    );
    std::fs::write(&file, &theirs).unwrap();
    let other = home.root().join("other.yaml");
    std::fs::write(&other, "schema_version: 1\nprofiles:\n  default: {}\n").unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "--config",
            other.to_str().unwrap(),
            "client",
            "import",
            "--client",
            "cursor",
        ];
        args.extend_from_slice(extra);
        let out = home.cmd(&args).env("HOME", &user).output().unwrap();
        (out.status.success(), text(&out.stderr))
    };
    assert!(run(&[]).0);
    let (ok, said) = run(&["--apply"]);
    assert!(
        !ok && said.contains("serves") && said.contains("nothing was written"),
        "{said}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), theirs);
    assert!(!std::fs::read_to_string(&other).unwrap().contains("mine"));
}

#[test]
fn stdio_init_if_missing_writes_the_default_config_once_and_serves_on_a_clean_stdout() {
    let home = Home::new();
    let config = home.root().join("broker.yaml");
    assert!(!config.exists());
    let mut shim = home.shim(&["--init-if-missing"]);
    // The first thing on stdout is the answer to initialize: nothing else was printed there.
    let init = shim.initialize("2025-11-25");
    assert_eq!(init["result"]["serverInfo"]["name"], "mcp-broker", "{init}");
    assert!(!shim.tool_names().is_empty());
    drop(shim);
    let written = std::fs::read_to_string(&config).unwrap();
    assert!(written.contains("schema_version: 1"), "{written}");
    assert!(home.root().join("broker.schema.json").is_file());
    // A file that is there already is the user's: left exactly as it is.
    let mine = format!("{written}\n# mine\n");
    std::fs::write(&config, &mine).unwrap();
    let mut again = home.shim(&["--init-if-missing"]);
    let init = again.initialize("2025-11-25");
    assert!(init.get("result").is_some(), "{init}");
    drop(again);
    assert_eq!(std::fs::read_to_string(&config).unwrap(), mine);
    let _ = home.run(&["stop"]);
}

#[test]
fn rolling_back_a_project_file_from_another_folder_names_the_files_with_backups() {
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    let user = user_home(&home);
    let proj = home.root().join("proj");
    let elsewhere = home.root().join("elsewhere");
    std::fs::create_dir_all(proj.join(".cursor")).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    let file = proj.join(".cursor/mcp.json");
    std::fs::write(&file, "{\"mcpServers\": {}}\n").unwrap();
    let run = |args: &[&str], cwd: &Path| {
        let mut all = vec!["client"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--client", "cursor", "--project"]);
        home.cmd(&all)
            .env("HOME", &user)
            .current_dir(cwd)
            .output()
            .unwrap()
    };
    for step in ["render", "apply"] {
        let out = run(&[step], &proj);
        assert!(out.status.success(), "{step}: {}", text(&out.stderr));
    }
    assert!(
        std::fs::read_to_string(&file)
            .unwrap()
            .contains("mcp-broker")
    );

    let lost = run(&["rollback"], &elsewhere);
    assert!(!lost.status.success());
    let said = text(&lost.stderr);
    assert!(
        said.contains("backups of this file: (none)")
            && said.contains(&format!("cursor has backups of: {}", file.display()))
            && said.contains("from its project's folder with --project"),
        "{said}"
    );

    let back = run(&["rollback"], &proj);
    assert!(back.status.success(), "{}", text(&back.stderr));
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "{\"mcpServers\": {}}\n"
    );
}

#[test]
fn add_reaches_the_imported_profiles_and_remove_takes_it_out_of_them() {
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    let user = user_home(&home);
    let file = user.join(".cursor/mcp.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let fx = super::support::fixture();
    std::fs::write(
        &file,
        format!(
            "{{\"mcpServers\": {{\"one\": {{\"command\": \"{}\", \"args\": [\"--name\", \"one\"]}}}}}}\n",
            fx.display()
        ),
    )
    .unwrap();
    for extra in [&[][..], &["--apply"][..]] {
        let mut args = vec!["--client", "cursor"];
        args.extend_from_slice(extra);
        let (ok, out, err) = import(&home, &user, &user, &args);
        assert!(ok, "{out}{err}");
    }
    let run = |args: &[&str]| {
        let out = home.cmd(args).env("HOME", &user).output().unwrap();
        let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert!(out.status.success(), "{args:?}: {said}");
        said
    };
    let fxs = fx.display().to_string();
    let said = run(&["add", "two", "--", &fxs, "--name", "two"]);
    assert!(
        said.contains("added upstream two to profile(s) cursor"),
        "{said}"
    );
    let config = std::fs::read_to_string(home.config_path()).unwrap();
    assert!(config.contains("upstreams: [one, two]"), "{config}");
    for name in ["two", "one"] {
        let said = run(&["remove", name]);
        assert!(said.contains("and from profile(s) cursor"), "{said}");
    }
    run(&["config", "validate"]);
    let _ = home.run(&["stop"]);
}
