//! Reload: unchanged upstreams keep their processes, changed ones restart after their calls,
//! an invalid file is refused whole.

use std::time::Duration;

use serde_json::json;

use super::support::{Home, Shim, fixture, group_alive, upstream_status, wait_until};

fn yaml(a_args: &str, with_c: bool) -> String {
    let fx = fixture();
    let mut y = format!(
        "schema_version: 1\nupstreams:\n  a: {{command: \"{fx}\", args: [{a_args}], trust_annotations: true}}\n  b: {{command: \"{fx}\", trust_annotations: true}}\n",
        fx = fx.display()
    );
    if with_c {
        y.push_str(&format!(
            "  c: {{command: \"{}\", trust_annotations: true}}\n",
            fx.display()
        ));
    }
    y.push_str("profiles:\n  default: {allow_mutating_upstreams: true}\n");
    y
}

fn pid(shim: &mut Shim, tool: &str) -> u32 {
    shim.call(tool, json!({}))["result"]["structuredContent"]["pid"]
        .as_u64()
        .unwrap() as u32
}

#[test]
fn only_changed_upstreams_restart_and_sessions_hear_about_it() {
    let home = Home::with_config(&yaml("--name, one", false));
    let mut shim = home.shim(&[]);
    shim.initialize("2025-11-25");
    let (a1, b1) = (pid(&mut shim, "a.pid"), pid(&mut shim, "b.pid"));
    // A call in flight on `a` must finish before the old `a` stops.
    shim.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":\"slow\",\"method\":\"tools/call\",\"params\":{\"name\":\"a.sleep\",\"arguments\":{\"ms\":700}}}\n").unwrap();
    assert!(wait_until(Duration::from_secs(3), || upstream_status(
        &home, "a"
    )["active_call_count"]
        == 1));
    std::fs::write(home.config.as_ref().unwrap(), yaml("--name, two", true)).unwrap();
    let out = home.run(&["reload"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        text.trim(),
        "reloaded: added c; restarted a; removed -; unchanged b"
    );
    let mut answers = Vec::new();
    while answers.len() < 2 {
        answers.push(shim.recv().unwrap());
    }
    assert!(
        answers
            .iter()
            .any(|m| m["method"] == "notifications/tools/list_changed"),
        "{answers:?}"
    );
    assert!(
        answers
            .iter()
            .any(|m| m["id"] == "slow" && m["result"]["content"][0]["text"] == "slept"),
        "{answers:?}"
    );
    assert!(
        wait_until(Duration::from_secs(5), || !group_alive(a1)),
        "old a still running"
    );
    assert_eq!(
        pid(&mut shim, "b.pid"),
        b1,
        "unchanged upstream kept its process"
    );
    assert_ne!(pid(&mut shim, "a.pid"), a1);
    assert!(shim.call("c.echo", json!({"text": "new"}))["result"].is_object());
}

#[test]
fn an_invalid_new_config_is_refused_whole_and_the_old_one_keeps_serving() {
    let home = Home::with_config(&yaml("", false));
    let mut shim = home.shim(&[]);
    shim.initialize("2025-11-25");
    let a1 = pid(&mut shim, "a.pid");
    std::fs::write(
        home.config.as_ref().unwrap(),
        "schema_version: 1\nupstreams:\n  a: {comand: x}\n",
    )
    .unwrap();
    let out = home.run(&["reload"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("mcp-broker: reload refused: invalid config")
            && err.contains(":3:7: upstreams.a.comand: unknown field"),
        "{err}"
    );
    assert!(
        err.contains("hint: the daemon keeps serving the previous configuration"),
        "{err}"
    );
    assert_eq!(pid(&mut shim, "a.pid"), a1);
    // SIGHUP takes the same path.
    let daemon = home.daemon_pid().unwrap();
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(daemon as i32).unwrap(),
        rustix::process::Signal::HUP,
    )
    .unwrap();
    assert!(wait_until(Duration::from_secs(3), || home
        .log()
        .contains("SIGHUP: the new configuration is invalid")));
    assert_eq!(pid(&mut shim, "a.pid"), a1);
}

