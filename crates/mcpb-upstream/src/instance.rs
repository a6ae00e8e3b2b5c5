//! One running upstream process: a writer task feeding its stdin, a reader task routing its stdout
//! by rewritten request id, a stderr task feeding the log, and a supervisor task that owns the
//! child and runs the stop ladder.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mcpb_config::UpstreamSettings;
use mcpb_protocol::message::{notification_line, request_line, to_raw};
use mcpb_protocol::{FrameError, FrameReader, revision};
use parking_lot::Mutex;
use serde_json::value::RawValue;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::sync::{Notify, mpsc, oneshot, watch};

use crate::UpstreamError;
pub use crate::inbound::ListChanged;
use crate::inbound::{Pending, PendingCall, ReadCtx, TOKEN_PREFIX, dispatch, fail_all};
use crate::ledger::Ledger;
use crate::link::ClientLink;
use crate::process::{StopTimings, describe, signal_group, stop_ladder};

/// An upstream's answer, kept as raw JSON so it reaches the client exactly as sent.
#[derive(Debug)]
pub enum Reply {
    Result(Box<RawValue>),
    Error(Box<RawValue>),
}

/// A request to send: plain, or a `tools/call` whose tool name and progress token the broker
/// rewrites on the way.
#[derive(Debug, Clone, Copy)]
pub enum Outgoing<'a> {
    Request {
        method: &'a str,
        params: Option<&'a RawValue>,
    },
    ToolCall {
        tool: &'a str,
        params: &'a RawValue,
        /// Extra `_meta` members (key, JSON text) the broker adds for the upstream.
        meta: &'a [(&'a str, &'a str)],
    },
}

/// How long a request may take, and where its side traffic goes.
#[derive(Clone)]
pub struct CallOptions {
    /// Without an answer or progress for this long, the request fails.
    pub idle_timeout: Duration,
    /// The request fails after this long whatever progress it reports.
    pub max_time: Duration,
    pub link: Option<Arc<dyn ClientLink>>,
}

impl CallOptions {
    pub fn plain(timeout: Duration) -> Self {
        Self {
            idle_timeout: timeout,
            max_time: timeout,
            link: None,
        }
    }
}

pub(crate) const STDERR_TAIL: usize = 20;

pub(crate) struct Instance {
    pub(crate) name: String,
    pub(crate) pid: u32,
    pub(crate) outbox: mpsc::Sender<Vec<u8>>,
    pub(crate) pending: Arc<Pending>,
    pub(crate) next_id: AtomicU64,
    pub(crate) alive: Arc<AtomicBool>,
    pub(crate) exit: watch::Receiver<Option<String>>,
    pub(crate) stop: Arc<Notify>,
    pub(crate) stopped_on_purpose: AtomicBool,
    /// When the instance last sent or answered a request, for idle timeouts.
    pub(crate) last_used: Mutex<Instant>,
    pub(crate) protocol_version: Arc<Mutex<String>>,
    /// The upstream speaks 2026-07-28: every request carries the broker's envelope in `_meta`.
    pub(crate) stateless: AtomicBool,
    /// What the upstream said it offers (`capabilities` of its handshake or discovery).
    capabilities: Mutex<Option<serde_json::Value>>,
    /// The client's own `_meta` keys that may travel on besides `progressToken`
    /// (`broker.forward_meta_keys`).
    forward_meta: Vec<String>,
}

impl std::fmt::Debug for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instance")
            .field("name", &self.name)
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

/// What a transport hands over to make an instance.
pub(crate) struct Wiring {
    pub name: String,
    /// Group leader of the process; 0 for a remote upstream.
    pub pid: u32,
    pub outbox: mpsc::Sender<Vec<u8>>,
    pub pending: Arc<Pending>,
    pub alive: Arc<AtomicBool>,
    pub exit: watch::Receiver<Option<String>>,
    pub stop: Arc<Notify>,
    pub protocol_version: Arc<Mutex<String>>,
    pub forward_meta: Vec<String>,
}

