//! One running upstream, whatever its transport: requests sent with ids of the broker's own
//! (so many sessions share it), their answers, progress and timeouts, cancellation, the
//! handshake, and the protocol era decided once when it starts. Its `Transport` (a child's
//! stdio, streamable HTTP, legacy SSE) carries the lines.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use mcpb_protocol::message::{notification_line, request_line, to_raw};
use mcpb_protocol::{Era, revision};
use parking_lot::Mutex;
use serde_json::value::RawValue;
use tokio::sync::{Notify, OwnedSemaphorePermit, mpsc, oneshot, watch};

use crate::UpstreamError;
pub use crate::inbound::{ListChanged, Reply};
use crate::inbound::{Pending, PendingCall, ReadCtx, TOKEN_PREFIX};
use crate::link::ClientLink;
use crate::transport::{Channels, Peer, Transport};

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

pub(crate) struct Instance {
    pub(crate) name: String,
    peer: Peer,
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
    /// Decided once, by the handshake: `Stateless` (2026-07-28) puts the broker's envelope in
    /// every request's `_meta`; unset until then (the probes carry what they need).
    era: OnceLock<Era>,
    /// What the upstream said it offers (`capabilities` of its handshake or discovery).
    capabilities: Mutex<Option<serde_json::Value>>,
    /// The client's own `_meta` keys that may travel on besides `progressToken`
    /// (`broker.forward_meta_keys`).
    forward_meta: Vec<String>,
    /// Tool results are redacted whole too (`redact_results`).
    redact_results: bool,
}

impl std::fmt::Debug for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instance")
            .field("name", &self.name)
            .field("peer", &self.peer)
            .finish_non_exhaustive()
    }
}

/// What every instance needs whatever its transport.
pub(crate) struct Setup {
    pub name: String,
    pub max_frame_bytes: usize,
    pub on_list_changed: Option<ListChanged>,
    pub on_notice: Option<crate::inbound::Notice>,
    /// Set when the upstream announces a changed tool list; shared by its instances.
    pub tools_stale: Arc<AtomicBool>,
    /// Capacity this upstream holds (instance and process caps), released when it has gone.
    pub permits: Vec<OwnedSemaphorePermit>,
    /// The client's own `_meta` keys that may travel on besides `progressToken`.
    pub forward_meta: Vec<String>,
    /// `redact_results`: tool results are redacted like everything else the upstream sends.
    pub redact_results: bool,
}

impl Instance {
    /// Opens `transport` and makes the instance over it. The MCP handshake is a separate step.
    pub(crate) async fn open(
        transport: Box<dyn Transport>,
        setup: Setup,
    ) -> Result<Arc<Self>, UpstreamError> {
        let (outbox, inbox) = mpsc::channel::<Vec<u8>>(1024);
        let stop = Arc::new(Notify::new());
        let (exit_tx, exit) = watch::channel::<Option<String>>(None);
        let pending: Arc<Pending> = Arc::default();
        let alive = Arc::new(AtomicBool::new(true));
        let protocol_version: Arc<Mutex<String>> = Arc::default();
        let read = Arc::new(ReadCtx {
            name: setup.name.clone(),
            limit: setup.max_frame_bytes,
            pending: pending.clone(),
            outbox: outbox.clone(),
            alive: alive.clone(),
            exit: exit.clone(),
            tools_stale: setup.tools_stale,
            stop: stop.clone(),
            on_list_changed: setup.on_list_changed,
            on_notice: setup.on_notice,
        });
        let peer = transport
            .open(Channels {
                inbox,
                read,
                exit: exit_tx,
                protocol_version: protocol_version.clone(),
                permits: setup.permits,
            })
            .await?;
        Ok(Arc::new(Self {
            name: setup.name,
            peer,
            outbox,
            pending,
            next_id: AtomicU64::new(1),
            alive,
            exit,
            stop,
            stopped_on_purpose: AtomicBool::new(false),
            last_used: Mutex::new(Instant::now()),
            protocol_version,
            era: OnceLock::new(),
            capabilities: Mutex::default(),
            forward_meta: setup.forward_meta,
            redact_results: setup.redact_results,
        }))
    }

