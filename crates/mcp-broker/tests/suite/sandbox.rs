//! Sandboxed upstream servers: what a hostile server tries is denied and seen to be denied from
//! outside (planted files unchanged, a listener with no connection, no process left after the
//! daemon is killed); real servers work with what they are granted.
//!
//! These homes live under /var/tmp, not /tmp: a sandboxed server gets a private /tmp, so a
//! runtime dir under /tmp would be out of its sight whatever the sandbox hides on purpose.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::support::{Home, Shim, deps, deps_path, fixture, text, wait_until};

/// A runtime dir, and beside it the user's world (home, data, other files), both under
/// /var/tmp: the runtime dir is then hidden by the sandbox itself, not by the home's
/// replacement or the private /tmp.
fn homes(yaml: impl Fn(&Path) -> String) -> (Home, tempfile::TempDir) {
    let temp = |prefix: &str| {
        tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in("/var/tmp")
            .unwrap()
    };
    let (dir, world) = (temp("mcpb-"), temp("mcpb-w-"));
    std::fs::create_dir_all(world.path().join("home")).unwrap();
    let config = dir.path().join("test.yaml");
    std::fs::write(&config, yaml(world.path())).unwrap();
    let home = Home {
        dir,
        config: Some(config),
    };
    (home, world)
}

/// A session whose daemon (started by it) has `<world>/home` as the user's home.
fn session(home: &Home, world: &Path, path: Option<&str>) -> Shim {
    let mut cmd = home.cmd(&["stdio"]);
    cmd.env("HOME", world.join("home"));
    if let Some(p) = path {
        cmd.env("PATH", p);
    }
    let mut s = Shim::spawn(cmd);
    s.initialize("2025-11-25");
    s
}

fn said(shim: &mut Shim, tool: &str, args: Value) -> String {
    text(&shim.call(tool, args))
}

