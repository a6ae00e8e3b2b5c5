//! Misbehaving and hostile upstreams and clients: nothing leaks (processes, capacity, memory),
//! nothing waits without a bound, and one bad upstream never stalls the others.

use std::io::Write;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::support::{
    Home, Shim, children_of, fixture, session, text, upstream_status, wait_until,
};

fn config(upstreams: &[(&str, &str, &str)], broker: &str) -> String {
    let fx = fixture();
    let mut y = format!(
        "schema_version: 1\nbroker: {{call_timeout_ms: 2000, startup_timeout_ms: 20000, shutdown_grace_ms: 1000{broker}}}\nupstreams:\n"
    );
    for (name, args, extra) in upstreams {
        y.push_str(&format!(
            "  {name}: {{command: \"{}\", args: [{args}], trust_annotations: true{extra}}}\n",
            fx.display()
        ));
    }
    y.push_str("profiles:\n  default: {allow_mutating_upstreams: true}\n  compact: {compact_tools_enabled: true, allow_mutating_upstreams: true}\n");
    y
}

#[test]
fn cancelled_per_call_calls_stop_their_process_and_give_back_its_capacity() {
    let home = Home::with_config(&config(
        &[("once", "", ", lifecycle: per_call, max_instances: 3")],
        "",
    ));
    let mut shim = session(&home);
    for id in 100..104u64 {
        shim.send_request(
            id,
            "tools/call",
            json!({"name": "once.sleep", "arguments": {"ms": 20000}}),
        );
        assert!(
            wait_until(Duration::from_secs(10), || !upstream_status(&home, "once")
                ["pids"]
                .as_array()
                .unwrap()
                .is_empty()),
            "the per-call process never showed up"
        );
        shim.cancel(id);
        assert!(
            wait_until(Duration::from_secs(10), || {
                upstream_status(&home, "once")["pids"]
                    .as_array()
                    .unwrap()
                    .is_empty()
            }),
            "the cancelled call's process still runs: {}",
            upstream_status(&home, "once")
        );
    }
    let r = shim.call("once.echo", json!({"text": "capacity is back"}));
    assert_eq!(text(&r), "capacity is back", "{r}");
    assert_eq!(upstream_status(&home, "once")["active_call_count"], 0);
}

#[test]
fn a_start_abandoned_by_its_caller_stops_the_half_started_process() {
    let home = Home::with_config(&config(
        &[(
            "slow",
            "\"--slow-start-ms\", \"3000\"",
            ", max_instances: 1",
        )],
        "",
    ));
    let mut shim = session(&home);
    let daemon = home.daemon_pid().unwrap();
    // A call starts what it needs itself (a listing's starts go on without it: the list is
    // announced when it comes).
    shim.send_request(
        7,
        "tools/call",
        json!({"name": "slow.echo", "arguments": {"text": "never"}}),
    );
    // The start is under way (its process exists, the handshake waits 3 s): cancel it now.
    assert!(wait_until(Duration::from_secs(5), || !children_of(daemon).is_empty()));
    shim.cancel(7);
    assert!(
        wait_until(Duration::from_secs(5), || children_of(daemon).is_empty()),
        "the half-started upstream was left running: {:?}",
        children_of(daemon)
    );
    assert_ne!(upstream_status(&home, "slow")["state"], "starting");
    // Its capacity came back: the next listing starts it and shows its tools.
    let names = shim.tool_names();
    assert!(names.contains(&"slow.echo".to_string()), "{names:?}");
}

#[test]
fn a_per_session_start_stops_when_its_client_goes_away() {
    let home = Home::with_config(&config(
        &[(
            "own",
            "\"--slow-start-ms\", \"3000\"",
            ", lifecycle: per_session",
        )],
        "",
    ));
    let mut shim = session(&home);
    let daemon = home.daemon_pid().unwrap();
    shim.send_request(3, "tools/list", json!({}));
    assert!(wait_until(Duration::from_secs(5), || !children_of(daemon).is_empty()));
    drop(shim);
    // The release waits for the start under way (3 s here, and a sandboxed start's set-up), then
    // the stop ladder (1 s grace): a loaded CI machine took more than 6 s once. A leak is forever.
    assert!(
        wait_until(Duration::from_secs(12), || children_of(daemon).is_empty()),
        "the upstream of a closed session was left running: {:?}",
        children_of(daemon)
    );
}

