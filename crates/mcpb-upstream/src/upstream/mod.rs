//! One configured upstream and its running instances, whatever its lifecycle:
//! `shared` (one instance for everyone), `per_session` (one per client session), `per_call`
//! (one per call or listing, stopped before the answer returns) or `disabled`. Instances start
//! on first need; the tool list is cached across instances; caps on instances, processes and
//! concurrent calls fail fast with a clear error; state is readable without starting anything.

mod capacity;
mod guards;
mod listing;
mod stopping;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mcpb_config::unix_now;
use parking_lot::Mutex;

use mcpb_config::{Lifecycle, UpstreamSettings};
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::UpstreamError;
use crate::env::child_env;
use crate::health::Health;
use crate::instance::{CallOptions, Instance, ListChanged, Outgoing, Reply, Setup};
use crate::ledger::Ledger;
use crate::process::StopTimings;
use crate::remote::Http;
use crate::state::{Probe, StartGate, State};
pub use crate::status::{RejectedTool, UpstreamState, UpstreamStatus};
use crate::stdio::StdioProcess;
use guards::{PerCallInstance, Starting};
use listing::{ToolList, list_all_tools};

/// Limits shared by every upstream of a daemon.
#[derive(Debug, Clone)]
pub struct Shared {
    /// `broker.max_processes`: upstream processes running at once, all upstreams together.
    pub processes: Arc<Semaphore>,
    pub max_processes: usize,
}

/// Everything an upstream needs from the daemon besides its settings.
#[derive(Clone)]
pub struct UpstreamContext {
    pub passthrough: Vec<String>,
    pub secrets_dir: std::path::PathBuf,
    /// Where remote upstreams' sign-ins are kept (`state/`); `None`: no OAuth.
    pub state_dir: Option<std::path::PathBuf>,
    pub max_frame_bytes: usize,
    /// `broker.max_tool_list_bytes`: all pages of one tool list together.
    pub max_list_bytes: usize,
    /// `broker.max_tools_per_list`.
    pub max_list_tools: usize,
    /// `broker.forward_meta_keys`: client `_meta` keys that reach upstreams.
    pub forward_meta: Vec<String>,
    pub timings: StopTimings,
    pub ledger: Option<Ledger>,
    pub on_list_changed: Option<ListChanged>,
    pub on_notice: Option<crate::inbound::Notice>,
    pub shared: Shared,
}

/// How long an upstream gets to answer `server/discover` before the broker falls back to the
/// `initialize` handshake.
const DISCOVER_TIMEOUT: Duration = Duration::from_secs(3);

/// How long a failure waits for the failed process's last stderr lines.
const STDERR_SETTLE: Duration = Duration::from_millis(300);

/// How long a listing waits for a refresh of a list the upstream announced as changed.
pub(crate) const REFRESH_WAIT: Duration = Duration::from_secs(1);

pub struct Upstream {
    pub(crate) settings: UpstreamSettings,
    pub(crate) ctx: UpstreamContext,
    pub(crate) state: Mutex<State>,
    shared_gate: StartGate,
    /// Set by the instances' readers when the upstream announces a changed tool list.
    pub(crate) tools_stale: Arc<AtomicBool>,
    /// The last stderr lines of the upstream's latest process, kept after it is gone.
    pub(crate) stderr_tail: Arc<crate::stderr::StderrTail>,
    /// What a remote upstream's answers said of its credentials (none for a process).
    auth_log: Arc<crate::auth_seen::AuthLog>,
    pub(crate) refreshed: tokio::sync::Notify,
    instances: Arc<Semaphore>,
    concurrency: Option<Arc<Semaphore>>,
    active_calls: AtomicUsize,
    /// Instances whose stop is under way: each holds its process slot until it is gone.
    stopping: AtomicUsize,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("name", &self.settings.name)
            .finish_non_exhaustive()
    }
}

/// Counts a per-call instance while it works.
struct ActiveCall<'a>(&'a AtomicUsize);