fn plant(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn a_hostile_server_is_denied_what_it_was_not_granted_and_leaves_nothing_behind() {
    let fx = fixture();
    let (home, world) = homes(|w| {
        format!(
            "schema_version: 1\nupstreams:\n  fx: {{command: \"{fx}\", args: [--hostile], env: {{CACHE: \"{data}/cache\"}}, trust_annotations: true, sandbox: {{fs: {{write: [\"{data}\"]}}, network: none}}}}\n  netfx: {{command: \"{fx}\", args: [--hostile], trust_annotations: true, sandbox: {{fs: {{read: [\"{lib}\"], write: [\"{lib}/out\"]}}}}}}\nprofiles:\n  default: {{allow_mutating_upstreams: true}}\n",
            fx = fx.display(),
            data = w.join("data").display(),
            lib = w.join("lib").display(),
        )
    });
    let (root, w) = (home.root().to_path_buf(), world.path().to_path_buf());
    let ssh = w.join("home/.ssh/id_rsa");
    plant(&ssh, "-----BEGIN PRIVATE KEY-----");
    plant(&root.join("secrets/k"), "s3cret");
    plant(
        &root.join("state/upstreams/other/home/note.txt"),
        "the other's",
    );
    plant(&w.join("outside.txt"), "unchanged");
    std::fs::create_dir_all(w.join("data")).unwrap();
    std::fs::create_dir_all(w.join("lib/out")).unwrap();
    // A link a server could have planted where it may write, naming the user's keys: its
    // environment names it, but its target is never granted.
    std::os::unix::fs::symlink(w.join("home/.ssh"), w.join("data/cache")).unwrap();
    let mut s = session(&home, &w, None);
    let denied = |r: String, what: &str| {
        assert!(r.starts_with("denied"), "{what}: {r}");
    };
    denied(
        said(&mut s, "fx.read_path", json!({"path": ssh})),
        "the user's key",
    );
    denied(
        said(
            &mut s,
            "fx.read_path",
            json!({"path": root.join("secrets/k")}),
        ),
        "the broker's secrets",
    );
    denied(
        said(
            &mut s,
            "fx.read_path",
            json!({"path": root.join("state/upstreams/other/home/note.txt")}),
        ),
        "another server's home",
    );
    // The runtime dir is covered whole: nothing of it is there.
    denied(
        said(&mut s, "fx.list_dir", json!({"path": root.join("secrets")})),
        "the secrets folder",
    );
    // /dev is the server's own: the user's terminals (what is typed into them could be read)
    // and the host's other devices are out of sight.
    assert!(std::fs::read_dir("/dev/pts").unwrap().count() > 0);
    denied(
        said(&mut s, "fx.list_dir", json!({"path": "/dev/pts"})),
        "the user's terminals",
    );
    let dev = said(&mut s, "fx.list_dir", json!({"path": "/dev"}));
    let mut names: Vec<&str> = dev.trim_start_matches("ok: ").split(',').collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "fd", "full", "null", "random", "shm", "stderr", "stdin", "stdout", "urandom", "zero"
        ],
        "{dev}"
    );
    // A writable folder inside a read-only one keeps its mode, whatever the order of grants.
    assert_eq!(
        said(
            &mut s,
            "netfx.write_path",
            json!({"path": w.join("lib/out/x"), "text": "in"})
        ),
        "ok: written"
    );
    denied(
        said(
            &mut s,
            "netfx.write_path",
            json!({"path": w.join("lib/y"), "text": "no"}),
        ),
        "beside a write grant, in a read-only one",
    );
    assert!(!w.join("lib/y").exists());
    denied(
        said(
            &mut s,
            "fx.read_path",
            json!({"path": root.join("test.yaml")}),
        ),
        "the broker's config",
    );
    let st = super::support::upstream_status(&home, "fx");
    assert!(!st["sandbox"].to_string().contains(".ssh"), "{st}");
    denied(
        said(
            &mut s,
            "fx.read_path",
            json!({"path": w.join("data/cache/id_rsa")}),
        ),
        "a planted link to the keys",
    );
    // Granted: written where the host sees it.
    let x = w.join("data/x");
    assert_eq!(
        said(&mut s, "fx.write_path", json!({"path": x, "text": "w"})),
        "ok: written"
    );
    assert_eq!(std::fs::read_to_string(&x).unwrap(), "w");
    // Not granted: the host's file is unchanged.
    denied(
        said(
            &mut s,
            "fx.write_path",
            json!({"path": w.join("outside.txt"), "text": "changed"}),
        ),
        "a file outside the grants",
    );
    assert_eq!(
        std::fs::read_to_string(w.join("outside.txt")).unwrap(),
        "unchanged"
    );
    // The home it writes is its own, kept under the runtime dir.
    let note = w.join("home/note");
    assert_eq!(
        said(
            &mut s,
            "fx.write_path",
            json!({"path": note, "text": "mine"})
        ),
        "ok: written"
    );
    assert!(!note.exists());
    assert_eq!(
        std::fs::read_to_string(root.join("state/upstreams/fx/home/note")).unwrap(),
        "mine"
    );
    // No network: the listener this test opened sees no connection; with the host's network
    // (the control), it does.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    denied(
        said(&mut s, "fx.connect", json!({"port": port})),
        "loopback with network: none",
    );
    assert!(
        listener.accept().is_err(),
        "a connection reached the listener"
    );
    assert_eq!(
        said(&mut s, "netfx.connect", json!({"port": port})),
        "ok: connected"
    );
    // The standard policy's bounds: processes and an in-memory /tmp of a size said in README;
    // calls no server needs fail with EPERM (1).
    let limits = said(&mut s, "fx.read_path", json!({"path": "/proc/self/limits"}));
    assert!(
        limits
            .lines()
            .any(|l| l.starts_with("Max processes") && l.split_whitespace().nth(2) == Some("1024")),
        "{limits}"
    );
    let mounts = said(
        &mut s,
        "fx.read_path",
        json!({"path": "/proc/self/mountinfo"}),
    );
    for (at, size) in [(" /tmp ", "size=1048576k"), (" /dev/shm ", "size=262144k")] {
        assert!(
            mounts.lines().any(|l| l.contains(at) && l.contains(size)),
            "{at}{size}: {mounts}"
        );
    }
    // memfd_secret, statmount, listmount (and modify_ldt on x86_64).
    let mut needless = vec![447, 457, 458];
    if cfg!(target_arch = "x86_64") {
        needless.push(154);
    }
    for nr in needless {
        assert_eq!(
            said(&mut s, "fx.syscall", json!({"nr": nr})),
            "ok: 1",
            "syscall {nr}"
        );
    }
    // Nor the host's services' sockets under /run (a database's, libvirt's): a socket this
    // test opened there is out of reach with no network, and reached with the host's.
    let sock = Path::new("/run").join(format!("mcpb-test-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&sock);
    match std::os::unix::net::UnixListener::bind(&sock) {
        Ok(unix) => {
            unix.set_nonblocking(true).unwrap();
            denied(
                said(&mut s, "fx.connect_unix", json!({"path": sock})),
                "a host socket under /run with network: none",
            );
            assert!(unix.accept().is_err(), "a connection reached the socket");
            assert_eq!(
                said(&mut s, "netfx.connect_unix", json!({"path": sock})),
                "ok: connected"
            );
            let _ = std::fs::remove_file(&sock);
        }
        // /run is root's: only a test run as root can plant a socket there.
        Err(e) => assert!(
            !rustix::process::geteuid().is_root(),
            "cannot bind {}: {e}",
            sock.display()
        ),
    }
    // Neither signals nor a process outliving the daemon.
    let daemon = home.daemon_pid().unwrap();
    denied(
        said(&mut s, "fx.signal", json!({"pid": daemon})),
        "a signal to the daemon",
    );
    assert!(
        Path::new(&format!("/proc/{daemon}")).exists(),
        "the daemon lives"
    );
    // ptrace of the daemon's pid and of pid 1 (the server itself, its namespace's init): the
    // seccomp filter kills the caller (SIGSYS); nothing traces the daemon.
    for pid in [daemon, 1] {
        let r = said(&mut s, "fx.ptrace", json!({"pid": pid}));
        assert_eq!(r, "denied: killed by signal 31", "ptrace {pid}");
    }
    let status = std::fs::read_to_string(format!("/proc/{daemon}/status")).unwrap();
    assert!(status.contains("TracerPid:\t0\n"), "{status}");
    let left = said(&mut s, "fx.leave_behind", json!({"seconds": 4711}));
    assert!(left.starts_with("ok"), "{left}");
    assert!(
        wait_until(Duration::from_secs(5), || sleepers(4711) > 0),
        "the sleeper never ran"
    );
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(daemon as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || sleepers(4711) == 0),
        "a sandboxed server's process outlived the daemon"
    );
}