#[test]
fn a_stderr_line_over_64_kib_is_cut_and_the_upstream_lives_on() {
    let home = Home::with_config(&config(&[("fx", "", "")], ""));
    let mut shim = session(&home);
    assert_eq!(
        text(&shim.call("fx.bigstderr", json!({"kib": 200}))),
        "after bigstderr"
    );
    let pid = home.upstream_pid("fx").unwrap();
    assert_eq!(
        text(&shim.call("fx.bigstderr", json!({"kib": 100}))),
        "after bigstderr"
    );
    assert_eq!(text(&shim.call("fx.echo", json!({"text": "ok"}))), "ok");
    assert_eq!(home.upstream_pid("fx"), Some(pid), "the upstream restarted");
    assert!(
        wait_until(Duration::from_secs(2), || home
            .log()
            .contains("fixture: after the long stderr line")),
        "{}",
        home.log()
    );
    assert!(home.log().contains("cut"), "{}", home.log());
}

#[test]
fn calls_queued_behind_an_upstream_that_stopped_reading_time_out_and_it_is_restarted() {
    let home = Home::with_config(&config(&[("fx", "", "")], ", max_call_ms: 3000"));
    let mut shim = session(&home);
    assert_eq!(text(&shim.call("fx.stall", json!({}))), "stalled");
    let stalled = home.upstream_pid("fx").unwrap();
    let filler = "x".repeat(1024);
    let mut input = shim.take_stdin();
    let n = 3000u64;
    let writer = std::thread::spawn(move || {
        for id in 0..n {
            let msg = json!({"jsonrpc": "2.0", "id": 10_000 + id, "method": "tools/call",
                "params": {"name": "fx.echo", "arguments": {"text": filler}}});
            if input.write_all(format!("{msg}\n").as_bytes()).is_err() {
                break;
            }
        }
        input
    });
    let started = Instant::now();
    let mut answered = 0;
    while answered < n {
        let v = shim
            .recv()
            .unwrap_or_else(|| panic!("session ended after {answered} answers"));
        if v.get("id").is_some() {
            answered += 1;
        }
        assert!(
            started.elapsed() < Duration::from_secs(25),
            "only {answered} of {n} calls answered after 25 s"
        );
    }
    let _input = writer.join().unwrap();
    assert!(
        wait_until(Duration::from_secs(5), || home.upstream_pid("fx")
            != Some(stalled)),
        "the stalled upstream was never replaced: {}",
        upstream_status(&home, "fx")
    );
    assert!(home.log().contains("stopped reading its input"));
}

#[test]
fn a_slow_2026_upstream_is_never_sent_two_handshakes_and_its_tools_are_listed() {
    let home = Home::with_config(&config(
        &[("late", "\"--modern\", \"--slow-start-ms\", \"4000\"", "")],
        "",
    ));
    let mut shim = session(&home);
    let names = shim.tool_names();
    assert!(
        names.contains(&"late.echo".to_string()),
        "{names:?}\n{}",
        home.log()
    );
    let st = upstream_status(&home, "late");
    assert_eq!(st["state"], "running", "{st}");
    assert!(st["last_error"].is_null(), "{st}");
    assert_eq!(
        text(&shim.call("late.echo", json!({"text": "late but fine"}))),
        "late but fine"
    );
}

#[test]
fn a_failing_upstream_never_stalls_lists_or_searches_and_the_answer_says_so() {
    let home = Home::with_config(&config(
        &[
            ("good", "", ""),
            (
                "bad",
                "\"--slow-start-ms\", \"3000\", \"--exit-at-start\", \"1\"",
                "",
            ),
        ],
        "",
    ));
    // 'bad' takes 3 s to fail each time: an answer that waited on it is told apart from one
    // slowed by a busy machine without a tight bound.
    let stall = Duration::from_millis(2500);
    let mut first = session(&home);
    let names = first.tool_names();
    assert!(names.contains(&"good.echo".to_string()), "{names:?}");
    for _ in 0..3 {
        let mut shim = session(&home);
        let t = Instant::now();
        let names = shim.tool_names();
        assert!(
            t.elapsed() < stall,
            "a listing waited {:?} for the failing upstream",
            t.elapsed()
        );
        assert!(names.contains(&"good.echo".to_string()), "{names:?}");
        let warned = shim.notifications.iter().any(|n| {
            n["method"] == "notifications/message"
                && n["params"]["data"].as_str().unwrap_or("").contains("'bad'")
        });
        assert!(warned, "no notice about 'bad': {:?}", shim.notifications);
    }
    let mut compact = home.shim(&["--profile", "compact"]);
    compact.initialize("2025-11-25");
    let t = Instant::now();
    let r = compact.call("broker.search_tools", json!({"query": "echo text"}));
    assert!(t.elapsed() < stall, "a search waited {:?}", t.elapsed());
    let out = &r["result"]["structuredContent"];
    assert_eq!(out["results"][0]["name"], "good.echo", "{r}");
    assert_eq!(out["unavailable"][0]["server"], "bad", "{r}");
}