impl Drop for ActiveCall<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Upstream {
    pub fn new(settings: UpstreamSettings, ctx: UpstreamContext) -> Self {
        let state = if settings.lifecycle == Lifecycle::Disabled {
            UpstreamState::Disabled
        } else {
            UpstreamState::Stopped
        };
        let status = UpstreamStatus {
            name: settings.name.clone(),
            lifecycle: settings.lifecycle,
            state,
            pid: None,
            pids: Vec::new(),
            session_count: 0,
            active_call_count: 0,
            protocol_version: None,
            capabilities: None,
            tool_count: None,
            started_at_unix: None,
            starts: 0,
            failures: 0,
            failfast_until_unix: None,
            last_error: None,
            rejected_tools: Vec::new(),
            stderr_tail: Vec::new(),
            sandbox: None,
            sandboxed: (settings.transport.is_local_process())
                .then_some(settings.sandbox.is_some()),
            stopped_because: (settings.start == mcpb_config::StartMode::OnFirstUse
                && settings.lifecycle == Lifecycle::Shared)
                .then(|| "starts on first use".to_string()),
        };
        let instances = Arc::new(Semaphore::new(settings.max_instances));
        let concurrency = settings
            .max_concurrency
            .map(|n| Arc::new(Semaphore::new(n)));
        Self {
            settings,
            ctx,
            state: Mutex::new(State {
                health: Health::default(),
                starting: Vec::new(),
                shared: None,
                sessions: HashMap::new(),
                session_gates: HashMap::new(),
                per_call: Vec::new(),
                tools: None,
                probe: Probe::default(),
                retrying: false,
                refreshing: false,
                last_refresh: None,
                users: std::collections::HashSet::new(),
                status,
            }),
            shared_gate: StartGate::default(),
            tools_stale: Arc::new(AtomicBool::new(false)),
            stderr_tail: Arc::default(),
            auth_log: Arc::default(),
            refreshed: tokio::sync::Notify::new(),
            instances,
            concurrency,
            active_calls: AtomicUsize::new(0),
            stopping: AtomicUsize::new(0),
        }
    }

    pub fn name(&self) -> &str {
        &self.settings.name
    }

    pub fn settings(&self) -> &UpstreamSettings {
        &self.settings
    }

    /// The last refusal of its credentials and the last failed refresh, until a request is
    /// accepted again (a remote upstream's; always empty for a process).
    pub fn auth_seen(&self) -> crate::AuthSeen {
        self.auth_log.seen()
    }

    /// Current state; never starts anything and never waits.
    pub fn status(&self) -> UpstreamStatus {
        let state = self.state.lock();
        let mut s = state.status.clone();
        let running = state.running();
        s.pids = running.iter().filter_map(|i| i.pid()).collect();
        s.active_call_count = self.active_calls.load(Ordering::SeqCst);
        s.session_count = state.sessions.values().filter(|i| i.is_alive()).count();
        s.stderr_tail = self.stderr_tail.lines();
        if self.settings.lifecycle == Lifecycle::Shared {
            match &state.shared {
                Some(inst) if !inst.is_alive() && s.state == UpstreamState::Running => {
                    s.state = UpstreamState::Failed;
                    s.pid = None;
                    // Found dead before the next call records it: say why now (a killed
                    // server showed `failed` with no reason and no failure counted).
                    if !inst.stopped_on_purpose() {
                        s.failures += 1;
                        s.last_error = Some(format!(
                            "{}{}",
                            inst.end_description(),
                            self.last_words().unwrap_or_default()
                        ));
                    }
                }
                None if s.state == UpstreamState::Running => s.state = UpstreamState::Stopped,
                _ => {}
            }
        } else if s.state == UpstreamState::Running && running.is_empty() {
            s.state = UpstreamState::Stopped;
        }
        s.last_error = s.last_error.map(|e| mcpb_redact::redact(&e).into_owned());
        s
    }

    pub(crate) fn set_status(&self, f: impl FnOnce(&mut UpstreamStatus)) {
        f(&mut self.state.lock().status);
    }

    fn gate_for(&self, session: u64) -> StartGate {
        match self.settings.lifecycle {
            Lifecycle::PerSession => self
                .state
                .lock()
                .session_gates
                .entry(session)
                .or_default()
                .clone(),
            Lifecycle::Shared | Lifecycle::PerCall | Lifecycle::Disabled => {
                self.shared_gate.clone()
            }
        }
    }

