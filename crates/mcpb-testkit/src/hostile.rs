//! `--hostile`: tools with which a fixture server tries what a sandboxed server must not
//! manage: read or write a path, connect to a TCP port on loopback or to a unix socket, signal
//! a process, leave a process behind. Each answers with what happened (`ok: ...` or `denied: <the OS error>`);
//! the tests check the outcome from outside as well.

use std::io::Write;

use serde_json::{Value, json};

fn tool(name: &str, description: &str, props: Value) -> Value {
    json!({"name": name, "description": description,
        "inputSchema": {"type": "object", "properties": props},
        "annotations": {"readOnlyHint": false}})
}

pub(crate) fn tools() -> Vec<Value> {
    let s = json!({"type": "string"});
    let n = json!({"type": "number"});
    vec![
        tool("read_path", "Read a file.", json!({"path": s})),
        tool("write_path", "Write a file.", json!({"path": s, "text": s})),
        tool("list_dir", "List a directory.", json!({"path": s})),
        tool("connect", "Connect to 127.0.0.1:port.", json!({"port": n})),
        tool(
            "connect_unix",
            "Connect to the unix socket at path.",
            json!({"path": s}),
        ),
        tool("signal", "Send SIGTERM to a pid.", json!({"pid": n})),
        tool(
            "ptrace",
            "PTRACE_ATTACH to a pid (from a python3 child).",
            json!({"pid": n}),
        ),
        tool(
            "syscall",
            "Make system call nr with zero arguments (from a python3 child); gives its errno.",
            json!({"nr": n}),
        ),
        tool(
            "hog",
            "Take MB mebibytes of memory and touch them.",
            json!({"mb": n}),
        ),
        tool(
            "leave_behind",
            "Start `sleep SECONDS` in a session of its own; gives its pid.",
            json!({"seconds": n}),
        ),
    ]
}

fn outcome<T>(r: std::io::Result<T>, ok: impl FnOnce(T) -> String) -> String {
    match r {
        Ok(v) => format!("ok: {}", ok(v)),
        Err(e) => format!("denied: {e}"),
    }
}

/// The answer of a hostile tool, or `None` for another tool.
pub(crate) fn call(name: &str, args: &Value) -> Option<String> {
    let path = args["path"].as_str().unwrap_or("");
    Some(match name {
        "read_path" => outcome(std::fs::read_to_string(path), |t| t),
        "write_path" => outcome(
            std::fs::write(path, args["text"].as_str().unwrap_or("")),
            |()| "written".into(),
        ),
        "list_dir" => outcome(std::fs::read_dir(path), |d| {
            let mut names: Vec<String> = d
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names.join(",")
        }),
        "connect" => connect(args["port"].as_u64().unwrap_or(0) as u16),
        "connect_unix" => outcome(
            std::os::unix::net::UnixStream::connect(path)
                .and_then(|mut s| s.write_all(b"hello from the fixture\n")),
            |()| "connected".into(),
        ),
        "signal" => signal(args["pid"].as_i64().unwrap_or(0)),
        "ptrace" => ptrace(args["pid"].as_i64().unwrap_or(0)),
        "syscall" => syscall(args["nr"].as_i64().unwrap_or(-1)),
        "hog" => {
            let mb = args["mb"].as_u64().unwrap_or(1) as usize;
            let mut held: Vec<Vec<u8>> = Vec::new();
            for _ in 0..mb {
                held.push(vec![1u8; 1 << 20]);
            }
            format!("ok: held {} MiB", held.len())
        }
        "leave_behind" => outcome(
            std::process::Command::new("setsid")
                .args([
                    "sleep",
                    &args["seconds"].as_u64().unwrap_or(1000).to_string(),
                ])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn(),
            |c| c.id().to_string(),
        ),
        _ => return None,
    })
}

/// Connects to 127.0.0.1:`port` and says hello.
fn connect(port: u16) -> String {
    outcome(
        std::net::TcpStream::connect_timeout(
            &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
            std::time::Duration::from_secs(2),
        )
        .and_then(|mut s| s.write_all(b"hello from the fixture\n")),
        |()| "connected".into(),
    )
}

/// Sends SIGTERM to `pid` with kill(1).
fn signal(pid: i64) -> String {
    outcome(
        std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .and_then(|s| {
                if s.success() {
                    Ok(())
                } else {
                    Err(std::io::Error::other(format!("kill: {s}")))
                }
            }),
        |()| "sent".into(),
    )
}

/// PTRACE_ATTACHes to `pid` from a python3 child.
fn ptrace(pid: i64) -> String {
    // This crate has no unsafe code: ctypes makes the call for it.
    let code = "import ctypes, os, sys\n\
        libc = ctypes.CDLL(None, use_errno=True)\n\
        if libc.ptrace(16, int(sys.argv[1]), 0, 0) != 0:\n    \
        sys.exit(os.strerror(ctypes.get_errno()))\n";
    outcome(
        std::process::Command::new("python3")
            .args(["-c", code, &pid.to_string()])
            .output()
            .and_then(|o| {
                use std::os::unix::process::ExitStatusExt;
                match (o.status.code(), o.status.signal()) {
                    (Some(0), _) => Ok(()),
                    (_, Some(sig)) => Err(std::io::Error::other(format!("killed by signal {sig}"))),
                    _ => Err(std::io::Error::other(
                        String::from_utf8_lossy(&o.stderr).trim().to_string(),
                    )),
                }
            }),
        |()| "attached".into(),
    )
}

/// Makes system call `nr` with zero arguments from a python3 child; gives its errno or `ok`.
fn syscall(nr: i64) -> String {
    let code = "import ctypes, sys\n\
        libc = ctypes.CDLL(None, use_errno=True)\n\
        r = libc.syscall(int(sys.argv[1]), 0, 0, 0, 0)\n\
        print(ctypes.get_errno() if r < 0 else 'ok')\n";
    outcome(
        std::process::Command::new("python3")
            .args(["-c", code, &nr.to_string()])
            .output(),
        |o| String::from_utf8_lossy(&o.stdout).trim().to_string(),
    )
}
