//! The code sandbox under attack: each case is a real program run through `mcp-broker exec run`
//! (the run_code tool of an ordinary session) that tries to get out, and the test checks that it
//! was denied or capped, reported precisely, and that nothing of it is left afterwards. Every
//! network attempt targets a listener the test opened itself on 127.0.0.1.

use std::io::Read;
use std::net::{TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::support::Home;

const CONFIG: &str = r#"
schema_version: 1
broker:
  env_passthrough: [MCPB_TEST_SECRET]
upstreams:
  example:
    command: "{broker.exe}"
    args: [example-server]
    trust_annotations: true
profiles:
  code:
    compact_tools_enabled: true
    # Whole answers: these tests look at what max_output_kb and the jail leave of them.
    result_budget_chars: 1000000
    exec: {languages: [python, javascript]}
  rw:
    compact_tools_enabled: true
    allow_mutating_upstreams: true
    exec: {languages: [python]}
"#;

pub(super) struct Jail {
    pub(super) home: Home,
    n: std::cell::Cell<u32>,
}

impl Jail {
    pub(super) fn new() -> Self {
        Self::with_config(CONFIG)
    }

    /// A jail of another config, whose profile `code` runs code.
    pub(super) fn with_config(yaml: &str) -> Self {
        Self {
            home: Home::with_config(yaml),
            n: std::cell::Cell::new(0),
        }
    }

    pub(super) fn file(&self, code: &str) -> PathBuf {
        self.n.set(self.n.get() + 1);
        let p = self
            .home
            .root()
            .join(format!("snippet-{}.py", self.n.get()));
        std::fs::write(&p, code).unwrap();
        p
    }

    /// Runs `code` in profile `code` with `extra` flags; the structured answer.
    pub(super) fn run(&self, code: &str, extra: &[&str]) -> Value {
        self.run_in("code", code, extra)
    }

    pub(super) fn run_in(&self, profile: &str, code: &str, extra: &[&str]) -> Value {
        let file = self.file(code);
        let file = if extra.contains(&"--language") || !code.contains("await ") {
            file
        } else {
            let js = file.with_extension("js");
            std::fs::rename(&file, &js).unwrap();
            js
        };
        let file = file.to_str().unwrap();
        let mut args = vec!["exec", "run", file, "--json", "--profile", profile];
        if !extra.contains(&"--allow") {
            args.extend(["--allow", "example.*"]);
        }
        args.extend_from_slice(extra);
        let out = self
            .home
            .cmd(&args)
            .env("MCPB_TEST_SECRET", "hunter2-secret")
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "no answer ({e}): {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }

    /// A run that must succeed: the daemon and the sandbox still work.
    pub(super) fn still_works(&self) {
        let a = self.run(
            "from mcp_sdk import call_tool, result\nresult(call_tool('example.echo', {'message': 'ok'}))",
            &[],
        );
        assert_eq!(a["status"], "ok", "{a}");
        assert_eq!(a["result"], "ok");
    }
}

fn stdout(a: &Value) -> &str {
    a["stdout"].as_str().unwrap_or("")
}

/// Processes on this machine whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmd) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(marker) && !cmd.contains("exec run") {
            out.push(format!("{}: {cmd}", entry.file_name().to_string_lossy()));
        }
    }
    out
}

fn none_left(marker: &str) {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let left = processes_with(marker);
        if left.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "left running: {left:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn no_network_of_any_kind_reaches_a_loopback_listener() {
    let jail = Jail::new();
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let (tport, uport) = (
        tcp.local_addr().unwrap().port(),
        udp.local_addr().unwrap().port(),
    );
    let code = format!(
        r#"
import socket, subprocess
def attempt(name, f):
    try:
        f()
        print(name, "CONNECTED")
    except OSError as e:
        print(name, "denied", e.errno)
attempt("tcp", lambda: socket.create_connection(("127.0.0.1", {tport}), timeout=1))
attempt("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", {uport})))
attempt("tcp6", lambda: socket.create_connection(("::1", {tport}), timeout=1))
for fam in ("AF_UNIX", "AF_NETLINK", "AF_VSOCK", "AF_PACKET"):
    attempt(fam, lambda: socket.socket(getattr(socket, fam), socket.SOCK_STREAM if fam != "AF_NETLINK" else socket.SOCK_RAW))