    /// The running instance for this session (shared or its own), started if needed.
    async fn instance_for(&self, session: u64) -> Result<Arc<Instance>, UpstreamError> {
        let lifecycle = self.settings.lifecycle;
        let gate = self.gate_for(session);
        let _starting = gate.lock().await;
        let current = self.state.lock().instance(lifecycle, session);
        if let Some(inst) = current {
            if inst.is_alive() {
                return Ok(inst);
            }
            if !inst.stopped_on_purpose() {
                self.stderr_tail.settled(STDERR_SETTLE).await;
                self.record_failure(inst.end_description());
            }
            self.state.lock().set_instance(lifecycle, session, None);
        }
        let inst = self.start().await?;
        let mut state = self.state.lock();
        if lifecycle == Lifecycle::Shared {
            // Remote upstreams run no process here: no pid to show.
            state.status.pid = inst.pid();
        }
        // A session released while this start ran keeps no instance: this call uses it, and
        // the last handle going stops it.
        let released = lifecycle == Lifecycle::PerSession
            && !state
                .session_gates
                .get(&session)
                .is_some_and(|g| Arc::ptr_eq(g, &gate));
        if !released {
            state.set_instance(lifecycle, session, Some(inst.clone()));
        }
        Ok(inst)
    }

    fn check_enabled(&self) -> Result<(), UpstreamError> {
        if self.settings.lifecycle == Lifecycle::Disabled {
            return Err(UpstreamError::Disabled {
                upstream: self.settings.name.clone(),
            });
        }
        Ok(())
    }

    /// Capacity for one more process: this upstream's `max_instances` and the daemon's
    /// `max_processes`. Over either cap the request fails at once.
    /// Spawns an instance, does the handshake and lists its tools into the cache.
    async fn start(&self) -> Result<Arc<Instance>, UpstreamError> {
        self.wait_for_backoff().await?;
        let permits = self.reserve_process().await?;
        self.set_status(|s| {
            if s.state != UpstreamState::Running {
                s.state = UpstreamState::Starting;
            }
            s.stopped_because = None;
        });
        // Cleared before the handshake lists the tools, not after: a change announced while
        // that listing was answered must leave the list stale.
        let was_stale = self.tools_stale.swap(false, Ordering::SeqCst);
        match self.spawn_and_handshake(permits).await {
            Ok((inst, ToolList { tools, rejected })) => {
                let count = tools.len();
                let mut state = self.state.lock();
                state.tools = Some(Arc::new(tools));
                state.health.succeeded();
                let s = &mut state.status;
                s.state = UpstreamState::Running;
                s.stopped_because = None;
                s.failfast_until_unix = None;
                // A stale error would blame a server that works now.
                s.last_error = None;
                s.protocol_version = Some(inst.protocol_version());
                s.capabilities = inst.capabilities();
                s.tool_count = Some(count);
                s.rejected_tools = rejected;
                s.started_at_unix = Some(unix_now());
                s.starts += 1;
                drop(state);
                Ok(inst)
            }
            Err(e) => {
                if was_stale {
                    self.tools_stale.store(true, Ordering::SeqCst);
                }
                tracing::error!(upstream = %self.settings.name, error = %e, "upstream failed to start");
                self.stderr_tail.settled(STDERR_SETTLE).await;
                let e = self.with_last_words(e);
                self.record_failure(e.to_string());
                Err(e)
            }
        }
    }

