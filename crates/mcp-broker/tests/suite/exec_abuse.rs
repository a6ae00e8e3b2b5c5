//! The code sandbox against programs that go for the daemon and the machine rather than out of
//! the jail: memory the rlimits do not see, channels flooded or never read, answers the SDK
//! cannot parse.

use std::time::Duration;

use serde_json::Value;

use super::exec_escape::Jail;

fn daemon_status_kib(jail: &Jail, key: &str) -> u64 {
    let pid = jail.home.daemon_pid().unwrap();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap()
}

fn daemon_rss_kib(jail: &Jail) -> u64 {
    daemon_status_kib(jail, "VmRSS:")
}

/// A 14 MiB result of `[0,0,...]` was a tree of seven million values, cloned and written out
/// again: a gigabyte in the daemon. Now it costs about its bytes, and the answer is cut.
#[test]
fn a_huge_result_frame_costs_the_daemon_about_its_size() {
    let jail = Jail::new();
    jail.still_works();
    let code = r#"
import os
frame = b'{"id":1,"method":"result","params":{"value":[' + b"0," * (7 << 20) + b'0]}}\n'
print(len(frame) >> 20, flush=True)
v = memoryview(frame)
while v:
    v = v[os.write(3, v):]
os.read(3, 100)
"#;
    let a = jail.run(code, &[]);
    assert_eq!(a["status"], "limit", "{a}");
    assert_eq!(a["stdout"], "14\n", "{a}");
    assert!(
        a["result"]
            .as_str()
            .unwrap()
            .ends_with("[... result cut: over max_output_kb]")
    );
    let peak = daemon_status_kib(&jail, "VmHWM:");
    assert!(peak < 300 * 1024, "daemon peak RSS {peak} KiB");
    jail.still_works();
}