/// Processes running `sleep <seconds>`, from the host's /proc.
fn sleepers(seconds: u32) -> usize {
    let want = format!("sleep\0{seconds}\0");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c.ends_with(want.as_bytes()))
        })
        .count()
}

#[test]
fn reference_servers_work_with_what_they_are_granted_and_no_more() {
    let deps = deps();
    let npm = deps.join("npm/node_modules/.bin");
    let venv = deps.join("venv/bin");
    let (home, world) = homes(|w| {
        let h = w.join("home");
        format!(
            "schema_version: 1\nupstreams:\n  filesystem: {{command: \"{npm}/mcp-server-filesystem\", args: [\"{files}\"], trust_annotations: true, sandbox: standard}}\n  memory: {{command: \"{npm}/mcp-server-memory\", env: {{MEMORY_FILE_PATH: \"{mem}/memory.jsonl\"}}, sandbox: {{fs: {{write: [\"{mem}\"]}}}}}}\n  everything: {{command: \"{npm}/mcp-server-everything\", sandbox: {{network: none}}}}\n  time: {{command: \"{venv}/mcp-server-time\", args: [--local-timezone, UTC], sandbox: standard}}\n  git: {{command: \"{venv}/mcp-server-git\", args: [--repository, \"{repo}\"], trust_annotations: true, sandbox: standard}}\nprofiles:\n  default: {{allow_mutating_upstreams: true}}\n",
            npm = npm.display(),
            venv = venv.display(),
            files = h.join("files").display(),
            mem = h.join("mem").display(),
            repo = h.join("repo").display(),
        )
    });
    let h: PathBuf = world.path().join("home");
    plant(&h.join("files/hello.txt"), "hello from a granted folder");
    plant(&h.join("private/secret.txt"), "never shown");
    std::fs::create_dir_all(h.join("mem")).unwrap();
    std::os::unix::fs::symlink(h.join("private/secret.txt"), h.join("files/link")).unwrap();
    let repo = h.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let git = |args: &[&str]| {
        assert!(
            std::process::Command::new("git")
                .args(args)
                .current_dir(&repo)
                .env("HOME", &h)
                .status()
                .unwrap()
                .success()
        )
    };
    git(&["init", "-q"]);
    plant(&repo.join("a.txt"), "a");
    git(&["add", "a.txt"]);
    git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-qm",
        "first",
    ]);

    let path = deps_path(&deps);
    let mut s = session(&home, world.path(), Some(&path));
    let read = said(
        &mut s,
        "filesystem.read_text_file",
        json!({"path": h.join("files/hello.txt")}),
    );
    assert!(read.contains("hello from a granted folder"), "{read}");
    let wrote = s.call(
        "filesystem.write_file",
        json!({"path": h.join("files/new.txt"), "content": "made inside"}),
    );
    assert!(wrote["result"]["isError"] != true, "{wrote}");
    assert_eq!(
        std::fs::read_to_string(h.join("files/new.txt")).unwrap(),
        "made inside"
    );
    for path in [
        h.join("files/../private/secret.txt"),
        h.join("files/link"),
        h.join("private/secret.txt"),
    ] {
        let r = s.call("filesystem.read_text_file", json!({"path": path}));
        assert!(!r.to_string().contains("never shown"), "{path:?}: {r}");
    }
    // The memory server writes its file where it was granted.
    let made = s.call(
        "memory.create_entities",
        json!({"entities": [{"name": "sandbox", "entityType": "test", "observations": ["kept"]}]}),
    );
    assert!(made["result"]["isError"] != true, "{made}");
    let memory = std::fs::read_to_string(h.join("mem/memory.jsonl")).unwrap();
    assert!(memory.contains("sandbox"), "{memory}");
    // A server with no network still answers; a PyPI server from its venv; git on its repo.
    let echo = said(&mut s, "everything.echo", json!({"message": "offline"}));
    assert!(echo.contains("offline"), "{echo}");
    let now = said(&mut s, "time.get_current_time", json!({"timezone": "UTC"}));
    assert!(now.contains("UTC"), "{now}");
    let log = said(&mut s, "git.git_log", json!({"repo_path": repo}));
    assert!(log.contains("first"), "{log}");
    for up in ["filesystem", "memory", "everything", "time", "git"] {
        let st = super::support::upstream_status(&home, up);
        assert_eq!(st["state"], "running", "{up}: {st}");
    }
}