    async fn spawn_and_handshake(
        &self,
        permits: Vec<OwnedSemaphorePermit>,
    ) -> Result<(Arc<Instance>, ToolList), UpstreamError> {
        let mut deadline = Instant::now() + self.settings.startup_timeout;
        let known = self.state.lock().probe;
        let probe =
            !known.handshake_only && !known.skip && self.settings.transport.is_local_process();
        let inst = self.spawn_instance(permits).await?;
        let mut starting = Starting::new(self, inst);
        let modern = if probe {
            // An upstream that answered the probe before gets its whole startup time for it.
            let wait = if known.seen_modern {
                self.settings.startup_timeout
            } else {
                self.settings.startup_timeout.min(DISCOVER_TIMEOUT)
            };
            match starting.inst.discover(wait).await {
                Ok(Some(m)) => {
                    self.state.lock().probe.seen_modern |= m;
                    m
                }
                Ok(None) => {
                    // No answer yet: a slow 2026-07-28 server may answer the probe later and
                    // then refuse `initialize` on the same connection, so the two handshakes are
                    // never mixed on one process. A fresh process gets `initialize` only.
                    tracing::info!(upstream = %self.settings.name, "no answer to server/discover; starting a fresh process for the initialize handshake");
                    self.state.lock().probe.skip = true;
                    starting.inst.stop().await;
                    let permits = self.reserve_process().await?;
                    starting = Starting::new(self, self.spawn_instance(permits).await?);
                    deadline = Instant::now() + self.settings.startup_timeout;
                    false
                }
                Err(e) => {
                    // It died on a request it did not know: never ask this one again.
                    self.state.lock().probe.handshake_only = true;
                    starting.inst.stop().await;
                    return Err(e);
                }
            }
        } else {
            false
        };
        let inst = starting.inst.clone();
        let handshake = async {
            if !modern {
                let left = deadline.saturating_duration_since(Instant::now());
                inst.initialize(left.max(Duration::from_millis(1))).await?;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            list_all_tools(
                &inst,
                &self.settings.name,
                left.max(Duration::from_millis(1)),
                self.ctx.max_list_bytes,
                self.ctx.max_list_tools,
            )
            .await
        };
        match handshake.await {
            Ok(tools) => {
                starting.done();
                Ok((inst, tools))
            }
            Err(e) => {
                if matches!(e, UpstreamError::Handshake { .. }) {
                    // Refused `initialize`: perhaps a 2026-07-28-only server that was slow to
                    // answer the probe once. The next start asks `server/discover` again.
                    self.state.lock().probe.skip = false;
                }
                inst.stop().await;
                Err(e)
            }
        }
    }

    /// Starts a process (or connects to a remote upstream) holding `permits`.
    async fn spawn_instance(
        &self,
        permits: Vec<OwnedSemaphorePermit>,
    ) -> Result<Arc<Instance>, UpstreamError> {
        let setup = Setup {
            name: self.settings.name.clone(),
            max_frame_bytes: self.ctx.max_frame_bytes,
            on_list_changed: self.ctx.on_list_changed.clone(),
            on_notice: self.ctx.on_notice.clone(),
            tools_stale: self.tools_stale.clone(),
            permits,
            forward_meta: self.ctx.forward_meta.clone(),
            redact_results: self.settings.redact_results,
        };
        let inst = Instance::open(self.transport().await?, setup).await?;
        match inst.pid() {
            Some(pid) => {
                tracing::info!(upstream = %self.settings.name, pid, "upstream process started")
            }
            None => {
                tracing::info!(upstream = %self.settings.name, url = self.settings.url.as_deref().unwrap_or(""), "remote upstream connected")
            }
        }
        Ok(inst)
    }

    /// How this upstream is reached, from its settings: its process, or its HTTP endpoint.
    async fn transport(&self) -> Result<Box<dyn crate::transport::Transport>, UpstreamError> {
        let lookup = |k: &str| std::env::var(k).ok();
        if self.settings.transport.is_local_process() {
            let env = child_env(
                &self.settings,
                &self.ctx.passthrough,
                &lookup,
                &self.ctx.secrets_dir,
            )?;
            // The secrets dir is `<root>/secrets`: its parent is the runtime root.
            let sandbox = self.settings.sandbox.as_ref().map(|policy| {
                let root = self
                    .ctx
                    .secrets_dir
                    .parent()
                    .map_or_else(|| "/".into(), std::path::Path::to_path_buf);
                let (read, write) = crate::sandboxed::grants(&self.settings, policy, &env, &root);
                self.state.lock().status.sandbox = Some(crate::status::SandboxView {
                    read: read.clone(),
                    write: write.clone(),
                    network: policy.network == mcpb_config::sandbox::NetworkMode::Host,
                });
                crate::sandboxed::Prepared {
                    runtime_root: root,
                    read,
                    write,
                    trace: false,
                }
            });
            return Ok(Box::new(StdioProcess {
                settings: self.settings.clone(),
                env,
                timings: self.ctx.timings,
                ledger: self.ctx.ledger.clone(),
                stderr_tail: self.stderr_tail.clone(),
                sandbox,
            }));
        }
        let mut headers = std::collections::BTreeMap::new();
        for (key, template) in &self.settings.headers {
            let value = template
                .resolve(&lookup, &self.ctx.secrets_dir)
                .map_err(|e| UpstreamError::Secret {
                    upstream: self.settings.name.clone(),
                    key: key.clone(),
                    reason: e.to_string(),
                })?;
            headers.insert(key.clone(), value);
        }
        let bearer = self.bearer(&headers).await?;
        Ok(Box::new(Http {
            settings: self.settings.clone(),
            headers,
            bearer,
            auth_log: self.auth_log.clone(),
        }))
    }

    fn record_failure(&self, error: String) {
        // A crash found later carries the server's last words to the status too.
        let error = match self.last_words() {
            Some(said) if !error.contains("; it said: ") => error + &said,
            _ => error,
        };
        let now = Instant::now();
        let mut state = self.state.lock();
        state.health.failed(now);
        let until_unix = state
            .health
            .failfast_until
            .map(|t| unix_now() + t.saturating_duration_since(now).as_secs());
        let s = &mut state.status;
        s.state = UpstreamState::Failed;
        s.pid = None;
        s.failures += 1;
        s.failfast_until_unix = until_unix;
        s.last_error = Some(error);
    }

    /// Fails at once during a failfast period; otherwise sleeps out the backoff (a few seconds
    /// at most) so restarts of a crashing server do not come back to back.
    async fn wait_for_backoff(&self) -> Result<(), UpstreamError> {
        let (failfast, next, last_error) = {
            let state = self.state.lock();
            (
                state.health.failfast_until,
                state.health.next_attempt,
                state.status.last_error.clone(),
            )
        };
        let now = Instant::now();
        if let Some(until) = failfast.filter(|u| *u > now) {
            let last_error = last_error.unwrap_or_default();
            return Err(UpstreamError::Failfast {
                upstream: self.settings.name.clone(),
                retry_in_s: until.duration_since(now).as_secs().max(1),
                last_error,
            });
        }
        if let Some(at) = next.filter(|a| *a > now) {
            tokio::time::sleep_until(at.into()).await;
        }
        Ok(())
    }

    /// The upstream's tools as it sent them: from the cache when fresh, else from a running
    /// instance (started if needed; a per-call upstream gets one just for the listing).
    pub async fn tools(
        self: &Arc<Self>,
        session: u64,
    ) -> Result<Arc<Vec<mcpb_protocol::Tool>>, UpstreamError> {
        self.check_enabled()?;
        let stale = self.tools_stale.load(Ordering::SeqCst);
        if !stale && let Some(t) = self.state.lock().tools.clone() {
            return Ok(t);
        }
        match self.settings.lifecycle {
            Lifecycle::PerCall => {
                let _active = self.begin_call();
                let inst = PerCallInstance::new(self, self.start().await?);
                inst.inst.stop().await;
            }
            Lifecycle::Shared | Lifecycle::PerSession | Lifecycle::Disabled => {
                let inst = self.instance_for(session).await?;
                let known = self.state.lock().tools.is_some();
                if self.tools_stale.load(Ordering::SeqCst) {
                    if known {
                        // The list it announced as changed: waited for briefly, then the known
                        // list answers and the refresh lands (and is announced) later, so an
                        // upstream slow or silent on tools/list never holds listings up.
                        let refreshed = self.refreshed.notified();
                        tokio::pin!(refreshed);
                        refreshed.as_mut().enable();
                        self.refresh_in_background(inst);
                        let _ = tokio::time::timeout(REFRESH_WAIT, refreshed).await;
                    } else {
                        self.tools_stale.store(false, Ordering::SeqCst);
                        self.install_list(self.list_from(&inst).await?);
                    }
                }
            }
        }
        Ok(self.state.lock().tools.clone().unwrap_or_default())
    }

    /// Starts the shared instance if it does not run (an operator's `upstream start`), then
    /// answers its tools. A list known from before the start is kept: the start only refreshes
    /// it when the upstream announces a change.
    pub async fn start_now(
        self: &Arc<Self>,
    ) -> Result<Arc<Vec<mcpb_protocol::Tool>>, UpstreamError> {
        self.check_enabled()?;
        if self.settings.lifecycle == Lifecycle::Shared {
            self.instance_for(0).await?;
        }
        self.tools(0).await
    }

    fn begin_call(&self) -> ActiveCall<'_> {
        self.active_calls.fetch_add(1, Ordering::SeqCst);
        ActiveCall(&self.active_calls)
    }

