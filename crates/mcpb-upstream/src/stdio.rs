//! The stdio transport: a child process in its own process group, a writer task feeding its
//! stdin, a reader task handing its stdout's frames to the instance, a stderr task feeding the
//! log, and a supervisor task that owns the child and runs the stop ladder.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::future::BoxFuture;
use mcpb_config::UpstreamSettings;
use mcpb_protocol::{FrameError, FrameReader};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{Notify, mpsc, oneshot};

use crate::UpstreamError;
use crate::inbound::{ReadCtx, dispatch, fail_all};
use crate::ledger::Ledger;
use crate::process::{StopTimings, describe, signal_group, stop_ladder};
use crate::transport::{Channels, Peer, Transport};

/// Bad lines (not JSON-RPC, or over the frame cap) after which an upstream is stopped as
/// unhealthy: one stray log line is noise, a stream of them means it is not speaking MCP.
pub(crate) const MAX_BAD_LINES: u32 = 100;

/// A stdio upstream's process as it will be started.
pub(crate) struct StdioProcess {
    pub settings: UpstreamSettings,
    /// The whole environment of the child (it starts from a cleared one).
    pub env: BTreeMap<String, String>,
    pub timings: StopTimings,
    pub ledger: Option<Ledger>,
    /// Where the process's last stderr lines go: the upstream's, so they outlive an instance
    /// that failed to start or crashed (the status and the error show them).
    pub stderr_tail: Arc<crate::stderr::StderrTail>,
    /// A sandboxed server's runtime root and grants.
    pub sandbox: Option<crate::sandboxed::Prepared>,
}

impl Transport for StdioProcess {
    fn open(self: Box<Self>, ch: Channels) -> BoxFuture<'static, Result<Peer, UpstreamError>> {
        Box::pin(async move { self.start(ch) })
    }
}

impl StdioProcess {
    fn start(self, ch: Channels) -> Result<Peer, UpstreamError> {
        let name = self.settings.name.clone();
        let spawn_error = |reason: &str| UpstreamError::Spawn {
            upstream: name.clone(),
            command: self.settings.command.clone().unwrap_or_default(),
            reason: reason.into(),
        };
        let (mut child, cgroup) =
            crate::process::spawn(&self.settings, &self.env, self.sandbox.as_ref())?;
        // Without a pid there is no process group to stop: never signal group 0 (our own).
        let Some(pid) = child.id() else {
            return Err(spawn_error("it exited before it could be supervised"));
        };
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(spawn_error("pipes were not set up"));
        };
        let (close_stdin_tx, close_stdin_rx) = oneshot::channel::<()>();
        if let Some(ledger) = &self.ledger {
            ledger.record(&name, pid);
        }
        self.stderr_tail.clear();
        let read = ch.read;
        tokio::spawn(write_loop(
            name.clone(),
            stdin,
            ch.inbox,
            close_stdin_rx,
            self.settings.call_timeout.max(Duration::from_millis(100)),
            read.stop.clone(),
        ));
        tokio::spawn(read_loop(stdout, read.clone()));
        tokio::spawn(crate::stderr::stderr_loop(
            name.clone(),
            stderr,
            self.stderr_tail.clone(),
        ));
        let (timings, ledger, permits, exit_tx) = (self.timings, self.ledger, ch.permits, ch.exit);
        tokio::spawn(async move {
            let status = tokio::select! {
                s = child.wait() => describe(&s),
                _ = read.stop.notified() => {
                    let _ = close_stdin_tx.send(());
                    stop_ladder(&mut child, timings).await
                }
            };
            // The leader is gone; sweep whatever it left in its group.
            signal_group(pid, rustix::process::Signal::KILL);
            read.alive.store(false, Ordering::SeqCst);
            let gone = tokio::task::spawn_blocking(move || {
                crate::ledger::wait_group_gone(pid, Duration::from_secs(2))
            })
            .await
            .unwrap_or(false);
            drop(permits);
            if gone {
                if let Some(ledger) = ledger {
                    ledger.forget(pid);
                }
            } else {
                tracing::error!(upstream = %read.name, pgid = pid, "process group still has members after SIGKILL");
            }
            // A sandboxed server's memory cgroup goes with it; over its memory_mb, the
            // kernel stopped it, which the status says.
            let mut status = status;
            if let Some(cg) = cgroup {
                let oom = cg.oom_killed();
                let _ = tokio::task::spawn_blocking(move || cg.remove()).await;
                if oom {
                    status.push_str("; it went over its sandbox's memory_mb");
                }
            }
            tracing::info!(upstream = %read.name, pid, %status, "upstream process ended");
            let _ = exit_tx.send(Some(status));
            fail_all(&read.pending);
        });
        Ok(Peer::Process { pid })
    }
}

