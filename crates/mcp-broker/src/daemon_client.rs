//! Talking to the daemon from the CLI: connecting, the hello exchange, admin commands, and
//! starting a daemon when none answers (race-safe: the daemon's lock decides who runs).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use mcpb_config::{ConfigSource, Settings};
use mcpb_protocol::{AdminCommand, BROKER_PROTOCOL_VERSION, Hello, HelloKind, HelloReply};

pub(crate) fn connect(settings: &Settings) -> std::io::Result<UnixStream> {
    UnixStream::connect(settings.runtime.socket_path())
}

/// Sends a hello and reads the one-line reply. Returns the reader so buffered bytes that came
/// after the reply are not lost.
pub(crate) fn handshake(
    stream: UnixStream,
    kind: HelloKind,
) -> anyhow::Result<(HelloReply, BufReader<UnixStream>)> {
    handshake_within(stream, kind, HELLO_WAIT)
}

/// How long a hello's answer may take: the daemon answers at once, but for a command that
/// starts servers.
const HELLO_WAIT: Duration = Duration::from_secs(15);
/// `measure` starts every server whose list is unknown and waits for it (each within its own
/// start-up timeout, all at once): dozens of servers on a small machine take minutes.
const MEASURE_WAIT: Duration = Duration::from_secs(600);

fn handshake_within(
    stream: UnixStream,
    kind: HelloKind,
    wait: Duration,
) -> anyhow::Result<(HelloReply, BufReader<UnixStream>)> {
    let hello = Hello {
        mcp_broker: BROKER_PROTOCOL_VERSION,
        kind,
        sender_version: env!("CARGO_PKG_VERSION").to_string(),
        pid: std::process::id(),
    };
    let mut w = stream
        .try_clone()
        .context("cannot clone the daemon socket")?;
    // A daemon that refuses the connection says why and closes without reading: the hello's
    // write can fail with its reason already waiting to be read.
    let written = w.write_all(&hello.to_line());
    stream.set_read_timeout(Some(wait))?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    let read = reader.read_line(&mut line);
    if let (Err(e), Err(_) | Ok(0)) = (written, &read) {
        return Err(e).context("the daemon closed the connection before the hello");
    }
    let n = read.context("no answer from the daemon")?;
    if n == 0 {
        return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof))
            .context("the daemon closed the connection without answering the hello");
    }
    reader.get_ref().set_read_timeout(None)?;
    let reply: HelloReply = serde_json::from_str(&line)
        .with_context(|| format!("unreadable hello reply from the daemon: {}", line.trim()))?;
    Ok((reply, reader))
}

pub(crate) fn admin(
    settings: &Settings,
    command: AdminCommand,
) -> anyhow::Result<Option<HelloReply>> {
    admin_about(settings, command, None)
}

/// An admin command about one profile. `None` when no daemon runs.
pub(crate) fn admin_about(
    settings: &Settings,
    command: AdminCommand,
    profile: Option<&str>,
) -> anyhow::Result<Option<HelloReply>> {
    admin_on(settings, command, profile, None)
}

/// An admin command about one upstream. `None` when no daemon runs.
pub(crate) fn admin_upstream(
    settings: &Settings,
    command: AdminCommand,
    upstream: &str,
) -> anyhow::Result<Option<HelloReply>> {
    admin_on(settings, command, None, Some(upstream))
}

fn admin_on(
    settings: &Settings,
    command: AdminCommand,
    profile: Option<&str>,
    upstream: Option<&str>,
) -> anyhow::Result<Option<HelloReply>> {
    let stream = match connect(settings) {
        Ok(s) => s,
        Err(e) if is_absent(&e) => return Ok(None),
        Err(e) => return Err(e).context("cannot connect to the daemon"),
    };
    let wait = if command == AdminCommand::Measure {
        MEASURE_WAIT
    } else {
        HELLO_WAIT
    };
    let (reply, _) = handshake_within(
        stream,
        HelloKind::Admin {
            command: command.as_str().to_string(),
            profile: profile.map(str::to_string),
            upstream: upstream.map(str::to_string),
        },
        wait,
    )?;
    Ok(Some(reply))
}