    /// A slot among `max_concurrency` calls in flight, waiting at most `queue_timeout`.
    async fn admit(&self) -> Result<Option<OwnedSemaphorePermit>, UpstreamError> {
        let Some(sem) = &self.concurrency else {
            return Ok(None);
        };
        match tokio::time::timeout(self.settings.queue_timeout, sem.clone().acquire_owned()).await {
            Ok(Ok(p)) => Ok(Some(p)),
            _ => Err(UpstreamError::AtCapacity {
                upstream: self.settings.name.clone(),
                reason: format!(
                    "{} calls are in flight (max_concurrency) and none finished within {} ms",
                    self.settings.max_concurrency.unwrap_or(0),
                    self.settings.queue_timeout.as_millis()
                ),
            }),
        }
    }

    /// Sends one request for `session`: to the shared instance, the session's own, or a fresh
    /// per-call instance that is stopped before the answer is returned. The session has used
    /// the upstream from then on (it is not stopped for idleness while the session is open).
    pub async fn call(
        &self,
        session: u64,
        outgoing: Outgoing<'_>,
        opts: &CallOptions,
    ) -> Result<Reply, UpstreamError> {
        self.send_for(session, outgoing, opts, true).await
    }

    /// A listing for `session` (resources, templates, prompts), sent like `call`, but not a use:
    /// a session that only listed does not keep a shared upstream from its idle stop.
    pub async fn list(
        &self,
        session: u64,
        outgoing: Outgoing<'_>,
        opts: &CallOptions,
    ) -> Result<Reply, UpstreamError> {
        self.send_for(session, outgoing, opts, false).await
    }