r = subprocess.run(["/bin/bash", "-c", "echo hi > /dev/tcp/127.0.0.1/{tport}"], capture_output=True, text=True)
print("devtcp", "exit", r.returncode)
"#
    );
    let a = jail.run(&code, &[]);
    assert_eq!(a["status"], "ok", "{a}");
    let out = stdout(&a);
    assert!(!out.contains("CONNECTED"), "{out}");
    for name in [
        "tcp ",
        "udp ",
        "tcp6 ",
        "AF_UNIX ",
        "AF_NETLINK ",
        "AF_VSOCK ",
        "AF_PACKET ",
    ] {
        assert!(out.contains(&format!("{name}denied 1")), "{name}: {out}");
    }
    assert!(out.contains("devtcp exit 1"), "{out}");
    assert!(tcp.accept().is_err(), "the TCP listener was reached");
    let mut buf = [0u8; 8];
    assert!(
        udp.recv_from(&mut buf).is_err(),
        "the UDP socket was reached"
    );
    jail.still_works();
}

#[test]
fn host_files_secrets_and_the_broker_are_out_of_sight() {
    let jail = Jail::new();
    let root = jail.home.root();
    let secret_file = root.join("secrets/token");
    std::fs::create_dir_all(root.join("secrets")).unwrap();
    std::fs::write(&secret_file, "s3cret-file-value").unwrap();
    std::fs::create_dir_all(root.join(".ssh")).unwrap();
    std::fs::write(root.join(".ssh/id_ed25519"), "PRIVATE KEY").unwrap();
    jail.still_works(); // the daemon runs and has written its pin store
    let targets: Vec<PathBuf> = vec![
        secret_file,
        root.join(".ssh/id_ed25519"),
        jail.home.config.clone().unwrap(),
        root.join("state"),
        root.join("sockets/broker.sock"),
        PathBuf::from("/root/.ssh"),
        PathBuf::from("/etc/shadow"),
        PathBuf::from("/proc/1/environ"),
        PathBuf::from("/proc/1/root/etc"),
        PathBuf::from("/proc/1/fd"),
    ];
    let list: Vec<String> = targets
        .iter()
        .map(|p| format!("{:?}", p.display().to_string()))
        .collect();
    let code = format!(
        r#"
import os
for p in [{}]:
    try:
        if os.path.isdir(p):
            print(p, "LISTED", os.listdir(p))
        else:
            print(p, "READ", open(p).read())
    except OSError as e:
        print(p, "denied", type(e).__name__)
print("env", sorted(os.environ))
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            print("proc", pid, open(f"/proc/{{pid}}/environ", "rb").read())
        except OSError as e:
            print("proc", pid, "denied")
"#,
        list.join(", ")
    );
    let a = jail.run(&code, &[]);
    assert_eq!(a["status"], "ok", "{a}");
    let out = stdout(&a);
    for p in &targets {
        assert!(
            out.contains(&format!("{} denied", p.display())),
            "{}: {out}",
            p.display()
        );
    }
    for leak in [
        "s3cret-file-value",
        "PRIVATE KEY",
        "hunter2-secret",
        "MCP_BROKER",
    ] {
        assert!(!out.contains(leak), "{leak} leaked: {out}");
    }
    assert!(
        out.contains("env ['HOME', 'LANG', 'MCP_SDK_FD', 'PATH', 'PYTHONIOENCODING', 'TMPDIR']"),
        "{out}"
    );
}