#[test]
fn broker_settings_read_at_start_are_named_when_a_reload_changes_them() {
    let home = Home::with_config(&yaml("--name, one", false));
    assert!(home.run(&["start"]).status.success());
    let changed = yaml("--name, one", false).replace(
        "schema_version: 1\n",
        "schema_version: 1\nbroker: {forward_meta_keys: [trace/id]}\n",
    );
    std::fs::write(home.config.as_ref().unwrap(), changed).unwrap();
    let out = home.run(&["reload"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(
            "broker.forward_meta_keys changed but take effect only when the daemon starts"
        ),
        "{err}"
    );
    assert!(err.contains("hint: `mcp-broker restart`"), "{err}");
}

#[test]
fn search_never_answers_from_an_index_of_an_older_configuration() {
    let home = Home::with_config(&yaml("--name, one", true));
    let servers = || -> Vec<String> {
        let out = home.run(&["tools", "--json", "search", "echo the text back"]);
        let data: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        data["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["server"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(servers().contains(&"c".to_string()));
    let vectors = home.root().join("state/catalog/vectors-potion-base-2M.bin");
    let with_c = std::fs::metadata(&vectors).unwrap().len();
    // Two reloads with no search between them: the first configuration's memory may be reused
    // for the third, which must not pass for the one the index was built from.
    for a_args in ["--name, one", "--name, two"] {
        std::fs::write(home.config.as_ref().unwrap(), yaml(a_args, false)).unwrap();
        assert!(home.run(&["reload"]).status.success());
    }
    let after = servers();
    assert!(!after.is_empty());
    assert!(
        !after.contains(&"c".to_string()),
        "a removed upstream is still found: {after:?}"
    );
    // Its tool vectors are gone from the cache too.
    let without_c = std::fs::metadata(&vectors).unwrap().len();
    assert!(without_c < with_c, "{with_c} -> {without_c} bytes");
}

/// A typo saved in the file cuts no client off: with the daemon running, new sessions reach
/// it; with it stopped, the next session starts it on the last valid copy, and `status`,
/// `doctor` and the session's client are told. With no valid copy ever, the file's error.
#[test]
fn a_typo_saved_in_the_file_cuts_no_client_off_running_or_stopped() {
    let home = Home::with_config(&yaml("--name, one", false));
    let mut first = home.shim(&[]);
    first.initialize("2025-11-25");
    assert!(pid(&mut first, "a.pid") > 0);
    let good = std::fs::read_to_string(home.config_path()).unwrap();
    std::fs::write(
        home.config_path(),
        good.replace(
            "trust_annotations: true}\n  b:",
            "trust_anotations: true}\n  b:",
        ),
    )
    .unwrap();
    // Running: a new session of any client reaches the daemon.
    let mut second = home.shim(&[]);
    let init = second.initialize("2025-11-25");
    assert!(init["result"]["serverInfo"].is_object(), "{init}");
    assert_eq!(
        second.call("b.echo", json!({"text": "up"}))["result"]["content"][0]["text"],
        "up"
    );
    drop((first, second));
    assert!(home.run(&["stop"]).status.success());

    // Stopped: the next session starts it on the last valid copy, and hears why.
    let mut third = home.shim(&[]);
    let init = third.initialize("2025-11-25");
    assert!(init["result"]["serverInfo"].is_object(), "{init}");
    let notice = third.recv().unwrap();
    assert_eq!(notice["method"], "notifications/message", "{notice}");
    let said = notice["params"]["data"].as_str().unwrap();
    assert!(
        said.contains("trust_anotations") && said.contains("last valid copy"),
        "{said}"
    );
    assert_eq!(
        third.call("a.echo", json!({"text": "on"}))["result"]["content"][0]["text"],
        "on"
    );
    let status = home.status();
    assert!(
        status["daemon"]["config_warning"]
            .as_str()
            .is_some_and(|w| w.contains("last valid copy")),
        "{status}"
    );
    let doctor = home.run(&["doctor"]);
    let doctor = String::from_utf8_lossy(&doctor.stdout);
    assert!(doctor.contains("last valid copy"), "{doctor}");
    // Fixed and reloaded: the warning is gone.
    std::fs::write(home.config_path(), &good).unwrap();
    assert!(home.run(&["reload"]).status.success());
    assert!(home.status()["daemon"]["config_warning"].is_null());
    drop(third);
    assert!(home.run(&["stop"]).status.success());

    // No valid copy ever: the file's error, with its place.
    let fresh = Home::with_config(&good.replace("trust_annotations", "trust_anotations"));
    let out = fresh.run(&["stdio"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("test.yaml:") && err.contains("trust_anotations"),
        "{err}"
    );
}

/// `config backup` keeps a copy; after a typo, `config rollback` checks the copy and puts it
/// back, keeping the broken file as a backup of its own; a broken backup is never put back.
#[test]
fn a_config_backup_is_put_back_over_a_typo_and_the_typo_is_kept() {
    let home = Home::new();
    let run = |args: &[&str]| home.run(args);
    assert!(run(&["config", "init"]).status.success());
    let file = home.root().join("broker.yaml");
    let good = std::fs::read_to_string(&file).unwrap();
    let taken = run(&["config", "backup"]);
    assert!(taken.status.success());
    let copy = std::path::PathBuf::from(String::from_utf8_lossy(&taken.stdout).trim());
    assert_eq!(std::fs::read_to_string(&copy).unwrap(), good);
    let broken = format!("{good}  broken: [\n");
    std::fs::write(&file, &broken).unwrap();
    let back = run(&["config", "rollback"]);
    assert!(
        back.status.success(),
        "{}",
        String::from_utf8_lossy(&back.stderr)
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), good);
    let said = String::from_utf8_lossy(&back.stderr).into_owned();
    let kept = said
        .split("kept as ")
        .nth(1)
        .and_then(|r| r.split(';').next())
        .unwrap_or_else(|| panic!("{said}"));
    assert_eq!(std::fs::read_to_string(kept).unwrap(), broken);
    let name = std::path::Path::new(kept)
        .file_name()
        .unwrap()
        .to_str()
        .unwrap();
    let refused = run(&["config", "rollback", "--backup", name]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr)
            .contains("is not a valid config; nothing was changed")
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), good);
}