#[test]
fn the_grants_are_shown_checked_and_a_layer_that_fails_refuses_the_start_naming_it() {
    let fx = fixture();
    let (home, world) = homes(|w| {
        format!(
            "schema_version: 1\nupstreams:\n  fx: {{command: \"{fx}\", args: [--list-log, \"{log}\"], trust_annotations: true, sandbox: {{network: none}}}}\n  broken: {{command: \"{fx}\", sandbox: {{fs: {{read: [\"{missing}\"]}}}}}}\n  open: {{command: \"{fx}\", sandbox: off}}\nprofiles:\n  default: {{allow_mutating_upstreams: true}}\n",
            fx = fx.display(),
            log = w.join("logs/list.log").display(),
            missing = w.join("nowhere").display(),
        )
    });
    let w = world.path();
    std::fs::create_dir_all(w.join("logs")).unwrap();
    let run = |args: &[&str]| {
        let out = home.cmd(args).env("HOME", w.join("home")).output().unwrap();
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    // config validate prints what each server is granted, and which run unsandboxed.
    let (ok, text) = run(&["config", "validate"]);
    assert!(ok, "{text}");
    assert!(
        text.contains(&format!(
            "sandbox fx: sandboxed, network none; writes {}",
            w.join("logs").display()
        )),
        "{text}"
    );
    assert!(text.contains("not sandboxed: open"), "{text}");
    // sandbox check starts it as the daemon would and lists its tools.
    let (ok, text) = run(&["sandbox", "check", "fx"]);
    assert!(ok && text.contains("listed"), "{text}");
    assert!(
        std::fs::read_to_string(w.join("logs/list.log")).is_ok(),
        "the server wrote its log where it was granted"
    );
    let (ok, text) = run(&["sandbox", "check", "broken"]);
    assert!(!ok, "{text}");
    assert!(
        text.contains("the minimal root layer could not be applied") && text.contains("nowhere"),
        "{text}"
    );
    // Through the daemon: the refusal is the upstream's error in status; a running one shows
    // its grants.
    let mut s = session(&home, w, None);
    let r = s.call("broken.echo", json!({"text": "x"}));
    assert!(
        r["error"].is_object() || r["result"]["isError"] == true,
        "{r}"
    );
    let st = super::support::upstream_status(&home, "broken");
    assert!(
        st["last_error"]
            .as_str()
            .unwrap_or("")
            .contains("the minimal root layer could not be applied"),
        "{st}"
    );
    assert_eq!(said(&mut s, "fx.echo", json!({"text": "in"})), "in");
    let st = super::support::upstream_status(&home, "fx");
    assert_eq!(st["sandbox"]["network"], false, "{st}");
    // The log exists by now: its folder is still granted (a server replaces its files through
    // a temp file renamed over them).
    assert_eq!(
        st["sandbox"]["write"],
        json!([w.join("logs").display().to_string()]),
        "{st}"
    );
    // status names the local servers the daemon runs without the sandbox.
    let (_, text) = run(&["status"]);
    assert!(text.contains("not sandboxed: open ("), "{text}");
}

/// `memory_mb` holds the server's whole tree in a memory cgroup: over it, the kernel stops the
/// server, the status says why, and the next call starts it again; where the machine gives the
/// daemon no memory cgroup, the start is refused, never run without the limit.
#[test]
fn memory_mb_holds_a_server_or_refuses_its_start() {
    let fx = fixture();
    let (home, world) = homes(|_| {
        format!(
            "schema_version: 1\nupstreams:\n  fx: {{command: \"{}\", args: [--hostile], trust_annotations: true, sandbox: {{memory_mb: 64}}}}\nprofiles:\n  default: {{allow_mutating_upstreams: true}}\n",
            fx.display()
        )
    });
    let mut s = session(&home, world.path(), None);
    if !mcpb_sandbox::memory_cgroup_available() {
        let r = s.call("fx.echo", json!({"text": "x"}));
        let st = super::support::upstream_status(&home, "fx");
        assert!(
            st["last_error"]
                .as_str()
                .unwrap_or("")
                .contains("memory_mb needs a memory cgroup"),
            "{r} {st}"
        );
        return;
    }
    assert_eq!(said(&mut s, "fx.hog", json!({"mb": 16})), "ok: held 16 MiB");
    let r = s.call("fx.hog", json!({"mb": 256}));
    assert!(
        r["error"].is_object() || r["result"]["isError"] == true,
        "256 MiB in a 64 MiB sandbox: {r}"
    );
    assert!(
        wait_until(Duration::from_secs(5), || {
            home.log().contains("went over its sandbox's memory_mb")
        }),
        "{}",
        home.log()
    );
    assert_eq!(said(&mut s, "fx.echo", json!({"text": "again"})), "again");
}

/// A sandboxed server is stopped the way an unsandboxed one is: the stop ladder's SIGTERM
/// reaches it inside its namespace (a server that ignores the end of its input exits on its
/// own terms), and the pid it names is its host pid, gone once the stop returns.
#[test]
fn a_sandboxed_server_gets_the_stop_ladders_term_and_names_its_host_pid() {
    let fx = fixture();
    let (home, world) = homes(|w| {
        format!(
            "schema_version: 1\nupstreams:\n  fx: {{command: \"{fx}\", trust_annotations: true, sandbox: standard}}\n  deaf: {{command: \"{fx}\", args: [--ignore-eof], trust_annotations: true, sandbox: standard}}\n  trapper: {{command: sh, args: [-c, \"trap 'echo term > {out}/got; exit 0' TERM; exec 3<&0; {fx} --ignore-eof <&3 & wait\"], trust_annotations: true, sandbox: {{fs: {{read: [\"{bin}\"], write: [\"{out}\"]}}}}}}\nprofiles:\n  default: {{allow_mutating_upstreams: true}}\n",
            fx = fx.display(),
            // The fixture runs from the script, not as the command: a checkout under /tmp
            // (hidden by the private /tmp) is granted by hand.
            bin = fx.parent().unwrap().display(),
            out = w.join("out").display(),
        )
    });
    let w = world.path();
    std::fs::create_dir_all(w.join("out")).unwrap();
    let mut s = session(&home, w, None);
    assert_eq!(said(&mut s, "trapper.echo", json!({"text": "x"})), "x");
    assert_eq!(said(&mut s, "deaf.echo", json!({"text": "y"})), "y");
    let pid = s.call("fx.pid", json!({}))["result"]["structuredContent"]["pid"]
        .as_u64()
        .unwrap();
    // The host's /proc knows it by that pid, as pid 1 of its own namespace (nothing of the
    // sandbox runs beside it), and its parent is the sandbox's one helper, the daemon's child.
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let nspid = status.lines().find(|l| l.starts_with("NSpid:")).unwrap();
    assert!(
        nspid.split_whitespace().skip(1).collect::<Vec<_>>() == [pid.to_string().as_str(), "1"],
        "{nspid}"
    );
    let parent = |p: u64| -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap();
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        after.split(' ').nth(1).unwrap().parse().unwrap()
    };
    assert_eq!(parent(parent(pid)), home.daemon_pid().unwrap() as u64);
    drop(s);
    assert!(home.run(&["stop"]).status.success());
    assert_eq!(
        std::fs::read_to_string(w.join("out/got")).unwrap_or_default(),
        "term\n",
        "the server's TERM trap did not run"
    );
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "pid {pid} outlived the stop"
    );
    // A server with no handler for TERM (PID 1 of a namespace ignores what it does not
    // handle) ends on the ladder's TERM all the same, told as a TERM's end, not the KILL's.
    let log = home.log();
    let ended: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("upstream process ended") && l.contains("deaf"))
        .collect();
    assert!(
        ended.len() == 1 && ended[0].contains("exit code 143"),
        "{ended:?}"
    );
}