/// Queued messages appended to one write up to about this size; the rest go in the next.
const BATCH_BYTES: usize = 64 * 1024;

/// Feeds the child's stdin. A write that makes no progress for `stall` means the upstream
/// stopped reading its input: that is its fault, so it is stopped as unhealthy (its callers fail
/// at once and the next call starts a fresh process) rather than holding every queued call.
pub(crate) async fn write_loop(
    name: String,
    stdin: impl AsyncWrite + Unpin,
    mut inbox: mpsc::Receiver<Vec<u8>>,
    mut close: oneshot::Receiver<()>,
    stall: Duration,
    stop: Arc<Notify>,
) {
    // No buffer of its own: a message is written from its own allocation, and messages queued
    // behind it are appended to that one for a single write. A `BufWriter` held 8 KiB for every
    // running upstream, most of them idle (320 KiB in front of 40 servers).
    // A message that would take a batch past its size waits for the next write: it is never
    // copied into a smaller one's buffer (a frame can be megabytes).
    let mut out = stdin;
    let mut held: Option<Vec<u8>> = None;
    loop {
        let mut msg = match held.take() {
            Some(m) => m,
            None => tokio::select! {
                biased;
                _ = &mut close => break,
                msg = inbox.recv() => match msg {
                    Some(m) => m,
                    None => break,
                },
            },
        };
        let batch = async {
            while msg.len() < BATCH_BYTES {
                let Ok(more) = inbox.try_recv() else { break };
                if msg.len() + more.len() > BATCH_BYTES {
                    held = Some(more);
                    break;
                }
                msg.extend_from_slice(&more);
            }
            out.write_all(&msg).await?;
            out.flush().await
        };
        match tokio::time::timeout(stall, batch).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return,
            Err(_) => {
                tracing::error!(upstream = %name, stalled_ms = stall.as_millis(), "upstream stopped reading its input; stopping it as unhealthy");
                stop.notify_one();
                return;
            }
        }
    }
    let _ = out.flush().await;
    let _ = out.shutdown().await;
}

pub(crate) async fn read_loop(stdout: impl AsyncRead + Unpin, ctx: Arc<ReadCtx>) {
    // Held (zeroed, so resident) by every running upstream, most of them idle: 2 KiB takes a
    // usual answer, or a dozen small pipelined ones, in one read; a large answer costs a few
    // reads more (tokio's default of 8 KiB was 240 KiB more in front of 40 servers).
    let mut frames = FrameReader::new(BufReader::with_capacity(2 * 1024, stdout), ctx.limit);
    let mut bad_lines = 0u32;
    loop {
        if bad_lines >= MAX_BAD_LINES {
            tracing::error!(upstream = %ctx.name, bad_lines, "upstream keeps writing lines that are not JSON-RPC; stopping it as unhealthy");
            break;
        }
        let frame = match frames.next_frame().await {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(FrameError::TooLarge { limit }) => {
                bad_lines += 1;
                tracing::warn!(upstream = %ctx.name, limit, "upstream wrote a line over the frame cap; skipped");
                match frames.skip_rest_of_line().await {
                    Ok(true) => continue,
                    _ => break,
                }
            }
            Err(e) => {
                tracing::error!(upstream = %ctx.name, error = %e, "cannot read upstream output");
                break;
            }
        };
        if !dispatch(&ctx, frame).await {
            bad_lines += 1;
        }
    }
    // Output closed or unusable: make sure the process goes too (a no-op when it already
    // exited), give the supervisor a moment to report the status, then fail what still waits.
    ctx.stop.notify_one();
    let mut exit = ctx.exit.clone();
    let _ = tokio::time::timeout(Duration::from_millis(200), exit.wait_for(Option::is_some)).await;
    ctx.alive.store(false, Ordering::SeqCst);
    fail_all(&ctx.pending);
}
