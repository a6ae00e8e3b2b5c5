//! Daemon life: start races, stale sockets, permissions, status, stop and signals.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use serde_json::json;

use super::support::{Home, Shim, group_alive, wait_timeout, wait_until};

#[test]
fn racing_shims_start_exactly_one_daemon() {
    let home = Home::new();
    let mut shims: Vec<Shim> = (0..4).map(|_| home.shim(&[])).collect();
    for s in &mut shims {
        s.initialize("2025-11-25");
        assert_eq!(
            s.call("example.echo", json!({"message": "hi"}))["result"]["content"][0]["text"],
            "hi"
        );
    }
    assert_eq!(
        home.log().matches("daemon listening").count(),
        1,
        "{}",
        home.log()
    );
    assert_eq!(home.status()["daemon"]["sessions"], 4);
}

#[test]
fn runtime_dirs_and_socket_are_private() {
    let home = Home::new();
    assert!(home.run(&["start"]).status.success());
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&home.root().join("sockets")), 0o700);
    assert_eq!(mode(&home.root().join("secrets")), 0o700);
    assert_eq!(mode(&home.socket()), 0o600);
}

#[test]
fn status_never_starts_an_upstream() {
    let home = Home::new();
    assert!(home.run(&["start"]).status.success());
    let s = home.status();
    assert_eq!(s["upstreams"][0]["name"], "example");
    assert_eq!(s["upstreams"][0]["state"], "stopped");
    assert!(s["upstreams"][0]["pid"].is_null());
    assert_eq!(s["upstreams"][0]["stopped_because"], "starts on first use");
    let text = String::from_utf8(home.run(&["status"]).stdout).unwrap();
    assert!(
        text.contains("example") && text.contains("not started (on use)"),
        "{text}"
    );
    assert_eq!(home.status()["upstreams"][0]["state"], "stopped");
}

#[test]
fn status_without_a_daemon_says_so() {
    let home = Home::new();
    let out = home.run(&["status"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("daemon: not running"));
    assert!(!home.socket().exists(), "status must not start a daemon");
}

#[test]
fn stop_leaves_no_upstream_process_behind() {
    let home = Home::new();
    let mut shim = home.shim(&[]);
    shim.initialize("2025-11-25");
    shim.call("example.echo", json!({"message": "x"}));
    let pid = home.upstream_pid("example").unwrap();
    assert!(group_alive(pid));
    let out = home.run(&["stop"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !group_alive(pid),
        "upstream process group {pid} survived stop"
    );
    assert!(!home.socket().exists());
    // The session was told: the shim ends with a message instead of hanging.
    let (code, stderr) = shim.finish();
    assert_eq!(code, Some(1));
    assert!(
        stderr.starts_with("mcp-broker: session ended: the daemon is shutting down"),
        "{stderr}"
    );
}

#[test]
fn a_stale_socket_of_a_killed_daemon_is_replaced() {
    let home = Home::new();
    assert!(home.run(&["start"]).status.success());
    let pid = home.daemon_pid().unwrap();
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    assert!(wait_until(
        Duration::from_secs(5),
        || !std::path::Path::new(&format!("/proc/{pid}")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| s.contains(") Z"))
                .unwrap_or(true)
    ));
    assert!(home.socket().exists(), "the killed daemon left its socket");
    let mut shim = home.shim(&[]);
    shim.initialize("2025-11-25");
    assert_eq!(
        shim.call("example.echo", json!({"message": "back"}))["result"]["content"][0]["text"],
        "back"
    );
    assert_ne!(home.daemon_pid(), Some(pid));
}

#[test]
fn sigterm_drains_then_exits_zero_and_cleans_up() {
    let home = Home::new();
    let mut daemon = home
        .cmd(&["daemon"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    assert!(wait_until(Duration::from_secs(10), || home
        .socket()
        .exists()));
    let mut shim = home.shim(&[]);
    shim.initialize("2025-11-25");
    shim.call("example.echo", json!({"message": "x"}));
    let up = home.upstream_pid("example").unwrap();
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(daemon.id() as i32).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let status =
        wait_timeout(&mut daemon, Duration::from_secs(20)).expect("daemon did not exit on SIGTERM");
    assert_eq!(status.code(), Some(0));
    assert!(!home.socket().exists());
    assert!(!group_alive(up));
}

#[test]
fn the_shim_works_with_home_alone_in_its_environment() {
    let home = Home::new();
    let mut cmd = std::process::Command::new(super::support::bin());
    cmd.env_clear()
        .env("HOME", home.root())
        .env("MCP_BROKER_HOME", home.root())
        .envs(mcpb_sandbox::coverage::profile_env())
        .arg("stdio");
    let mut shim = Shim::spawn(cmd);
    shim.initialize("2025-11-25");
    assert_eq!(
        shim.call("example.add", json!({"a": 1, "b": 1}))["result"]["content"][0]["text"],
        "2"
    );
}

#[test]
fn the_demo_runs_end_to_end() {
    let home = Home::new();
    let out = home.run(&["demo"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("example.echo answered \"hello through the broker\""),
        "{text}"
    );
    assert!(
        text.contains("broker.search_tools(\"add two numbers\") -> example.add; broker.call_tool(example.add, 1, 1) = 2"),
        "{text}"
    );
    assert!(
        text.contains(
            "run_code (python, sandboxed): ok {\"total\":42,\"echo\":\"from a sandbox\"}"
        ),
        "{text}"
    );
    assert!(
        text.contains("run_code (javascript, sandboxed): ok {\"x\":3,\"y\":7}"),
        "{text}"
    );
    assert!(text.contains("socket removed: true"), "{text}");
}

#[test]
fn connections_over_max_clients_wait_for_a_free_slot() {
    let home = Home::with_config(
        "schema_version: 1\nbroker: {max_clients: 1}\nupstreams:\n  example: {command: \"{broker.exe}\", args: [example-server], trust_annotations: true}\nprofiles:\n  default: {}\n",
    );
    let mut first = home.shim(&[]);
    first.initialize("2025-11-25");
    let mut second = home.shim(&[]);
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    second.send_raw(format!("{init}\n").as_bytes()).unwrap();
    // Proves the second session reached the daemon and is held, not merely slow to arrive.
    assert!(
        super::support::wait_until(Duration::from_secs(10), || {
            home.status()["daemon"]["waiting_sessions"] == 1
        }),
        "the second session never reached the wait: {}",
        home.status()
    );
    assert_eq!(
        home.status()["daemon"]["sessions"],
        1,
        "the second session must wait"
    );
    let (code, _) = first.finish();
    assert_eq!(code, Some(0));
    let r = second.recv().expect("served once the first session ended");
    assert_eq!(r["result"]["protocolVersion"], "2025-11-25");
}

#[test]
fn a_shim_whose_daemon_dies_says_so_and_exits_non_zero() {
    let home = Home::new();
    let mut shim = home.shim(&[]);
    shim.initialize("2025-11-25");
    shim.call("example.echo", json!({"message": "x"}));
    let daemon = home.daemon_pid().unwrap();
    let upstream = home.upstream_pid("example").unwrap();
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(daemon as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let status =
        wait_timeout(&mut shim.child, Duration::from_secs(5)).expect("the shim must not hang");
    assert_eq!(status.code(), Some(1));
    let (_, stderr) = shim.finish();
    assert!(
        stderr.starts_with("mcp-broker: the daemon closed the session unexpectedly\nhint: "),
        "{stderr}"
    );
    // PR_SET_PDEATHSIG takes the upstream down with the daemon.
    assert!(wait_until(Duration::from_secs(5), || !group_alive(
        upstream
    )));
}