    /// The child's pid; `None` for a remote upstream.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.peer.pid()
    }

    /// The era its handshake settled on (`Handshake` until one has).
    pub(crate) fn era(&self) -> Era {
        self.era.get().copied().unwrap_or_default()
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

    /// How it ended, naming the process when there was one.
    pub(crate) fn end_description(&self) -> String {
        match self.pid() {
            Some(pid) => format!("{} (pid {pid})", self.exit_description()),
            None => self.exit_description(),
        }
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
        // Definitions, resources, prompts, completions and instructions reach the model (and
        // the catalog on disk) as they are: a secret the server was given is taken out of
        // them. Only an ordinary tool result is the tool's data, redacted when asked to.
        let redact_all = self.redact_results || !matches!(outgoing, Outgoing::ToolCall { .. });
        let (line, client_token) = self.encode(id, outgoing)?;
        let (tx, rx) = oneshot::channel();
        let activity = Arc::new(Notify::new());
        self.pending.lock().insert(
            id,
            PendingCall {
                tx,
                link: opts.link.clone(),
                client_token,
                activity: activity.clone(),
                progress: Default::default(),
                redact_all,
            },
        );
        let guard = PendingGuard {
            instance: self,
            id,
            armed: true,
        };
        self.deliver(line, rx, &activity, guard, opts).await
    }

    /// The request's line with the broker's id; a tool call's name, progress token and `_meta`
    /// rewritten (the client's own token returned, to put back on its progress); the
    /// 2026-07-28 envelope added when the handshake chose that era.
    fn encode(
        &self,
        id: u64,
        outgoing: Outgoing<'_>,
    ) -> Result<(Vec<u8>, Option<Box<RawValue>>), UpstreamError> {
        let env_pairs: &[(&str, &str)] = if self.era() == Era::Stateless {
            mcpb_protocol::era::broker_envelope()
        } else {
            &[]
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
                let meta_text = mcpb_protocol::era::broker_envelope_object();
                let params = match params {
                    Some(p) => mcpb_protocol::rewrite::with_members(p, &[("_meta", meta_text)]),
                    None => RawValue::from_string(format!("{{\"_meta\":{meta_text}}}")),
                }
                .map_err(protocol)?;
                (request_line(id, method, Some(&params)), None)
            }
            Outgoing::ToolCall { tool, params, meta } => {
                let joined: Vec<(&str, &str)>;
                // The broker's own envelope alone is kept written as one object.
                let envelope = match (meta.is_empty(), env_pairs.is_empty()) {
                    (true, false) => (
                        env_pairs,
                        Some(mcpb_protocol::era::broker_envelope_object()),
                    ),
                    (true, true) => (env_pairs, None),
                    (false, _) => {
                        joined = [env_pairs, meta].concat();
                        (joined.as_slice(), None)
                    }
                };
                let (params, client_token) = mcpb_protocol::rewrite::rewrite_call_with(
                    params,
                    tool,
                    || format!("{TOKEN_PREFIX}{id}"),
                    envelope,
                    &self.forward_meta,
                )
                .map_err(|e| UpstreamError::Protocol {
                    upstream: self.name.clone(),
                    reason: format!("cannot forward the call: {e}"),
                })?;
                let id = id.to_string();
                (
                    mcpb_protocol::message::request_line_text(&id, "tools/call", Some(&params)),
                    client_token,
                )
            }
        };
        Ok((line, client_token))
    }

    /// Queues the line and waits for its answer, the upstream's end, or the deadline. Dropping
    /// this (the caller went away) drops `guard`, which withdraws the request.
    async fn deliver(
        &self,
        line: Vec<u8>,
        mut rx: oneshot::Receiver<Reply>,
        activity: &Notify,
        mut guard: PendingGuard<'_>,
        opts: &CallOptions,
    ) -> Result<Reply, UpstreamError> {
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
        let meta = format!(
            "{{\"_meta\":{}}}",
            mcpb_protocol::era::broker_envelope_object()
        );
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
            let _ = self.era.set(Era::Stateless);
            *self.protocol_version.lock() = mcpb_protocol::era::STATELESS_REVISION.to_string();
        }
        Ok(Some(modern))
    }

    /// The MCP handshake at the newest revision the broker speaks; the upstream picks its own.
    #[expect(
        clippy::wildcard_enum_match_arm,
        reason = "only a timeout changes its name; every other error passes on"
    )]
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
        let _ = self.era.set(Era::of_revision(&init.protocol_version));
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

#[cfg(test)]
#[path = "instance_tests.rs"]
mod tests;
