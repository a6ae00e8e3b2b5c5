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

use mcpb_config::Settings;
use mcpb_protocol::HelloKind;

use crate::daemon_client::{connect_or_start, handshake};
use crate::fail;

pub fn run(settings: &Settings, profile: Option<String>, client: Option<String>) -> ExitCode {
    let stream = match connect_or_start(settings) {
        Ok(s) => s,
        Err(e) => {
            return fail(
                &format!("mcp-broker: cannot reach the daemon: {e:#}"),
                &[&format!(
                    "run `mcp-broker daemon` in a terminal to see why it does not start (log: {})",
                    settings.runtime.log_path().display()
                )],
            );
        }
    };
    let cwd = std::env::current_dir()
        .ok()
        .map(|p| p.display().to_string());
    let kind = HelloKind::Session {
        profile,
        client,
        cwd,
    };
    let (reply, mut from_daemon) = match handshake(stream, kind) {
        Ok(r) => r,
        Err(e) => {
            return fail(
                &format!("mcp-broker: the daemon did not accept the session: {e:#}"),
                &["restart it with `mcp-broker stop`; the next client start brings it back"],
            );
        }
    };
    if !reply.ok {
        let hints: Vec<&str> = reply.hints.iter().map(String::as_str).collect();
        return fail(
            &format!(
                "mcp-broker: the daemon refused the session: {}",
                reply.error.as_deref().unwrap_or("no reason given")
            ),
            &hints,
        );
    }

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