#[test]
fn writes_outside_the_workspace_fail_and_links_do_not_escape_it() {
    let jail = Jail::new();
    let root = jail.home.root();
    let bashrc = root.join(".bashrc");
    std::fs::write(&bashrc, "# mine\n").unwrap();
    std::fs::create_dir_all(root.join("repo/.git/hooks")).unwrap();
    let hook = root.join("repo/.git/hooks/pre-commit");
    // `ID=$(mcp-broker exec open)`: the id alone on stdout.
    let open = jail.home.run(&["exec", "open", "--profile", "code"]);
    let id = String::from_utf8(open.stdout).unwrap().trim().to_string();
    assert!(id.len() >= 16 && !id.contains(['{', ' ', '"']), "{id:?}");
    let code = format!(
        r#"
import os
for p in ["{}", "{}", "/usr/bin/evil", "/etc/passwd", "/sdk/mcp_sdk.py", "/tmp/../usr/x"]:
    try:
        open(p, "a").write("pwned")
        print(p, "WRITTEN")
    except OSError as e:
        print(p, "denied", type(e).__name__)
os.symlink("/etc/passwd", "/work/to_passwd")
os.symlink("..", "/work/up")
os.symlink("{}", "/work/to_host")
try:
    os.link("/sdk/runner.py", "/work/hard")
    print("hardlink MADE")
except OSError as e:
    print("hardlink denied", e.errno)
open("/work/kept.txt", "w").write("kept")
print(sorted(os.listdir("/work")))
"#,
        bashrc.display(),
        hook.display(),
        root.display()
    );
    let a = jail.run(&code, &["--exec-id", &id]);
    assert_eq!(a["status"], "ok", "{a}");
    let out = stdout(&a);
    assert!(!out.contains("WRITTEN"), "{out}");
    assert!(!out.contains("hardlink MADE"), "{out}");
    assert_eq!(std::fs::read_to_string(&bashrc).unwrap(), "# mine\n");
    assert!(!hook.exists());
    // What the run left in the host's copy of the workspace: files only, no links.
    let work = find_workspace(root, &id);
    assert!(work.join("kept.txt").is_file());
    let mut links = Vec::new();
    walk(&work, &mut |p| {
        if std::fs::symlink_metadata(p)
            .unwrap()
            .file_type()
            .is_symlink()
        {
            links.push(p.to_path_buf());
        }
    });
    assert!(links.is_empty(), "links reached the host: {links:?}");
    // The next run of the workspace sees its files and none of the links.
    let a = jail.run(
        "import os\nprint(sorted(os.listdir('/work')))",
        &["--exec-id", &id],
    );
    assert!(stdout(&a).contains("['.tmp', 'kept.txt']"), "{a}");
    let close = jail.home.run(&["exec", "close", &id, "--profile", "code"]);
    assert!(close.status.success());
    assert!(!work.exists());
}

pub(super) fn find_workspace(root: &Path, id: &str) -> PathBuf {
    root.join("state/exec/code").join(id).join("work")
}

fn walk(dir: &Path, f: &mut dyn FnMut(&Path)) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        f(&p);
        if e.file_type().unwrap().is_dir() {
            walk(&p, f);
        }
    }
}

#[test]
#[cfg(target_arch = "x86_64")]
fn forbidden_system_calls_end_the_run_as_a_violation() {
    let jail = Jail::new();
    let cases = [
        ("io_uring", "libc.syscall(425, 8, ctypes.c_void_p(0))"),
        ("ptrace", "libc.ptrace(0, 0, 0, 0)"),
        ("unshare", "libc.unshare(0x10000000)"),
        ("bpf", "libc.syscall(321, 0, 0, 0)"),
        ("keyctl", "libc.syscall(250, 0, 0, 0)"),
        ("userfaultfd", "libc.syscall(323, 0)"),
        ("perf_event_open", "libc.syscall(298, 0, 0, -1, -1, 0)"),
        ("mount", "libc.mount(b'none', b'/work', b'tmpfs', 0, 0)"),
        ("process_vm_readv", "libc.syscall(310, 1, 0, 0, 0, 0, 0)"),
        ("x32", "libc.syscall(0x40000000 | 41, 2, 1, 0)"),
    ];
    for (name, call) in cases {
        let code = format!(
            "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nprint('before', flush=True)\n{call}\nprint('AFTER')"
        );
        let a = jail.run(&code, &[]);
        assert_eq!(a["status"], "violation", "{name}: {a}");
        assert!(
            a["reason"].as_str().unwrap().contains("seccomp"),
            "{name}: {a}"
        );
        assert_eq!(stdout(&a), "before\n", "{name}");
    }
    jail.still_works();
}

/// Every call of the new mount API, by number (the same on every architecture from 424 on);
/// each must kill the program, not fail with an error it could work around.
#[test]
fn every_call_of_the_new_mount_api_ends_the_run_as_a_violation() {
    let jail = Jail::new();
    let cases = [
        ("open_tree", "libc.syscall(428, -100, b'/work', 0)"),
        (
            "move_mount",
            "libc.syscall(429, -1, b'', -100, b'/work', 0)",
        ),
        ("fsopen", "libc.syscall(430, b'tmpfs', 0)"),
        ("fsconfig", "libc.syscall(431, -1, 6, 0, 0, 0)"),
        ("fsmount", "libc.syscall(432, -1, 0, 0)"),
        ("fspick", "libc.syscall(433, -100, b'/work', 0)"),
        (
            "mount_setattr",
            "libc.syscall(442, -100, b'/work', 0, 0, 0)",
        ),
        (
            "open_tree_attr",
            "libc.syscall(467, -100, b'/work', 0, 0, 0)",
        ),
    ];
    for (name, call) in cases {
        let code = format!(
            "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nprint('before', flush=True)\n{call}\nprint('AFTER')"
        );
        let a = jail.run(&code, &[]);
        assert_eq!(a["status"], "violation", "{name}: {a}");
        assert_eq!(stdout(&a), "before\n", "{name}");
    }
    jail.still_works();
}