/// The daemon went away during the hello (reset, closed, or a broken pipe): it was exiting
/// when the connection was made.
pub(crate) fn is_gone(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>().is_some_and(|io| {
            matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::BrokenPipe
                    | std::io::ErrorKind::UnexpectedEof
            )
        })
    })
}

pub(crate) fn is_absent(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
    )
}

/// Connects, starting a daemon first when none answers. Several callers may race here: each
/// spawns a daemon, the daemon's lock lets one of them run, and every caller connects to it.
pub(crate) fn connect_or_start(settings: &Settings) -> anyhow::Result<UnixStream> {
    match connect(settings) {
        Ok(s) => return Ok(s),
        Err(e) if is_absent(&e) => {}
        Err(e) => return Err(e).context("cannot connect to the daemon"),
    }
    let spawned = spawn_daemon(settings)?;
    wait_for_socket(settings, Duration::from_secs(15), &spawned)
}

/// `connect_or_start` for a command a person ran: a daemon it starts is announced (it keeps
/// running after the command), and a running daemon that serves another config file than the
/// one this command read is said, since its answers come from that file.
pub(crate) fn connect_or_start_for_cli(settings: &Settings) -> anyhow::Result<UnixStream> {
    match connect(settings) {
        Ok(s) => {
            warn_if_other_config(settings);
            return Ok(s);
        }
        Err(e) if is_absent(&e) => {}
        Err(e) => return Err(e).context("cannot connect to the daemon"),
    }
    let spawned = spawn_daemon(settings)?;
    let stream = wait_for_socket(settings, Duration::from_secs(15), &spawned)?;
    errln!(
        "mcp-broker: started the daemon for {}; it keeps running (`mcp-broker stop` ends it)",
        settings.source
    );
    Ok(stream)
}

fn warn_if_other_config(settings: &Settings) {
    let Ok(Some(reply)) = admin(settings, AdminCommand::Status) else {
        return;
    };
    let serving = reply
        .data
        .as_ref()
        .and_then(|d| d["daemon"]["config"].as_str())
        .unwrap_or("")
        .to_string();
    let wanted = settings.source.to_string();
    // The same file named two ways (relative, through a link) is the same config.
    let same = |a: &str, b: &str| {
        a == b
            || matches!(
                (std::fs::canonicalize(a), std::fs::canonicalize(b)),
                (Ok(x), Ok(y)) if x == y
            )
    };
    if !serving.is_empty() && !same(&serving, &wanted) {
        errln!("mcp-broker: the running daemon serves {serving}, not {wanted}");
        errln!("hint: `mcp-broker stop`, then run this again to serve {wanted}");
    }
}

