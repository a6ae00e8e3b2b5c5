//! `mcp-broker stdio`: the one entry a client config needs. It connects to the daemon (starting
//! one if needed), sends the hello, then copies bytes both ways without parsing them.
//!
//! Plain threads and blocking I/O: two copies need no runtime, and start-up time is part of every
//! client launch.

use std::io::{BufRead, Read, Write};
use std::net::Shutdown;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use std::io::IoSlice;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;

use mcpb_config::Settings;
use mcpb_protocol::{HelloKind, HelloReply};
use rustix::fs::FileType;
use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};

use crate::daemon_client::{connect_or_start, handshake, is_gone};
use crate::fail;

/// The longest pause between hellos to a daemon that went away during one (100, 200, 400, 800 ms).
const HELLO_RETRY_LIMIT: std::time::Duration = std::time::Duration::from_millis(800);

/// `mcp-broker stdio`: a session opened with the daemon (started when none runs), then the
/// client's stdin and stdout handed to it, or relayed byte for byte where they cannot be.
pub(crate) fn run(
    settings: &Settings,
    profile: Option<String>,
    client: Option<String>,
) -> ExitCode {
    if let Some(c) = client.as_deref()
        && profile.is_none()
        && !settings.clients.contains_key(c)
    {
        unknown_client(settings, c);
    }
    let cwd = std::env::current_dir()
        .ok()
        .map(|p| p.display().to_string());
    let pass_fds = std::env::var_os(mcpb_config::env::RELAY).is_none_or(|v| v != "bytes")
        && passable(std::io::stdin().as_fd())
        && passable(std::io::stdout().as_fd());
    let kind = HelloKind::Session {
        profile,
        client,
        cwd,
        pass_fds,
        facade: false,
    };
    let from_daemon = match open_session(settings, &kind) {
        Ok(s) => s,
        Err(code) => return code,
    };
    if pass_fds {
        return hand_over(settings, from_daemon);
    }
    relay(settings, from_daemon)
}

/// Said on stderr: the client shows it in its server log; the session still opens.
fn unknown_client(settings: &Settings, c: &str) {
    let known: Vec<&str> = settings.clients.keys().map(String::as_str).collect();
    errln!("mcp-broker: client {c:?} has no profile in `clients:`; it gets the `default` profile");
    errln!(
        "hint: clients named in the config: {}; add `clients: {{{c}: {{profile: PROFILE}}}}` or pass --profile",
        if known.is_empty() {
            "(none)".to_string()
        } else {
            known.join(", ")
        }
    );
}

/// The hello, and the daemon's yes. A daemon killed a moment ago can still hold its socket
/// while its last thread exits: the connection is accepted, then reset. Nothing of the
/// client's has been read yet, so the hello is tried again; by then the socket is gone and a
/// new daemon is started.
fn open_session(
    settings: &Settings,
    kind: &HelloKind,
) -> Result<std::io::BufReader<UnixStream>, ExitCode> {
    let mut pause = std::time::Duration::from_millis(100);
    let (reply, from_daemon) = loop {
        let stream = connect_or_start(settings).map_err(|e| {
            fail(
                &format!("mcp-broker: cannot reach the daemon: {e:#}"),
                &[&format!(
                    "run `mcp-broker daemon` in a terminal to see why it does not start (log: {})",
                    settings.runtime.log_path().display()
                )],
            )
        })?;
        match handshake(stream, kind.clone()) {
            Ok(r) => break r,
            Err(e) if is_gone(&e) && pause <= HELLO_RETRY_LIMIT => {
                std::thread::sleep(pause);
                pause *= 2;
            }
            Err(e) => {
                return Err(fail(
                    &format!("mcp-broker: the daemon did not accept the session: {e:#}"),
                    &["restart it with `mcp-broker stop`; the next client start brings it back"],
                ));
            }
        }
    };
    if !reply.ok {
        let hints: Vec<&str> = reply.hints.iter().map(String::as_str).collect();
        return Err(fail(
            &format!(
                "mcp-broker: the daemon refused the session: {}",
                reply.error.as_deref().unwrap_or("no reason given")
            ),
            &hints,
        ));
    }
    Ok(from_daemon)
}

/// Relays bytes both ways until the daemon closes the session.
fn relay(settings: &Settings, mut from_daemon: std::io::BufReader<UnixStream>) -> ExitCode {
    let Ok(mut to_daemon) = from_daemon.get_ref().try_clone() else {
        return fail("mcp-broker: cannot clone the daemon socket", &[]);
    };
    let input_done = Arc::new(AtomicBool::new(false));
    let done = input_done.clone();
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match stdin.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if to_daemon.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
            }
        }
        // Half-close: the daemon answers what is in flight, then closes its side.
        done.store(true, Ordering::SeqCst);
        let _ = to_daemon.shutdown(Shutdown::Write);
    });
    let mut stdout = std::io::stdout().lock();
    loop {
        let chunk = match from_daemon.fill_buf() {
            Ok([]) => break,
            Ok(chunk) => chunk,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let n = chunk.len();
        if stdout.write_all(chunk).is_err() || stdout.flush().is_err() {
            // The client stopped reading: nothing left to do for it.
            return ExitCode::SUCCESS;
        }
        from_daemon.consume(n);
    }
    if input_done.load(Ordering::SeqCst) {
        ExitCode::SUCCESS
    } else {
        fail(
            "mcp-broker: the daemon closed the session unexpectedly",
            &[&format!(
                "check `mcp-broker status` and the log {}",
                settings.runtime.log_path().display()
            )],
        )
    }
}

/// Pipes and sockets can be served by the daemon directly; a terminal or a file cannot.
fn passable(fd: BorrowedFd<'_>) -> bool {
    rustix::fs::fstat(fd)
        .map(|st| {
            matches!(
                FileType::from_raw_mode(st.st_mode),
                FileType::Fifo | FileType::Socket
            )
        })
        .unwrap_or(false)
}

/// Gives stdin and stdout to the daemon and waits for the session to end. The daemon then
/// answers the client itself, and this process only keeps the client's view of "the server
/// process" alive.
fn hand_over(settings: &Settings, mut control: std::io::BufReader<UnixStream>) -> ExitCode {
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    let fds = [stdin.as_fd(), stdout.as_fd()];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
    let mut ancillary = SendAncillaryBuffer::new(&mut space);
    if !ancillary.push(SendAncillaryMessage::ScmRights(&fds)) {
        return fail("mcp-broker: cannot prepare the descriptor hand-over", &[]);
    }
    let sent = rustix::net::sendmsg(
        control.get_ref(),
        &[IoSlice::new(b"F")],
        &mut ancillary,
        SendFlags::empty(),
    );
    if let Err(e) = sent {
        return fail(
            &format!("mcp-broker: cannot hand stdio to the daemon: {e}"),
            &["set MCP_BROKER_RELAY=bytes to relay through this process instead"],
        );
    }
    let mut line = String::new();
    match control.read_line(&mut line) {
        Ok(n) if n > 0 => {
            let reply = serde_json::from_str::<HelloReply>(&line).unwrap_or_default();
            if let Some(error) = &reply.error {
                let hints: Vec<&str> = reply.hints.iter().map(String::as_str).collect();
                return fail(&format!("mcp-broker: session ended: {error}"), &hints);
            }
            ExitCode::from(u8::try_from(reply.exit.unwrap_or(1)).unwrap_or(1))
        }
        _ => fail(
            "mcp-broker: the daemon closed the session unexpectedly",
            &[&format!(
                "check `mcp-broker status` and the log {}",
                settings.runtime.log_path().display()
            )],
        ),
    }
}