#[test]
fn setuid_binaries_and_inherited_fds_give_nothing() {
    let jail = Jail::new();
    let code = r#"
import os, subprocess
print("fds", sorted(int(f) for f in os.listdir("/proc/self/fd")))
print("nnp", [l for l in open("/proc/self/status") if l.startswith(("NoNewPrivs", "CapEff", "CapBnd"))])
print("nosuid", bool(os.statvfs("/usr").f_flag & os.ST_NOSUID))
r = subprocess.run(["/usr/bin/su", "-c", "id -u"], capture_output=True, text=True, stdin=subprocess.DEVNULL)
print("su", r.returncode, r.stdout.strip() == "0")
print("ids", os.getuid(), os.geteuid(), os.getgid())
"#;
    let a = jail.run(code, &[]);
    assert_eq!(a["status"], "ok", "{a}");
    let out = stdout(&a);
    // 0-2, the SDK channel, and the fd of the listing itself.
    assert!(out.contains("fds [0, 1, 2, 3, 4]"), "{out}");
    assert!(out.contains("NoNewPrivs:\\t1"), "{out}");
    assert!(out.contains("CapEff:\\t0000000000000000"), "{out}");
    assert!(out.contains("CapBnd:\\t0000000000000000"), "{out}");
    assert!(out.contains("nosuid True"), "{out}");
    assert!(out.contains("su 1 False"), "{out}");
    assert!(out.contains("ids 65534 65534 65534"), "{out}");
}