#[test]
fn sessions_over_max_clients_are_refused_after_a_bounded_wait_and_admin_commands_still_answer() {
    let home = Home::with_config(&config(&[("fx", "", "")], ", max_clients: 1"));
    let _first = session(&home);
    // More waiting sessions than the connection headroom (64): admin commands have their own.
    let waiting: Vec<Shim> = (0..70)
        .map(|_| {
            let mut s = home.shim(&[]);
            let _ = s.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n");
            s
        })
        .collect();
    // The queue is full once most of them wait for the slot (the rest are over the headroom).
    assert!(
        wait_until(Duration::from_secs(20), || {
            home.status()["daemon"]["waiting_sessions"]
                .as_u64()
                .is_some_and(|n| n >= 60)
        }),
        "the sessions never queued"
    );
    let t = Instant::now();
    let status = home.run(&["status", "--json"]);
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let v: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert!(v["daemon"]["pid"].is_u64(), "{v}");
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "status waited {:?} behind queued sessions",
        t.elapsed()
    );
    let t = Instant::now();
    let mut by_slot = 0;
    for shim in waiting {
        let (code, stderr) = shim.finish();
        assert_eq!(code, Some(1), "{stderr}");
        // Past the connection headroom a session is refused at once, else after the slot wait.
        assert!(
            stderr.contains("max_clients (1)") || stderr.contains("too many open connections"),
            "{stderr}"
        );
        by_slot += usize::from(stderr.contains("max_clients (1)"));
    }
    assert!(by_slot >= 60, "{by_slot} refused after the slot wait");
    assert!(t.elapsed() < Duration::from_secs(15));
}

#[test]
fn the_hard_limit_error_names_max_call_ms_and_progress_is_rate_limited() {
    let home = Home::with_config(&config(
        &[("fx", "", ", call_timeout_ms: 1000, max_call_ms: 2500")],
        "",
    ));
    let mut shim = session(&home);
    let r = shim.request(
        "tools/call",
        json!({"name": "fx.progress", "arguments": {"count": 100, "interval_ms": 100},
            "_meta": {"progressToken": "slow"}}),
    );
    let msg = r["error"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("max_call_ms (2500 ms)"), "{r}");
    let r = shim.request(
        "tools/call",
        json!({"name": "fx.progress", "arguments": {"count": 500, "interval_ms": 1},
            "_meta": {"progressToken": "p"}}),
    );
    assert_eq!(text(&r), "500 steps", "{r}");
    let forwarded = shim
        .notifications
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .count();
    assert!(
        (1..=60).contains(&forwarded),
        "{forwarded} progress notifications forwarded for 500 sent within about a second"
    );
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_client_that_does_not_read_cannot_pin_the_daemons_memory() {
    big_answers_to_a_client_that_does_not_read(1024, 600);
    big_answers_to_a_client_that_does_not_read(8 * 1024, 100);
}

fn big_answers_to_a_client_that_does_not_read(kib: u64, n: u64) {
    let home = Home::with_config(&config(
        &[("fx", "", ", call_timeout_ms: 60000")],
        ", max_outbound_bytes: 4194304, client_write_timeout_ms: 60000",
    ));
    let mut shim = session(&home);
    let daemon = home.daemon_pid().unwrap();
    let before = rss_kib(daemon);
    let mut input = shim.take_stdin();
    let writer = std::thread::spawn(move || {
        for id in 0..n {
            let msg = json!({"jsonrpc": "2.0", "id": 1000 + id, "method": "tools/call",
                "params": {"name": "fx.big", "arguments": {"kib": kib}}});
            if input.write_all(format!("{msg}\n").as_bytes()).is_err() {
                break;
            }
        }
        input
    });
    // The check means something only once the daemon has had far more answers in hand than
    // its 4 MiB queue holds (32 MiB), while the client still reads nothing.
    let answered_upstream = || {
        home.status()["calls"]["upstreams"]["fx"]["calls"]
            .as_u64()
            .unwrap_or(0)
    };
    let enough = (32 * 1024 / kib).max(2);
    assert!(
        super::support::wait_until(Duration::from_secs(60), || answered_upstream() >= enough),
        "the upstream answered only {} calls; {enough} make the check mean something",
        answered_upstream()
    );
    let held = rss_kib(daemon).saturating_sub(before);
    // The queue's 4 MiB, answers being built, and allocator slack; answers waiting for room
    // wait on disk.
    assert!(
        held < 64 * 1024,
        "the daemon holds {} MiB for a client that reads nothing ({kib} KiB answers)",
        held / 1024
    );
    eprintln!(
        "{kib} KiB answers x {n}: the daemon holds {} MiB more",
        held / 1024
    );
    let mut answered = 0;
    while answered < n {
        let v = shim.recv().expect("the session ended");
        if v.get("id").is_some() {
            assert_eq!(text(&v).len() as u64, kib * 1024, "{}", v["error"]);
            answered += 1;
        }
    }
    let _input = writer.join().unwrap();
}

#[test]
fn the_daemon_log_is_rotated_at_its_size_cap() {
    let home = Home::with_config(&config(&[("fx", "", "")], ", log_max_bytes: 65536"));
    let mut shim = session(&home);
    // stderr reaches the log at most 50 lines a second: spread the writes out.
    for _ in 0..200 {
        shim.call("fx.bigstderr", json!({"kib": 2}));
        std::thread::sleep(Duration::from_millis(25));
    }
    let log = home.root().join("logs/daemon.log");
    let first = home.root().join("logs/daemon.log.1");
    assert!(
        wait_until(Duration::from_secs(10), || first.exists()),
        "no rotation; daemon.log is {} bytes",
        std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0)
    );
    assert_eq!(text(&shim.call("fx.echo", json!({"text": "on"}))), "on");
    assert!(wait_until(Duration::from_secs(5), || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("log rotated"))
    }));
    // Checked every second: the live file stays within a few caps, and three old files at most.
    assert!(std::fs::metadata(&log).unwrap().len() < 4 * 65536);
    assert!(!home.root().join("logs/daemon.log.4").exists());
}