pub(crate) struct Launch<'a> {
    pub settings: &'a UpstreamSettings,
    pub env: &'a std::collections::BTreeMap<String, String>,
    pub max_frame_bytes: usize,
    pub timings: StopTimings,
    pub ledger: Option<Ledger>,
    pub on_list_changed: Option<ListChanged>,
    pub on_notice: Option<crate::inbound::Notice>,
    /// Set when the upstream announces a changed tool list; shared by its instances.
    pub tools_stale: Arc<AtomicBool>,
    /// Capacity this process holds (instance and process caps), released when it exits.
    pub permits: Vec<tokio::sync::OwnedSemaphorePermit>,
    pub forward_meta: Vec<String>,
    /// Where the process's last stderr lines go: the upstream's, so they outlive an instance
    /// that failed to start or crashed (the status and the error show them).
    pub stderr_tail: Arc<crate::stderr::StderrTail>,
}

/// Bad lines (not JSON-RPC, or over the frame cap) after which an upstream is stopped as
/// unhealthy: one stray log line is noise, a stream of them means it is not speaking MCP.
const MAX_BAD_LINES: u32 = 100;

impl Instance {
    /// Spawns the process and wires its pipes. The MCP handshake is a separate step.
    pub(crate) fn spawn(launch: Launch<'_>) -> Result<Arc<Self>, UpstreamError> {
        let name = launch.settings.name.clone();
        let mut child = crate::process::spawn(launch.settings, launch.env)?;
        let pid = child.id().unwrap_or(0);
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(UpstreamError::Spawn {
                upstream: name,
                command: launch.settings.command.clone().unwrap_or_default(),
                reason: "pipes were not set up".into(),
            });
        };
        let (outbox, inbox) = mpsc::channel::<Vec<u8>>(1024);
        let (close_stdin_tx, close_stdin_rx) = oneshot::channel::<()>();
        let stop = Arc::new(Notify::new());
        if let Some(ledger) = &launch.ledger {
            ledger.record(&name, pid);
        }
        let (exit_tx, exit_rx) = watch::channel::<Option<String>>(None);
        let pending: Arc<Pending> = Arc::default();
        let alive = Arc::new(AtomicBool::new(true));
        let stderr_tail = launch.stderr_tail.clone();
        stderr_tail.clear();
        let tools_stale = launch.tools_stale.clone();
        let permits = launch.permits;

        tokio::spawn(write_loop(
            name.clone(),
            stdin,
            inbox,
            close_stdin_rx,
            launch.settings.call_timeout.max(Duration::from_millis(100)),
            stop.clone(),
        ));
        tokio::spawn(read_loop(
            stdout,
            Arc::new(ReadCtx {
                name: name.clone(),
                limit: launch.max_frame_bytes,
                pending: pending.clone(),
                outbox: outbox.clone(),
                alive: alive.clone(),
                exit: exit_rx.clone(),
                tools_stale: tools_stale.clone(),
                stop: stop.clone(),
                on_list_changed: launch.on_list_changed.clone(),
                on_notice: launch.on_notice.clone(),
            }),
        ));
        tokio::spawn(crate::stderr::stderr_loop(
            name.clone(),
            stderr,
            stderr_tail.clone(),
        ));

