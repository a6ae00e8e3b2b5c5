//! The code sandbox against programs that go for the daemon and the machine rather than out of
//! the jail: memory the rlimits do not see, channels flooded or never read, answers the SDK
//! cannot parse.

use std::time::Duration;

use super::exec_escape::Jail;

fn daemon_rss_kib(jail: &Jail) -> u64 {
    let pid = jail.home.daemon_pid().unwrap();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap()
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