#[test]
fn bombs_and_loops_are_capped_and_leave_nothing_running() {
    let jail = Jail::new();
    let fork = r#"
import os
me, n = os.getpid(), 0
while True:
    try:
        if os.fork() == 0:
            n = 0
        else:
            n += 1
    except OSError:
        break
if os.getpid() == me:
    print("forks", n, flush=True)
os._exit(0)
"#;
    let a = jail.run(fork, &[]);
    assert!(a["status"] == "ok", "{a}");
    let forks: u64 = stdout(&a)
        .trim()
        .trim_start_matches("forks ")
        .parse()
        .unwrap();
    assert!(forks < 32, "{a}");

    let a = jail.run(
        "x = bytearray(2 << 30)\nprint('ALLOCATED')",
        &["--limits", r#"{"memory_mb": 256}"#],
    );
    assert_eq!(a["status"], "error", "{a}");
    assert!(a["stderr"].as_str().unwrap().contains("MemoryError"), "{a}");

    let start = Instant::now();
    let a = jail.run(
        "while True:\n    pass",
        &["--limits", r#"{"wall_clock_ms": 1500}"#],
    );
    assert_eq!(a["status"], "timeout", "{a}");
    assert!(
        start.elapsed() < Duration::from_secs(8),
        "{:?}",
        start.elapsed()
    );

    let daemonize = r#"
import subprocess
subprocess.Popen(["/bin/sh", "-c", "sleep 61.4242; echo late > /work/late"], start_new_session=True)
print("spawned")
"#;
    let a = jail.run(daemonize, &[]);
    assert_eq!(a["status"], "ok", "{a}");
    none_left("61.4242");

    let a = jail.run(
        "import subprocess\nsubprocess.Popen(['/bin/sleep', '62.4242'])\nwhile True: pass",
        &["--limits", r#"{"wall_clock_ms": 1000}"#],
    );
    assert_eq!(a["status"], "timeout", "{a}");
    none_left("62.4242");
    jail.still_works();
}

#[test]
fn a_gibibyte_of_output_is_cut_and_the_run_still_reports() {
    let jail = Jail::new();
    let a = jail.run(
        "import sys\nb = b'x' * (1 << 20)\nfor _ in range(1024):\n    sys.stdout.buffer.write(b)\nprint('done', file=sys.stderr)",
        &[],
    );
    assert_eq!(a["status"], "limit", "{a}");
    assert_eq!(a["truncated"], true);
    let out = stdout(&a);
    assert!(out.len() < 300 * 1024, "{}", out.len());
    assert!(
        out.ends_with("bytes cut: over max_output_kb]"),
        "{}",
        &out[out.len() - 80..]
    );
    assert!(a["stderr"].as_str().unwrap().contains("done"), "{a}");
    assert!(a["usage"]["output_bytes"].as_u64().unwrap() >= 1 << 30);
}

#[test]
fn the_sdk_channel_survives_floods_and_forged_frames() {
    let jail = Jail::new();
    let flood = r#"
from mcp_sdk import call_tool, ToolError, result
ok = errors = 0
for i in range(10000):
    try:
        call_tool("example.echo", {"message": str(i)})
        ok += 1
    except ToolError as e:
        errors += 1
        kind = e.kind
result({"ok": ok, "errors": errors, "kind": kind})
"#;
    let a = jail.run(flood, &[]);
    assert_eq!(a["status"], "limit", "{a}");
    let max_calls = mcpb_config::Limits::DEFAULT.max_calls;
    assert_eq!(a["result"]["ok"], max_calls);
    assert_eq!(a["result"]["errors"], 10_000 - max_calls);
    assert_eq!(a["result"]["kind"], "limit");
    assert!(a["reason"].as_str().unwrap().contains("max_calls"), "{a}");

    let forged = r#"
import os, socket
s = socket.socket(fileno=3)
s.setblocking(True)
f = s.makefile("rb")
for frame in [b"not json\n", b'{"id": 7, "method": "explode"}\n', b'{"id": 8, "method": "call_tool", "params": {"name": "example.echo", "arguments": [1]}}\n']:
    s.sendall(frame)
    print(f.readline().decode().strip())
s.sendall(b'{"id": 9, "method": "call_to')
"#;
    let a = jail.run(forged, &[]);
    assert_eq!(a["status"], "ok", "{a}");
    let out = stdout(&a);
    assert!(out.contains("malformed SDK frame"), "{out}");
    assert!(out.contains("unknown SDK method"), "{out}");
    assert!(out.contains("arguments must be an object"), "{out}");

    let huge = "import os\nchunk = b'x' * (1 << 20)\nfor _ in range(100):\n    os.write(3, chunk)\nprint('SENT')";
    let a = jail.run(huge, &[]);
    assert_eq!(a["status"], "violation", "{a}");
    assert!(
        a["reason"].as_str().unwrap().contains("SDK frame over"),
        "{a}"
    );
    jail.still_works();
}

#[test]
fn calls_outside_the_allow_list_the_profile_or_read_only_are_refused() {
    let jail = Jail::new();
    let probe = |tool: &str| {
        format!(
            "from mcp_sdk import call_tool, ToolError, result\ntry:\n    call_tool('{tool}', {{'text': 'x'}})\n    result('CALLED')\nexcept ToolError as e:\n    result([e.kind, str(e)])"
        )
    };
    // Outside the run's allow list.
    let a = jail.run(&probe("example.add"), &["--allow", "example.echo"]);
    assert_eq!(a["result"][0], "unknown", "{a}");
    // Hidden by the profile (a mutating tool in a profile that allows none).
    let a = jail.run(&probe("example.append_note"), &["--allow", "example.*"]);
    assert_eq!(a["result"][0], "unknown", "{a}");
    assert_eq!(a["calls"][0]["outcome"], "unknown");
    // A broker tool is not for programs.
    let a = jail.run(&probe("broker.status"), &["--allow", "*"]);
    assert_eq!(a["result"][0], "unknown", "{a}");
    // Visible and allowed, but the run is read_only.
    let a = jail.run_in("rw", &probe("example.append_note"), &["--read-only"]);
    assert_eq!(a["result"][0], "refused", "{a}");
    let a = jail.run_in("rw", &probe("example.append_note"), &[]);
    assert_eq!(a["result"], "CALLED", "{a}");
}

#[test]
fn exec_ids_are_uuids_of_the_callers_own_profile() {
    let jail = Jail::new();
    let open = jail
        .home
        .run(&["exec", "open", "--json", "--profile", "rw"]);
    let id: Value = serde_json::from_slice(&open.stdout).unwrap();
    let rw_id = id["exec_id"].as_str().unwrap().to_string();
    let src = jail.home.root().join("upload.txt");
    std::fs::write(&src, "data").unwrap();
    let src = src.to_str().unwrap();
    for bad in [
        "../../etc",
        "/etc",
        "abc\u{1}def",
        &rw_id.to_uppercase(),
        &format!("{rw_id}/../x"),
    ] {
        let out = jail
            .home
            .run(&["exec", "upload", bad, src, "--profile", "rw"]);
        assert!(!out.status.success(), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("unknown exec id"), "{bad}: {err}");
    }
    // Another profile's workspace is as unknown as a made-up one.
    let out = jail
        .home
        .run(&["exec", "upload", &rw_id, src, "--profile", "code"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown exec id"));
    for bad in ["../x", "/etc/passwd", "a/../../b"] {
        let out = jail.home.run(&[
            "exec",
            "upload",
            &rw_id,
            src,
            "--as",
            bad,
            "--profile",
            "rw",
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("bad workspace path"), "{bad}: {err}");
    }
    let out = jail.home.run(&[
        "exec",
        "upload",
        &rw_id,
        src,
        "--as",
        "in/data.txt",
        "--profile",
        "rw",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut buf = String::new();
    std::fs::File::open(
        jail.home
            .root()
            .join("state/exec/rw")
            .join(&rw_id)
            .join("work/in/data.txt"),
    )
    .unwrap()
    .read_to_string(&mut buf)
    .unwrap();
    assert_eq!(buf, "data");
}

#[test]
fn the_disk_quota_and_the_file_size_limit_hold_in_the_workspace_and_tmp() {
    let jail = Jail::new();
    let fill = r#"
import os
def fill(path, mib):
    try:
        with open(path, "wb") as f:
            for _ in range(mib):
                f.write(b"x" * (1 << 20))
                f.flush()
        return "WROTE"
    except OSError as e:
        return e.errno
print("big", fill("/work/big", 64))
os.remove("/work/big")
print("tmp", fill("/tmp/big", 64))
"#;
    let a = jail.run(fill, &["--limits", r#"{"disk_kb": 8192}"#]);
    let out = stdout(&a);
    assert!(out.contains("big 28"), "ENOSPC in /work: {a}");
    assert!(out.contains("tmp 28"), "ENOSPC in /tmp: {a}");
    let a = jail.run(fill, &["--limits", r#"{"file_size_kb": 1024}"#]);
    assert!(stdout(&a).contains("big 27"), "EFBIG: {a}");
}

#[test]
fn javascript_runs_are_hermetic_and_bounded() {
    let jail = Jail::new();
    let a = jail.run(
        "console.log([typeof require, typeof process, typeof fetch, typeof std, typeof os, typeof WebAssembly].join(','));\nawait result(await callTool('example.echo', {message: 'js'}));",
        &[],
    );
    assert_eq!(a["status"], "ok", "{a}");
    assert_eq!(
        stdout(&a),
        "undefined,undefined,undefined,undefined,undefined,undefined\n"
    );
    assert_eq!(a["result"], "js");
    let a = jail.run(
        "await 0; let a = []; while (true) a.push(new Array(1e6).fill(1));",
        &["--limits", r#"{"memory_mb": 128}"#],
    );
    assert_eq!(a["status"], "error", "{a}");
    assert!(
        a["stderr"].as_str().unwrap().contains("out of memory"),
        "{a}"
    );
    let a = jail.run(
        "await 0; while (true) {}",
        &["--limits", r#"{"wall_clock_ms": 1000}"#],
    );
    assert_eq!(a["status"], "timeout", "{a}");
    let a = jail.run(
        "let ok = 0, kinds = new Set();\nfor (let i = 0; i < 10000; i++) { try { await callTool('example.echo', {message: 'x'}); ok++; } catch (e) { kinds.add(e.kind); } }\nawait result({ok, kinds: [...kinds]});",
        &[],
    );
    assert_eq!(a["status"], "limit", "{a}");
    assert_eq!(a["result"]["ok"], mcpb_config::Limits::DEFAULT.max_calls);
    assert_eq!(a["result"]["kinds"], serde_json::json!(["limit"]));
    // A profile runs only the languages it names.
    let file = jail.home.root().join("only-python.js");
    std::fs::write(&file, "await 0").unwrap();
    let out = jail.home.run(&[
        "exec",
        "run",
        file.to_str().unwrap(),
        "--profile",
        "rw",
        "--allow",
        "x",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("does not run javascript") && err.contains("hint: it runs python"),
        "{err}"
    );
    let a = jail.run("await callTool('example.append_note', {text: 'x'})", &[]);
    assert_eq!(a["status"], "error", "{a}");
    assert!(
        a["stderr"]
            .as_str()
            .unwrap()
            .contains("ToolError: unknown tool"),
        "{a}"
    );
    jail.still_works();
}