    async fn send_for(
        &self,
        session: u64,
        outgoing: Outgoing<'_>,
        opts: &CallOptions,
        uses: bool,
    ) -> Result<Reply, UpstreamError> {
        self.check_enabled()?;
        let _admitted = self.admit().await?;
        // Counted from admission to answer, whatever the lifecycle: `status` shows the calls
        // in flight on every upstream, a shared one's included.
        let _active = self.begin_call();
        if uses {
            self.state.lock().users.insert(session);
        }
        match self.settings.lifecycle {
            Lifecycle::PerCall => {
                let inst = PerCallInstance::new(self, self.start().await?);
                let reply = inst.inst.send(outgoing, opts).await;
                inst.inst.stop().await;
                reply
            }
            Lifecycle::Shared | Lifecycle::PerSession | Lifecycle::Disabled => {
                let inst = self.instance_for(session).await?;
                inst.send(outgoing, opts).await
            }
        }
    }

    /// The last error while the upstream's latest start failed and no start has worked since:
    /// lists and searches answer without it instead of waiting for another attempt.
    pub fn failing(&self) -> Option<String> {
        let state = self.state.lock();
        if !state.health.failing() {
            return None;
        }
        let said = state
            .status
            .last_error
            .as_deref()
            .unwrap_or("it failed to start");
        Some(mcpb_redact::redact(said).into_owned())
    }

    /// Starts the upstream again in the background (after its backoff), once at a time, and
    /// announces a changed tool list when it comes up, so clients that listed without it list
    /// again. A per-session upstream is retried by its sessions' next calls instead.
    pub fn retry_in_background(self: &Arc<Self>) {
        if self.settings.lifecycle == Lifecycle::PerSession
            || std::mem::replace(&mut self.state.lock().retrying, true)
        {
            return;
        }
        let up = self.clone();
        tokio::spawn(async move {
            let worked = up.tools(0).await.is_ok();
            up.state.lock().retrying = false;
            if worked && let Some(cb) = &up.ctx.on_list_changed {
                tracing::info!(upstream = %up.settings.name, "upstream is back after failing");
                cb(&up.settings.name);
            }
        });
    }

    /// What the upstream said it offers at its last start; `None` before any start.
    pub fn capabilities(&self) -> Option<Value> {
        self.state.lock().status.capabilities.clone()
    }

    /// Whether an instance serving `session` runs now (a shared one, or the session's own).
    pub fn running_for(&self, session: u64) -> bool {
        self.state
            .lock()
            .instance(self.settings.lifecycle, session)
            .is_some()
    }

    /// Whether a list from a running (or an earlier) instance is held: a listing gets it from
    /// here, at once or after a brief refresh, rather than from a start.
    pub fn has_list(&self) -> bool {
        self.state.lock().tools.is_some()
    }

    /// Whether a start is under way.
    pub fn starting(&self) -> bool {
        self.state.lock().status.state == crate::UpstreamState::Starting
    }

    /// Whether a call is in flight on any instance.
    pub fn busy(&self) -> bool {
        self.active_calls.load(Ordering::SeqCst) > 0
            || self
                .state
                .lock()
                .running()
                .iter()
                .any(|i| i.idle_for().is_none())
    }
}

#[cfg(test)]
mod tests;