#[test]
fn an_upstream_silent_on_a_changed_list_does_not_hold_listings_up() {
    let home = Home::with_config(&config(&[("fx", "\"--hang-relist\"", "")], ""));
    let mut shim = session(&home);
    assert!(shim.tool_names().contains(&"fx.echo".to_string()));
    for _ in 0..3 {
        shim.call("fx.list_changed", json!({}));
        let t = Instant::now();
        let names = shim.tool_names();
        assert!(
            t.elapsed() < Duration::from_millis(2500),
            "a listing waited {:?} for a refresh that never comes",
            t.elapsed()
        );
        assert!(names.contains(&"fx.echo".to_string()), "{names:?}");
    }
}

#[test]
fn a_2026_only_server_slow_once_is_probed_again_and_comes_up() {
    let home = Home::new();
    let marker = home.root().join("started-once");
    let home = Home::with_config(&config(
        &[(
            "late",
            &format!(
                "\"--modern\", \"--modern-only\", \"--slow-start-ms\", \"4000\", \"--slow-once\", \"{}\"",
                marker.display()
            ),
            "",
        )],
        "",
    ));
    let mut shim = session(&home);
    let first = shim.tool_names();
    assert!(first.is_empty(), "{first:?}");
    assert!(
        wait_until(Duration::from_secs(20), || shim
            .tool_names()
            .contains(&"late.echo".to_string())),
        "{}",
        upstream_status(&home, "late")
    );
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, r)| !r.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

#[test]
fn a_grandchild_that_leaves_its_group_with_setsid_stops_with_the_daemon() {
    // The unsandboxed path (the ledger's sweep); in the sandbox the PID namespace ends every
    // process with the server, which suite/sandbox.rs shows.
    let home = Home::with_config(&config(&[("fx", "", ", sandbox: off")], ""));
    let mut shim = session(&home);
    let pid: u32 = text(&shim.call("fx.escape", json!({})))
        .parse()
        .expect("the fixture names its grandchild");
    assert!(alive(pid), "the escaped grandchild should run");
    let daemon = home.daemon_pid().unwrap();
    drop(shim);
    assert!(home.run(&["stop"]).status.success());
    let gone = wait_until(Duration::from_secs(5), || !alive(pid));
    if !gone {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
    assert!(gone, "pid {pid} outlived daemon {daemon}");
}

#[test]
fn a_large_tool_list_never_stalls_another_clients_calls() {
    let home = Home::with_config(&config(
        &[("fx", "", ""), ("huge", "\"--tools\", \"14000\"", "")],
        // The listing waits for the whole list, however long it takes to make.
        ", max_tools_per_list: 20000, first_list_wait_ms: 60000",
    ));
    let mut caller = session(&home);
    assert_eq!(
        text(&caller.call("fx.echo", json!({"text": "warm"}))),
        "warm"
    );
    let mut lister = session(&home);
    lister.send_request(5, "tools/list", json!({}));
    let started = Instant::now();
    let mut worst = Duration::ZERO;
    let mut calls = 0;
    while started.elapsed() < Duration::from_secs(3) {
        let t = Instant::now();
        assert_eq!(text(&caller.call("fx.echo", json!({"text": "x"}))), "x");
        worst = worst.max(t.elapsed());
        calls += 1;
    }
    assert!(
        worst < Duration::from_millis(1500),
        "a call to another upstream waited {worst:?} while a 14,000-tool list was catalogued ({calls} calls)"
    );
    let listed = lister.recv().unwrap();
    let count = listed["result"]["tools"].as_array().map_or(0, Vec::len);
    assert!(count > 14_000, "{}", listed["error"]);
}