#[test]
fn memory_outside_the_address_space_is_bounded_too() {
    let jail = Jail::new();
    let sysv = r#"
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
rc = libc.shmget(0, 32 << 20, 0o1600)
print("shmget", rc, ctypes.get_errno())
rc = libc.msgget(0, 0o1600)
print("msgget", rc, ctypes.get_errno())
"#;
    let a = jail.run(sysv, &[]);
    assert_eq!(a["status"], "ok", "{a}");
    let out = a["stdout"].as_str().unwrap();
    assert!(
        out.contains("shmget -1 1") && out.contains("msgget -1 1"),
        "{out}"
    );
    if !mcpb_sandbox::memory_cgroup_available() {
        eprintln!("no memory cgroup on this machine: the memfd case is not contained here");
        return;
    }
    let memfd = r#"
import os
fds = []
for i in range(60):
    fd = os.memfd_create("m")
    os.write(fd, b"\1" * (15 << 20))
    fds.append(fd)
print("ALLOCATED")
"#;
    let a = jail.run(memfd, &["--limits", r#"{"memory_mb": 128}"#]);
    assert_eq!(a["status"], "limit", "{a}");
    assert!(a["reason"].as_str().unwrap().contains("memory"), "{a}");
    assert!(!a["stdout"].as_str().unwrap().contains("ALLOCATED"), "{a}");
    jail.still_works();
}

#[test]
fn a_program_that_never_reads_its_answers_cannot_grow_the_daemon() {
    let jail = Jail::new();
    jail.still_works();
    let before = daemon_rss_kib(&jail);
    // Large frames whose answers echo part of them, and never a read.
    let code = r#"
import os
frame = ('{"id":1,"method":"%s","params":{}}\n' % ("\x7f" * (8 << 20))).encode()
while True:
    v = memoryview(frame)
    while v:
        v = v[os.write(3, v):]
"#;
    let a = jail.run(code, &["--limits", r#"{"wall_clock_ms": 4000}"#]);
    assert_eq!(a["status"], "timeout", "{a}");
    let after = daemon_rss_kib(&jail);
    assert!(
        after < before + 64 * 1024,
        "daemon RSS {before} -> {after} KiB"
    );
    jail.still_works();
}

#[test]
fn a_flood_of_refused_requests_stops_the_run_and_keeps_its_answer_small() {
    let jail = Jail::new();
    let code = r#"
import os, threading
threading.Thread(target=lambda: [0 for _ in iter(lambda: os.read(3, 1 << 20), b"")], daemon=True).start()
f = ('{"id":1,"method":"call_tool","params":{"name":"example.echo%s","arguments":{}}}\n' % ("Z" * 190)).encode() * 1000
for i in range(100):
    v = memoryview(f)
    while v:
        v = v[os.write(3, v):]
print("SENT")
"#;
    let a = jail.run(code, &["--limits", r#"{"max_output_kb": 4}"#]);
    assert_eq!(a["status"], "violation", "{}", a["reason"]);
    assert!(
        a["reason"].as_str().unwrap().contains("had to refuse"),
        "{}",
        a["reason"]
    );
    assert!(
        a["calls"].as_array().unwrap().len() <= 200,
        "{}",
        a["calls"].as_array().unwrap().len()
    );
    assert!(a.to_string().len() < 64 * 1024, "{}", a.to_string().len());
    jail.still_works();
}

#[test]
fn an_answer_the_sdk_cannot_tie_to_a_request_fails_it_instead_of_hanging() {
    let jail = Jail::new();
    let start = std::time::Instant::now();
    let py = "from mcp_sdk import result, ToolError\nx = []\nfor _ in range(300):\n    x = [x]\ntry:\n    result(x)\nexcept ToolError as e:\n    print('refused', e.kind)\n";
    let a = jail.run(py, &[]);
    assert_eq!(a["status"], "ok", "{a}");
    assert!(
        a["stdout"].as_str().unwrap().contains("refused protocol"),
        "{a}"
    );
    let js = "let o = []; for (let i = 0; i < 300; i++) o = [o];\ntry { await result(o); } catch (e) { console.log('refused', e.kind); }";
    let a = jail.run(js, &[]);
    assert_eq!(a["status"], "ok", "{a}");
    assert!(
        a["stdout"].as_str().unwrap().contains("refused protocol"),
        "{a}"
    );
    assert!(start.elapsed() < Duration::from_secs(20));
}

fn exec_cmd(jail: &Jail, args: &[&str]) -> (bool, Value, String) {
    let mut all = vec!["exec", "--json", "--profile", "code"];
    all.extend_from_slice(args);
    let out = jail.home.cmd(&all).output().unwrap();
    let value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (
        out.status.success(),
        value,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Sixteen persisted workspaces used to fill the profile's slots for good: every later
/// `run_code` and `exec_open` failed, also after a restart, and the hint could not work.
#[test]
fn persisted_workspaces_never_stop_code_runs_and_can_be_removed() {
    let jail = Jail::new();
    let mut kept = Vec::new();
    for _ in 0..16 {
        let (ok, v, err) = exec_cmd(&jail, &["open", "--persist"]);
        assert!(ok, "{v} {err}");
        let id = v["exec_id"].as_str().unwrap().to_string();
        let (ok, v, err) = exec_cmd(&jail, &["close", &id]);
        assert!(ok && v["removed"] == false, "{v} {err}");
        kept.push(id);
    }
    jail.still_works();
    let (ok, v, err) = exec_cmd(&jail, &["open"]);
    assert!(ok, "an ordinary workspace still opens: {v} {err}");
    let (ok, _, err) = exec_cmd(&jail, &["open", "--persist"]);
    assert!(!ok, "the persisted cap holds");
    assert!(
        err.contains("discard: true") && err.contains("exec prune"),
        "{err}"
    );
    let (ok, v, err) = exec_cmd(&jail, &["close", &kept[0], "--discard"]);
    assert!(ok && v["removed"] == true, "{v} {err}");
    let (ok, v, err) = exec_cmd(&jail, &["open", "--persist"]);
    assert!(ok, "a slot is free again: {v} {err}");
    let (ok, listed, _) = exec_cmd(&jail, &["list"]);
    assert!(ok);
    let persisted = listed
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["persisted"] == true)
        .count();
    assert_eq!(persisted, 16, "{listed}");
    let out = jail.home.cmd(&["exec", "prune", "--all"]).output().unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "17");
    jail.still_works();
}

/// Twelve uploads of 8 MiB put 97 MiB into a 64 MiB workspace: now an upload that would go
/// past the workspace's disk quota is refused before anything is written.
#[test]
fn uploads_past_the_workspace_quota_are_refused() {
    let jail = Jail::new();
    let (ok, v, _) = exec_cmd(&jail, &["open"]);
    assert!(ok);
    let id = v["exec_id"].as_str().unwrap().to_string();
    let big = jail.home.root().join("big.bin");
    std::fs::write(&big, "x".repeat(8 << 20)).unwrap();
    let big = big.to_str().unwrap();
    let mut refused = None;
    for i in 0..12 {
        let name = format!("f{i}");
        let (ok, v, err) = exec_cmd(&jail, &["upload", &id, big, "--as", &name]);
        if !ok {
            refused = Some((i, err));
            break;
        }
        assert_eq!(v["bytes"], 8 << 20);
    }
    let (i, err) = refused.expect("an upload past the quota is refused");
    assert_eq!(i, 8, "eight 8 MiB files fit 64 MiB");
    assert!(err.contains("disk quota"), "{err}");
    let (ok, v, _) = exec_cmd(&jail, &["list"]);
    assert!(ok);
    let bytes = v[0]["bytes"].as_u64().unwrap();
    assert!(bytes <= 64 << 20, "{v}");
}

fn cgroup_names(base: &std::path::Path, prefix: &str) -> std::collections::BTreeSet<String> {
    std::fs::read_dir(base)
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(String::from))
        .filter(|n| n.starts_with(prefix))
        .collect()
}

/// The helper made a run's cgroup and was SIGKILLed at the deadline, so five timeouts left
/// five cgroups, and a later helper given a leaked pid ran without one. The daemon now owns
/// each run's cgroup, named after itself and the run, removes it however the run ended, and
/// sweeps those of a dead daemon at start.
#[test]
fn timed_out_runs_leave_no_cgroup_and_a_dead_daemons_are_swept() {
    if !mcpb_sandbox::memory_cgroup_available() {
        eprintln!("no memory cgroup on this machine: nothing to leave behind");
        return;
    }
    let base = mcpb_sandbox::CgroupBase::find().unwrap();
    let base = base.dir();
    let jail = Jail::new();
    jail.still_works();
    let pid = jail.home.daemon_pid().unwrap();
    let old_scheme = cgroup_names(base, "mcpb-run-");
    for _ in 0..5 {
        let a = jail.run(
            "while True:\n    pass\n",
            &["--limits", r#"{"wall_clock_ms": 300}"#],
        );
        assert_eq!(a["status"], "timeout", "{a}");
    }
    // What may stay: the jails started for the next runs (broker.exec.pool, 2), each still
    // holding its processes; none of a run that ended.
    let mine = format!("mcpb-{pid}-");
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    loop {
        let left = cgroup_names(base, &mine);
        let leaked: Vec<_> = cgroup_names(base, "mcpb-run-")
            .difference(&old_scheme)
            .cloned()
            .collect();
        let ready = |n: &String| {
            std::fs::read_to_string(base.join(n).join("cgroup.procs"))
                .is_ok_and(|p| !p.trim().is_empty())
        };
        if left.len() <= 2 && left.iter().all(ready) && leaked.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "left behind: {left:?} {leaked:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // A stopping daemon ends the jails it started ahead and removes their cgroups.
    jail.home.run(&["stop"]);
    assert!(
        cgroup_names(base, &mine).is_empty(),
        "after stop: {:?}",
        cgroup_names(base, &mine)
    );
    // A cgroup of a daemon that no longer runs goes when a daemon starts.
    let planted = base.join("mcpb-4000000001-planted");
    std::fs::create_dir(&planted).unwrap();
    jail.still_works();
    assert!(
        !planted.exists(),
        "a dead daemon's cgroup is swept at start"
    );
}

/// A root daemon ran every run as host uid 65534, so concurrent runs shared one user's
/// processes, signals and per-user limits. Each run now has a user of its own, named in its
/// usage, and its workspace is that user's for the run.
#[test]
fn concurrent_runs_of_a_root_daemon_each_have_their_own_user() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("the daemon is not root here: runs use the daemon's own user");
        return;
    }
    let jail = Jail::new();
    jail.still_works();
    let snippet = jail.home.root().join("slow.py");
    std::fs::write(
        &snippet,
        "import os, time\ntime.sleep(1.0)\nprint(os.getuid(), sorted(os.listdir('/work')))\n",
    )
    .unwrap();
    let runs: Vec<_> = (0..3)
        .map(|_| {
            jail.home
                .cmd(&[
                    "exec",
                    "--profile",
                    "code",
                    "--json",
                    "run",
                    snippet.to_str().unwrap(),
                    "--allow",
                    "example.*",
                ])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let answers: Vec<Value> = runs
        .into_iter()
        .map(|r| serde_json::from_slice(&r.wait_with_output().unwrap().stdout).unwrap())
        .collect();
    let mut uids: Vec<u64> = answers
        .iter()
        .map(|a| {
            assert_eq!(a["status"], "ok", "{a}");
            assert!(a["stdout"].as_str().unwrap().starts_with("65534"), "{a}");
            a["usage"]["uid"].as_u64().unwrap_or_else(|| panic!("{a}"))
        })
        .collect();
    assert!(uids.iter().all(|u| *u >= 2_000_000_000), "{uids:?}");
    uids.sort_unstable();
    uids.dedup();
    assert_eq!(uids.len(), 3, "each concurrent run its own user");
    // A persisted workspace carries files from one run's user to the next.
    let (ok, v, _) = exec_cmd(&jail, &["open"]);
    assert!(ok);
    let id = v["exec_id"].as_str().unwrap().to_string();
    let write = jail.home.root().join("write.py");
    std::fs::write(&write, "open('/work/kept.txt', 'w').write('kept')\n").unwrap();
    let read = jail.home.root().join("read.py");
    std::fs::write(&read, "print(open('/work/kept.txt').read())\n").unwrap();
    for (file, want) in [(&write, ""), (&read, "kept\n")] {
        let out = jail
            .home
            .cmd(&[
                "exec",
                "--profile",
                "code",
                "--json",
                "run",
                file.to_str().unwrap(),
                "--exec-id",
                &id,
                "--allow",
                "example.*",
            ])
            .output()
            .unwrap();
        let a: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(a["status"], "ok", "{a}");
        assert_eq!(a["stdout"], want, "{a}");
    }
}

/// A frame whose params were one huge string of U+0085 got an answer quoting it, escaped to
/// 3.5 times its size: 55 MB per frame, past every budget. Errors now never echo a frame.
#[test]
fn a_bad_frame_is_answered_without_echoing_it() {
    let jail = Jail::new();
    jail.still_works();
    let before = daemon_status_kib(&jail, "VmRSS:");
    let code = r#"
import os, socket
s = socket.socket(fileno=3)
s.sendall(('{"id":1,"method":"call_tool","params":"' + "\u0085" * (7 << 20) + '"}\n').encode())
answer = b""
while not answer.endswith(b"\n"):
    answer += s.recv(1 << 16)
print(len(answer), answer[:120].decode())
"#;
    let a = jail.run(code, &[]);
    assert_eq!(a["status"], "ok", "{a}");
    let out = a["stdout"].as_str().unwrap();
    let len: usize = out.split_whitespace().next().unwrap().parse().unwrap();
    assert!(len < 1024, "{out}");
    assert!(out.contains("not the shape"), "{out}");
    let peak = daemon_status_kib(&jail, "VmHWM:");
    assert!(
        peak < before + 100 * 1024,
        "daemon RSS {before} KiB, peak {peak} KiB"
    );
    jail.still_works();
}

/// `broker.exec.workspace_root` moves the workspaces, kept private; a relative one is a config
/// error.
#[test]
fn workspaces_live_under_the_configured_root_and_stay_private() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().join("ws");
    let yaml = format!(
        "schema_version: 1\nbroker: {{exec: {{workspace_root: {:?}}}}}\nupstreams:\n  example: {{command: \"{{broker.exe}}\", args: [example-server], trust_annotations: true}}\nprofiles:\n  code: {{compact_tools_enabled: true, exec: {{languages: [python]}}}}\n",
        root.display().to_string()
    );
    let home = super::support::Home::with_config(&yaml);
    let out = home
        .cmd(&["exec", "--json", "--profile", "code", "open", "--persist"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = v["exec_id"].as_str().unwrap();
    let profile_dir = std::fs::read_dir(&root)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert!(profile_dir.join(id).is_dir(), "{}", profile_dir.display());
    for dir in [&root, &profile_dir] {
        let mode = std::fs::metadata(dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", dir.display());
    }
    assert!(
        !home
            .root()
            .join("state/exec")
            .join(profile_dir.file_name().unwrap())
            .exists(),
        "nothing under the default root"
    );
    let listed = home.run(&["exec", "--json", "list"]);
    assert!(String::from_utf8_lossy(&listed.stdout).contains(id));
    let _ = home.run(&["stop"]);

    let bad = super::support::Home::with_config(
        "schema_version: 1\nbroker: {exec: {workspace_root: relative/ws}}\n",
    );
    let out = bad.run(&["config", "validate"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("broker.exec.workspace_root"),
        "{err}"
    );
}