pub(crate) fn wait_for_socket(
    settings: &Settings,
    limit: Duration,
    spawned: &AtomicI32,
) -> anyhow::Result<UnixStream> {
    let deadline = Instant::now() + limit;
    let mut pause = Duration::from_millis(1);
    loop {
        match connect(settings) {
            Ok(s) => return Ok(s),
            Err(e) if is_absent(&e) && Instant::now() < deadline => {
                let code = spawned.load(Ordering::SeqCst);
                if code != RUNNING && code != ALREADY_RUNNING {
                    bail!("the daemon exited (code {code}) before it answered");
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            Err(e) => {
                return Err(e).with_context(|| {
                    format!(
                        "the daemon did not come up within {} s; see {}",
                        limit.as_secs(),
                        settings.runtime.log_path().display()
                    )
                });
            }
        }
    }
}

/// Starts `mcp-broker daemon` detached from the caller's process group, logging to the log file.
pub(crate) fn spawn_daemon(settings: &Settings) -> anyhow::Result<Arc<AtomicI32>> {
    settings
        .runtime
        .ensure()
        .with_context(|| format!("cannot create {}", settings.runtime.root.display()))?;
    let exe = std::env::current_exe().context("cannot find the mcp-broker binary")?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(settings.runtime.log_path())
        .with_context(|| format!("cannot open {}", settings.runtime.log_path().display()))?;
    let mut cmd = Command::new(exe);
    if let ConfigSource::File(path) = &settings.source {
        cmd.arg("--config").arg(absolute(path));
    }
    // A cleared environment: the daemon outlives the client that happened to start it and
    // must not carry that client's secrets to every upstream.
    cmd.env_clear();
    let names = settings.daemon_env_names();
    let wanted = mcpb_upstream::BASE_ALLOWLIST
        .iter()
        .copied()
        .chain(names.iter().map(String::as_str));
    for name in wanted {
        if let Some(value) = std::env::var_os(name) {
            cmd.env(name, value);
        }
    }
    for (name, value) in std::env::vars_os() {
        if name
            .to_str()
            .is_some_and(|n| n.starts_with(mcpb_config::env::PREFIX))
        {
            cmd.env(name, value);
        }
    }
    cmd.envs(mcpb_sandbox::coverage::profile_env());
    let tunables = std::env::var(crate::heap::VAR).ok();
    cmd.arg("daemon")
        .env(crate::heap::VAR, crate::heap::tunables(tunables.as_deref()))
        .env(mcpb_config::env::HOME, &settings.runtime.root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .process_group(0);
    let mut child = cmd.spawn().context("cannot start the daemon")?;
    // Reap it if it exits while we live (e.g. it lost the start race), and say how it ended:
    // a waiter need not wait out its limit for a daemon that is gone.
    let exit = Arc::new(AtomicI32::new(RUNNING));
    let seen = exit.clone();
    std::thread::spawn(move || {
        let code = child.wait().ok().and_then(|s| s.code()).unwrap_or(-1);
        seen.store(code, Ordering::SeqCst);
    });
    Ok(exit)
}

/// Waits up to `limit` for a spawned daemon to exit; whether it did.
pub(crate) fn wait_for_exit(spawned: &AtomicI32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while spawned.load(Ordering::SeqCst) == RUNNING {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// The exit code of a spawned daemon while it has none.
const RUNNING: i32 = i32::MIN;
/// The code of a daemon that found another running for the same root: that one will answer.
const ALREADY_RUNNING: i32 = 3;

fn absolute(p: &Path) -> std::path::PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Daemons of this user whose socket is gone (their runtime dir was deleted or moved while
/// they ran): nobody can reach them, yet they may hold upstreams and a port. (pid, root.)
pub(crate) fn lost_daemons() -> Vec<(u32, String)> {
    let me = rustix::process::getuid().as_raw();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let dir = p.path();
        let owner = std::fs::metadata(&dir).map(|m| std::os::unix::fs::MetadataExt::uid(&m));
        if owner.ok() != Some(me) || pid == std::process::id() {
            continue;
        }
        let Ok(cmdline) = std::fs::read(dir.join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let ours = args
            .first()
            .and_then(|a| std::path::Path::new(std::ffi::OsStr::from_bytes(a)).file_name())
            .is_some_and(|n| n == "mcp-broker");
        if !ours || !args.iter().any(|a| *a == b"daemon") {
            continue;
        }
        let environ = std::fs::read(dir.join("environ")).unwrap_or_default();
        let Some(root) = environ
            .split(|b| *b == 0)
            .find_map(|v| {
                v.strip_prefix(mcpb_config::env::HOME.as_bytes())?
                    .strip_prefix(b"=")
            })
            .map(|r| String::from_utf8_lossy(r).into_owned())
        else {
            continue;
        };
        let socket = mcpb_config::RuntimeLayout::new(std::path::PathBuf::from(&root)).socket_path();
        if !socket.exists() {
            out.push((pid, root));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use anyhow::Context;

    fn with_context(kind: std::io::ErrorKind) -> anyhow::Error {
        Err::<(), _>(std::io::Error::from(kind))
            .context("no answer from the daemon")
            .unwrap_err()
    }

    #[test]
    fn a_hello_cut_by_a_dying_daemon_is_told_from_other_failures() {
        for kind in [
            std::io::ErrorKind::ConnectionReset,
            std::io::ErrorKind::BrokenPipe,
            std::io::ErrorKind::UnexpectedEof,
        ] {
            assert!(super::is_gone(&with_context(kind)), "{kind:?}");
        }
        for kind in [
            std::io::ErrorKind::WouldBlock,
            std::io::ErrorKind::PermissionDenied,
        ] {
            assert!(!super::is_gone(&with_context(kind)), "{kind:?}");
        }
        assert!(!super::is_gone(&anyhow::anyhow!("unreadable hello reply")));
    }
}