/// `sandbox check` traces the server's system calls and says what the kernel refused it: a
/// file the sandbox hides (one missing on the host too is not a refusal), a write outside the
/// grants, a connection with no network (the test's own listener sees nothing); a line the
/// server prints to look like the tracer's is not believed.
#[test]
fn sandbox_check_says_what_the_kernel_refused_the_server() {
    let fx = fixture();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let (home, world) = homes(|w| {
        let script = format!(
            "echo 'mcp-broker sandbox: denied: ENOENT open {w}/secret.txt' >&2; cat {w}/home/.ssh/id_rsa {w}/nothing-here; echo x > {w}/outside.txt; python3 -c 'import socket; socket.create_connection((\\\"127.0.0.1\\\", {port}), 2)'; exec {fx}",
            w = w.display(),
            fx = fx.display()
        );
        format!(
            "schema_version: 1\nupstreams:\n  peek: {{command: sh, args: [-c, \"{script}\"], sandbox: {{network: none, fs: {{read: [\"{bin}\"]}}}}}}\nprofiles:\n  default: {{allow_mutating_upstreams: true}}\n",
            bin = fx.parent().unwrap().display(),
        )
    });
    let w = world.path();
    plant(&w.join("home/.ssh/id_rsa"), "-----BEGIN PRIVATE KEY-----");
    plant(&w.join("outside.txt"), "unchanged");
    plant(
        &w.join("secret.txt"),
        "a server's forged refusal must not name it",
    );
    let out = home
        .cmd(&["sandbox", "check", "peek"])
        .env("HOME", w.join("home"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    for line in [
        format!(
            "peek: denied: open {}: hidden by the sandbox",
            w.join("home/.ssh/id_rsa").display()
        ),
        format!(
            "peek: denied: open {}: read-only in the sandbox",
            w.join("outside.txt").display()
        ),
        format!("peek: denied: connect 127.0.0.1:{port}: no network (network: none)"),
    ] {
        assert!(text.contains(&line), "{line}\n{text}");
    }
    assert!(!text.contains("nothing-here"), "{text}");
    assert!(
        !text.contains("secret.txt"),
        "a forged line was believed: {text}"
    );
    assert!(text.contains("listed"), "{text}");
    assert_eq!(
        std::fs::read_to_string(w.join("outside.txt")).unwrap(),
        "unchanged"
    );
    assert!(listener.accept().is_err(), "the listener saw a connection");
    // The check taught the catalog: a first session lists the server's tools with nothing
    // started.
    let mut shim = session(&home, w, None);
    let names = shim.tool_names();
    assert!(names.iter().any(|n| n == "peek.echo"), "{names:?}");
    let peek = super::support::upstream_status(&home, "peek");
    assert!(peek["pids"].as_array().is_none_or(Vec::is_empty), "{peek}");
    assert_ne!(peek["state"], "running", "{peek}");
}

/// A sandboxed server is PID 1 of its namespace and dies with the sandbox's helper by its
/// death signal: it may not take that signal off (the filter refuses it), so killing the
/// daemon still ends it and everything it started.
#[test]
fn a_server_cannot_take_off_its_death_signal_and_outlive_the_daemon() {
    let fx = fixture();
    let (home, world) = homes(|w| {
        format!(
            "schema_version: 1\nupstreams:\n  sticky: {{command: python3, args: [\"{script}\"], trust_annotations: true, sandbox: {{fs: {{read: [\"{bin}\", \"{script}\"], write: [\"{out}\"]}}}}}}\nprofiles:\n  default: {{allow_mutating_upstreams: true}}\n",
            script = w.join("sticky.py").display(),
            bin = fx.parent().unwrap().display(),
            out = w.join("out").display(),
        )
    });
    let w = world.path();
    std::fs::create_dir_all(w.join("out")).unwrap();
    // As PID 1: take off the death signal, say how that went, then become the fixture.
    std::fs::write(
        w.join("sticky.py"),
        format!(
            "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nrc = libc.prctl(1, 0, 0, 0, 0)\nopen({out:?}, 'w').write('%d %d %d' % (os.getpid(), rc, ctypes.get_errno()))\nos.execv({fx:?}, [{fx:?}, '--ignore-eof', '--hostile'])\n",
            out = w.join("out/prctl").display().to_string(),
            fx = fx.display().to_string(),
        ),
    )
    .unwrap();
    let mut s = session(&home, w, None);
    let pid = s.call("sticky.pid", json!({}))["result"]["structuredContent"]["pid"]
        .as_u64()
        .unwrap();
    let said = std::fs::read_to_string(w.join("out/prctl")).unwrap();
    let eperm = rustix::io::Errno::PERM.raw_os_error();
    assert_eq!(said, format!("1 -1 {eperm}"), "pid, rc, errno");
    let left = text(&s.call("sticky.leave_behind", json!({"seconds": 4712})));
    assert!(left.starts_with("ok"), "{left}");
    assert!(
        wait_until(Duration::from_secs(5), || sleepers(4712) > 0),
        "the sleeper never ran"
    );
    let daemon = home.daemon_pid().unwrap();
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(daemon as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || {
            !Path::new(&format!("/proc/{pid}")).exists() && sleepers(4712) == 0
        }),
        "the server (pid {pid}) or what it started outlived the daemon"
    );
}