        let timings = launch.timings;
        let sup_pending = pending.clone();
        let sup_alive = alive.clone();
        let sup_name = name.clone();
        let sup_stop = stop.clone();
        let ledger = launch.ledger.clone();
        tokio::spawn(async move {
            let status = tokio::select! {
                s = child.wait() => describe(&s),
                _ = sup_stop.notified() => {
                    let _ = close_stdin_tx.send(());
                    stop_ladder(&mut child, timings).await
                }
            };
            // The leader is gone; sweep whatever it left in its group.
            signal_group(pid, rustix::process::Signal::KILL);
            sup_alive.store(false, Ordering::SeqCst);
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
                tracing::error!(upstream = %sup_name, pgid = pid, "process group still has members after SIGKILL");
            }
            tracing::info!(upstream = %sup_name, pid, %status, "upstream process ended");
            let _ = exit_tx.send(Some(status));
            fail_all(&sup_pending);
        });

        Ok(Self::assemble(Wiring {
            name,
            pid,
            outbox,
            pending,
            alive,
            exit: exit_rx,
            stop,
            protocol_version: Arc::default(),
            forward_meta: launch.forward_meta,
        }))
    }

    /// The instance over wiring a transport has set up (child pipes or HTTP tasks).
    pub(crate) fn assemble(w: Wiring) -> Arc<Self> {
        Arc::new(Self {
            name: w.name,
            pid: w.pid,
            outbox: w.outbox,
            pending: w.pending,
            next_id: AtomicU64::new(1),
            alive: w.alive,
            exit: w.exit,
            stop: w.stop,
            stopped_on_purpose: AtomicBool::new(false),
            last_used: Mutex::new(Instant::now()),
            protocol_version: w.protocol_version,
            stateless: AtomicBool::new(false),
            capabilities: Mutex::default(),
            forward_meta: w.forward_meta,
        })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    pub(crate) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }

    pub(crate) fn protocol_version(&self) -> String {
        self.protocol_version.lock().clone()
    }

    pub(crate) fn capabilities(&self) -> Option<serde_json::Value> {
        self.capabilities.lock().clone()
    }

    fn touch(&self) {
        *self.last_used.lock() = Instant::now();
    }

    /// How long since the last request, or `None` while requests are in flight.
    pub(crate) fn idle_for(&self) -> Option<Duration> {
        if !self.pending.lock().is_empty() {
            return None;
        }
        Some(self.last_used.lock().elapsed())
    }

    pub(crate) fn stopped_on_purpose(&self) -> bool {
        self.stopped_on_purpose.load(Ordering::SeqCst)
    }

    pub(crate) fn exit_description(&self) -> String {
        format!("exited ({})", self.exit_status())
    }

    fn exit_status(&self) -> String {
        self.exit
            .borrow()
            .clone()
            .unwrap_or_else(|| "closed its output".to_string())
    }

    fn exited(&self) -> UpstreamError {
        UpstreamError::Exited {
            upstream: self.name.clone(),
            status: self.exit_status(),
        }
    }

    /// Sends a request with an id of our own and waits for its answer.
    pub(crate) async fn request(
        &self,
        method: &str,
        params: Option<&RawValue>,
        timeout: Duration,
    ) -> Result<Reply, UpstreamError> {
        self.send(
            Outgoing::Request { method, params },
            &CallOptions::plain(timeout),
        )
        .await
    }

    /// Sends a request and waits for its answer. Progress restarts the idle timeout up to the
    /// hard maximum. Dropping the future (the client went away, or cancelled) withdraws the
    /// request and tells the upstream to cancel it.
    pub(crate) async fn send(
        &self,
        outgoing: Outgoing<'_>,
        opts: &CallOptions,
    ) -> Result<Reply, UpstreamError> {
        if !self.is_alive() {
            return Err(self.exited());
        }
        self.touch();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let env = mcpb_protocol::era::broker_envelope();
        let mut env_pairs: Vec<(&str, &str)> = if self.stateless.load(Ordering::Relaxed) {
            env.iter().map(|(k, v)| (*k, v.as_str())).collect()
        } else {
            Vec::new()
        };
        let (line, client_token) = match outgoing {
            Outgoing::Request { method, params } if env_pairs.is_empty() => {
                (request_line(id, method, params), None)
            }
            Outgoing::Request { method, params } => {
                let protocol = |e: serde_json::Error| UpstreamError::Protocol {
                    upstream: self.name.clone(),
                    reason: format!("cannot add the 2026-07-28 envelope: {e}"),
                };
                let meta_text = mcpb_protocol::era::meta_object(&env_pairs);
                let params = match params {
                    Some(p) => mcpb_protocol::rewrite::with_members(p, &[("_meta", &meta_text)]),
                    None => RawValue::from_string(format!("{{\"_meta\":{meta_text}}}")),
                }
                .map_err(protocol)?;
                (request_line(id, method, Some(&params)), None)
            }
            Outgoing::ToolCall { tool, params, meta } => {
                env_pairs.extend_from_slice(meta);
                let token = format!("{TOKEN_PREFIX}{id}");
                let (params, client_token) = mcpb_protocol::rewrite::rewrite_call(
                    params,
                    tool,
                    &token,
                    &env_pairs,
                    &self.forward_meta,
                )
                .map_err(|e| UpstreamError::Protocol {
                    upstream: self.name.clone(),
                    reason: format!("cannot forward the call: {e}"),
                })?;
                (request_line(id, "tools/call", Some(&params)), client_token)
            }
        };
        let (tx, mut rx) = oneshot::channel();
        let activity = Arc::new(Notify::new());
        {
            self.pending.lock().insert(
                id,
                PendingCall {
                    tx,
                    link: opts.link.clone(),
                    client_token,
                    activity: activity.clone(),
                    progress: Default::default(),
                },
            );
        }
        let mut guard = PendingGuard {
            instance: self,
            id,
            armed: true,
        };
        // One timer for the whole call, waiting to be written included: the idle deadline,
        // moved on by progress but never past the hard limit. An upstream that stopped reading
        // its input must not hold callers past their deadline.
        let start = tokio::time::Instant::now();
        let hard = start + opts.max_time;
        let deadline = tokio::time::sleep_until((start + opts.idle_timeout).min(hard));
        tokio::pin!(deadline);
        // Room in the queue is the common case and needs no select.
        let queued = match self.outbox.try_send(line) {
            Ok(()) => Some(true),
            Err(mpsc::error::TrySendError::Closed(_)) => Some(false),
            Err(mpsc::error::TrySendError::Full(line)) => tokio::select! {
                sent = self.outbox.send(line) => Some(sent.is_ok()),
                _ = &mut deadline => None,
            },
        };
        match queued {
            Some(true) => {}
            Some(false) => return Err(self.exited()),
            None => return Err(self.timeout(opts, start)),
        }
        let outcome = loop {
            tokio::select! {
                reply = &mut rx => break Some(reply),
                _ = activity.notified() => {
                    let next = (tokio::time::Instant::now() + opts.idle_timeout).min(hard);
                    deadline.as_mut().reset(next);
                }
                _ = &mut deadline => break None,
            }
        };
        self.touch();
        match outcome {
            Some(Ok(reply)) => {
                guard.armed = false;
                Ok(reply)
            }
            Some(Err(_)) => {
                guard.armed = false;
                // The supervisor may still be collecting the exit status.
                let mut exit = self.exit.clone();
                let _ = tokio::time::timeout(
                    Duration::from_millis(200),
                    exit.wait_for(Option::is_some),
                )
                .await;
                Err(self.exited())
            }
            None => Err(self.timeout(opts, start)),
        }
    }

    /// The error for a call whose deadline passed: the hard limit when progress had moved the
    /// idle deadline up to it, else the idle timeout.
    fn timeout(&self, opts: &CallOptions, start: tokio::time::Instant) -> UpstreamError {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        if opts.max_time > opts.idle_timeout && start.elapsed() >= opts.max_time {
            UpstreamError::HardLimit {
                upstream: self.name.clone(),
                ms: ms(opts.max_time),
            }
        } else {
            UpstreamError::Timeout {
                upstream: self.name.clone(),
                ms: ms(opts.idle_timeout.min(opts.max_time)),
            }
        }
    }

    pub(crate) async fn notify(&self, method: &str, params: Option<&RawValue>) {
        let _ = self.outbox.send(notification_line(method, params)).await;
    }

    /// Asks the upstream whether it speaks 2026-07-28 (`server/discover`). `Some(true)` when it
    /// does; `Some(false)` when it refused or did not understand, and the handshake of earlier
    /// revisions may follow on this process; `None` when it did not answer in time.
    pub(crate) async fn discover(&self, timeout: Duration) -> Result<Option<bool>, UpstreamError> {
        let env = mcpb_protocol::era::broker_envelope();
        let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let meta = format!("{{\"_meta\":{}}}", mcpb_protocol::era::meta_object(&pairs));
        let Ok(params) = RawValue::from_string(meta) else {
            return Ok(Some(false));
        };
        let reply = match self
            .request("server/discover", Some(&params), timeout)
            .await
        {
            Ok(r) => r,
            Err(UpstreamError::Timeout { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let Reply::Result(result) = reply else {
            return Ok(Some(false));
        };
        #[derive(serde::Deserialize)]
        struct Discover {
            #[serde(rename = "supportedVersions", default)]
            supported: Vec<String>,
            #[serde(default)]
            capabilities: Option<serde_json::Value>,
        }
        let discovered = serde_json::from_str::<Discover>(result.get()).ok();
        let modern = discovered
            .as_ref()
            .is_some_and(|d| d.supported.iter().any(|v| revision::is_modern(v)));
        if modern {
            *self.capabilities.lock() = discovered.and_then(|d| d.capabilities);
            self.stateless.store(true, Ordering::SeqCst);
            *self.protocol_version.lock() = mcpb_protocol::era::STATELESS_REVISION.to_string();
        }
        Ok(Some(modern))
    }

    /// The MCP handshake at the newest revision the broker speaks; the upstream picks its own.
    pub(crate) async fn initialize(&self, timeout: Duration) -> Result<(), UpstreamError> {
        let params = serde_json::json!({
            "protocolVersion": revision::LATEST_HANDSHAKE,
            // What the broker relays to its clients (each request goes only to a client that
            // declared it, and is refused otherwise): servers that check before asking need
            // to see it here.
            "capabilities": {"sampling": {}, "elicitation": {}, "roots": {}},
            "clientInfo": {"name": "mcp-broker", "version": env!("CARGO_PKG_VERSION")},
        });
        let handshake = |reason: String| UpstreamError::Handshake {
            upstream: self.name.clone(),
            reason,
        };
        let params = to_raw(&params).map_err(|e| handshake(e.to_string()))?;
        let reply = self
            .request("initialize", Some(&params), timeout)
            .await
            .map_err(|e| match e {
                UpstreamError::Timeout { upstream, ms } => {
                    UpstreamError::StartTimeout { upstream, ms }
                }
                other => other,
            })?;
        let result = match reply {
            Reply::Result(r) => r,
            Reply::Error(e) => return Err(handshake(format!("initialize was refused: {e}"))),
        };
        #[derive(serde::Deserialize)]
        struct InitResult {
            #[serde(rename = "protocolVersion")]
            protocol_version: String,
            #[serde(default)]
            capabilities: Option<serde_json::Value>,
        }
        let init: InitResult = serde_json::from_str(result.get())
            .map_err(|e| handshake(format!("unreadable initialize result: {e}")))?;
        if !revision::is_supported(&init.protocol_version) {
            return Err(handshake(format!(
                "it speaks protocol revision {}, which this broker does not",
                init.protocol_version
            )));
        }
        *self.protocol_version.lock() = init.protocol_version;
        *self.capabilities.lock() = init.capabilities;
        self.notify("notifications/initialized", None).await;
        Ok(())
    }

    /// Starts the stop ladder without waiting for it.
    pub(crate) fn request_stop(&self) {
        self.stopped_on_purpose.store(true, Ordering::SeqCst);
        self.stop.notify_one();
    }

    /// Starts the stop ladder and waits until the process group is gone.
    pub(crate) async fn stop(&self) {
        self.request_stop();
        let mut exit = self.exit.clone();
        let _ = exit.wait_for(Option::is_some).await;
    }
}

/// The last handle on a live instance went away without `stop` (a caller dropped mid-start,
/// a per-call instance whose call was cancelled): the supervisor still runs the stop ladder, so
/// no process outlives every reference to it.
impl Drop for Instance {
    fn drop(&mut self) {
        if self.is_alive() {
            self.stop.notify_one();
        }
    }
}

struct PendingGuard<'a> {
    instance: &'a Instance,
    id: u64,
    armed: bool,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let was_pending = self.instance.pending.lock().remove(&self.id).is_some();
        if was_pending && self.instance.is_alive() {
            let params = format!(
                "{{\"requestId\":{},\"reason\":\"cancelled by mcp-broker\"}}",
                self.id
            );
            if let Ok(params) = RawValue::from_string(params) {
                let _ = self
                    .instance
                    .outbox
                    .try_send(notification_line("notifications/cancelled", Some(&params)));
            }
        }
    }
}

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
    let mut out = BufWriter::with_capacity(16 * 1024, stdin);
    loop {
        tokio::select! {
            biased;
            _ = &mut close => break,
            msg = inbox.recv() => {
                let Some(msg) = msg else { break };
                let batch = async {
                    out.write_all(&msg).await?;
                    // Batch whatever is already queued into one write before flushing.
                    while let Ok(more) = inbox.try_recv() {
                        out.write_all(&more).await?;
                    }
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
        }
    }
    let _ = out.flush().await;
    let _ = out.shutdown().await;
}

pub(crate) async fn read_loop(stdout: impl AsyncRead + Unpin, ctx: Arc<ReadCtx>) {
    let mut frames = FrameReader::new(BufReader::with_capacity(16 * 1024, stdout), ctx.limit);
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

#[cfg(test)]
#[path = "instance_tests.rs"]
mod tests;
