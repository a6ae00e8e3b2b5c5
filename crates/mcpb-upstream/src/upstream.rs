//! One configured upstream in `shared` mode: started lazily on first need, its tool list cached
//! while it runs, its state readable at any time without starting it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mcpb_config::{Lifecycle, UpstreamSettings};
use mcpb_protocol::message::to_raw;
use serde::Serialize;
use serde_json::Value;

use crate::UpstreamError;
use crate::env::child_env;
use crate::instance::{Instance, Launch, ListChanged, Reply};
use crate::ledger::Ledger;
use crate::process::StopTimings;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UpstreamState {
    Stopped,
    Starting,
    Running,
    Failed,
    Disabled,
}

#[derive(Debug, Clone, Serialize)]
pub struct UpstreamStatus {
    pub name: String,
    pub state: UpstreamState,
    pub pid: Option<u32>,
    pub protocol_version: Option<String>,
    pub tool_count: Option<usize>,
    pub started_at_unix: Option<u64>,
    pub starts: u32,
    /// Unexpected exits and failed starts since the daemon started.
    pub failures: u32,
    /// Set while calls fail at once after repeated failures.
    pub failfast_until_unix: Option<u64>,
    pub last_error: Option<String>,
    pub stderr_tail: Vec<String>,
}

/// Restart discipline: exponential backoff with jitter between attempts, and a failfast period
/// once an upstream failed too often in a short window, so a broken server costs callers an
/// immediate error instead of a start attempt each.
#[derive(Debug, Default)]
struct Health {
    consecutive: u32,
    recent: std::collections::VecDeque<Instant>,
    next_attempt: Option<Instant>,
    failfast_until: Option<Instant>,
}

const BACKOFF_BASE: Duration = Duration::from_millis(250);
const BACKOFF_MAX: Duration = Duration::from_secs(8);
const FAILFAST_AFTER: usize = 5;
const FAILFAST_WINDOW: Duration = Duration::from_secs(60);
const FAILFAST_FOR: Duration = Duration::from_secs(30);

impl Health {
    fn failed(&mut self, now: Instant) {
        self.consecutive += 1;
        self.recent.push_back(now);
        while self
            .recent
            .front()
            .is_some_and(|t| now.duration_since(*t) > FAILFAST_WINDOW)
        {
            self.recent.pop_front();
        }
        if self.recent.len() >= FAILFAST_AFTER {
            self.failfast_until = Some(now + FAILFAST_FOR);
            self.recent.clear();
        }
        let exp = BACKOFF_BASE.saturating_mul(1u32 << self.consecutive.saturating_sub(1).min(16));
        self.next_attempt = Some(now + jitter(exp.min(BACKOFF_MAX)));
    }

    fn succeeded(&mut self) {
        self.consecutive = 0;
        self.next_attempt = None;
        self.failfast_until = None;
    }
}

/// 80% to 120% of `d`, from the clock's low bits: spreads restarts without a random generator.
fn jitter(d: Duration) -> Duration {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|t| t.subsec_nanos())
        .unwrap_or(0);
    d.mul_f64(0.8 + f64::from(nanos % 401) / 1000.0)
}

#[derive(Default)]
struct Slot {
    instance: Option<Arc<Instance>>,
    tools: Option<Arc<Vec<Value>>>,
}

pub struct Upstream {
    settings: UpstreamSettings,
    passthrough: Vec<String>,
    secrets_dir: std::path::PathBuf,
    max_frame_bytes: usize,
    timings: StopTimings,
    ledger: Option<Ledger>,
    on_list_changed: Option<ListChanged>,
    health: Mutex<Health>,
    /// An instance between spawn and the end of its handshake, so `stop` can reach it without
    /// waiting for the start to finish.
    starting: Mutex<Option<Arc<Instance>>>,
    slot: tokio::sync::Mutex<Slot>,
    status: Mutex<UpstreamStatus>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("name", &self.settings.name)
            .finish_non_exhaustive()
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Upstream {
    pub fn new(
        settings: UpstreamSettings,
        passthrough: Vec<String>,
        secrets_dir: std::path::PathBuf,
        max_frame_bytes: usize,
        timings: StopTimings,
        ledger: Option<Ledger>,
        on_list_changed: Option<ListChanged>,
    ) -> Self {
        let state = if settings.lifecycle == Lifecycle::Disabled {
            UpstreamState::Disabled
        } else {
            UpstreamState::Stopped
        };
        let status = UpstreamStatus {
            name: settings.name.clone(),
            state,
            pid: None,
            protocol_version: None,
            tool_count: None,
            started_at_unix: None,
            starts: 0,
            failures: 0,
            failfast_until_unix: None,
            last_error: None,
            stderr_tail: Vec::new(),
        };
        Self {
            settings,
            passthrough,
            secrets_dir,
            max_frame_bytes,
            timings,
            ledger,
            on_list_changed,
            health: Mutex::default(),
            starting: Mutex::default(),
            slot: tokio::sync::Mutex::new(Slot::default()),
            status: Mutex::new(status),
        }
    }

    pub fn name(&self) -> &str {
        &self.settings.name
    }

    pub fn settings(&self) -> &UpstreamSettings {
        &self.settings
    }

    /// Current state; never starts anything.
    pub fn status(&self) -> UpstreamStatus {
        let mut s = self
            .status
            .lock()
            .map(|s| s.clone())
            .unwrap_or_else(|p| p.into_inner().clone());
        if let Ok(slot) = self.slot.try_lock()
            && let Some(inst) = &slot.instance
        {
            s.stderr_tail = inst.stderr_tail();
            if !inst.is_alive() && s.state == UpstreamState::Running {
                s.state = UpstreamState::Failed;
            }
        }
        s
    }

    fn set_status(&self, f: impl FnOnce(&mut UpstreamStatus)) {
        if let Ok(mut s) = self.status.lock() {
            f(&mut s);
        }
    }

    /// The running instance, started if none runs (or the last one died).
    pub async fn instance(&self) -> Result<Arc<Instance>, UpstreamError> {
        let mut slot = self.slot.lock().await;
        self.ensure_running(&mut slot).await
    }

    async fn ensure_running(&self, slot: &mut Slot) -> Result<Arc<Instance>, UpstreamError> {
        if self.settings.lifecycle == Lifecycle::Disabled {
            return Err(UpstreamError::Disabled {
                upstream: self.settings.name.clone(),
            });
        }
        if let Some(inst) = &slot.instance {
            if inst.is_alive() {
                return Ok(inst.clone());
            }
            if !inst.stopped_on_purpose() {
                self.record_failure(format!("{} (pid {})", inst.exit_description(), inst.pid()));
            }
            slot.instance = None;
            slot.tools = None;
        }
        self.wait_for_backoff().await?;
        self.set_status(|s| {
            s.state = UpstreamState::Starting;
            s.pid = None;
        });
        match self.start().await {
            Ok((inst, tools)) => {
                let count = tools.len();
                slot.instance = Some(inst.clone());
                slot.tools = Some(Arc::new(tools));
                if let Ok(mut h) = self.health.lock() {
                    h.succeeded();
                }
                self.set_status(|s| {
                    s.state = UpstreamState::Running;
                    s.failfast_until_unix = None;
                    s.pid = Some(inst.pid());
                    s.protocol_version = Some(inst.protocol_version());
                    s.tool_count = Some(count);
                    s.started_at_unix = Some(unix_now());
                    s.starts += 1;
                });
                Ok(inst)
            }
            Err(e) => {
                tracing::error!(upstream = %self.settings.name, error = %e, "upstream failed to start");
                self.record_failure(e.to_string());
                Err(e)
            }
        }
    }

    fn record_failure(&self, error: String) {
        let failfast = self.health.lock().ok().and_then(|mut h| {
            h.failed(Instant::now());
            h.failfast_until
        });
        let until_unix =
            failfast.map(|t| unix_now() + t.saturating_duration_since(Instant::now()).as_secs());
        self.set_status(|s| {
            s.state = UpstreamState::Failed;
            s.pid = None;
            s.failures += 1;
            s.failfast_until_unix = until_unix;
            s.last_error = Some(error);
        });
    }

    /// Fails at once during a failfast period; otherwise sleeps out the backoff (a few seconds
    /// at most) so restarts of a crashing server do not come back to back.
    async fn wait_for_backoff(&self) -> Result<(), UpstreamError> {
        let (failfast, next) = self
            .health
            .lock()
            .map(|h| (h.failfast_until, h.next_attempt))
            .unwrap_or((None, None));
        let now = Instant::now();
        if let Some(until) = failfast.filter(|u| *u > now) {
            let last_error = self.status().last_error.unwrap_or_default();
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

    async fn start(&self) -> Result<(Arc<Instance>, Vec<Value>), UpstreamError> {
        let lookup = |k: &str| std::env::var(k).ok();
        let env = child_env(
            &self.settings,
            &self.passthrough,
            &lookup,
            &self.secrets_dir,
        )?;
        let inst = Instance::spawn(Launch {
            settings: &self.settings,
            env: &env,
            max_frame_bytes: self.max_frame_bytes,
            timings: self.timings,
            ledger: self.ledger.clone(),
            on_list_changed: self.on_list_changed.clone(),
        })?;
        tracing::info!(upstream = %self.settings.name, pid = inst.pid(), "upstream process started");
        if let Ok(mut st) = self.starting.lock() {
            *st = Some(inst.clone());
        }
        let deadline = Instant::now() + self.settings.startup_timeout;
        let handshake = async {
            inst.initialize(self.settings.startup_timeout).await?;
            let left = deadline.saturating_duration_since(Instant::now());
            list_all_tools(
                &inst,
                &self.settings.name,
                left.max(Duration::from_millis(1)),
            )
            .await
        };
        let outcome = handshake.await;
        if let Ok(mut st) = self.starting.lock() {
            *st = None;
        }
        match outcome {
            Ok(tools) => Ok((inst, tools)),
            Err(e) => {
                inst.stop().await;
                Err(e)
            }
        }
    }

    /// The upstream's tools as it sent them, from the cache when it is fresh.
    pub async fn tools(&self) -> Result<Arc<Vec<Value>>, UpstreamError> {
        self.ready().await.map(|(_, tools)| tools)
    }

    /// The running instance and its tool list together, under one lock.
    pub async fn ready(&self) -> Result<(Arc<Instance>, Arc<Vec<Value>>), UpstreamError> {
        let mut slot = self.slot.lock().await;
        let inst = self.ensure_running(&mut slot).await?;
        if inst.take_tools_stale() || slot.tools.is_none() {
            let tools =
                list_all_tools(&inst, &self.settings.name, self.settings.call_timeout).await?;
            self.set_status(|s| s.tool_count = Some(tools.len()));
            slot.tools = Some(Arc::new(tools));
        }
        Ok((inst, slot.tools.clone().unwrap_or_default()))
    }

    /// Stops the running instance, if any, with the full stop ladder; an instance still in its
    /// handshake is stopped too.
    pub async fn stop(&self) {
        let starting = self.starting.lock().ok().and_then(|mut s| s.take());
        if let Some(inst) = starting {
            inst.stop().await;
        }
        let inst = {
            let mut slot = self.slot.lock().await;
            slot.tools = None;
            slot.instance.take()
        };
        if let Some(inst) = inst {
            inst.stop().await;
        }
        self.set_status(|s| {
            if s.state != UpstreamState::Disabled {
                s.state = UpstreamState::Stopped;
            }
            s.pid = None;
        });
    }

    /// SIGKILL to the process group of the running instance, without waiting: for a daemon that
    /// was told twice to stop.
    pub fn kill_now(&self) {
        if let Some(pid) = self.status.lock().ok().and_then(|s| s.pid) {
            crate::process::signal_group(pid, rustix::process::Signal::KILL);
        }
    }

    pub fn call_timeout(&self) -> Duration {
        self.settings.call_timeout
    }
}

/// `tools/list`, following `nextCursor` until the upstream has sent everything.
async fn list_all_tools(
    inst: &Instance,
    name: &str,
    timeout: Duration,
) -> Result<Vec<Value>, UpstreamError> {
    let protocol = |reason: String| UpstreamError::Protocol {
        upstream: name.to_string(),
        reason,
    };
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..1000 {
        let params = match &cursor {
            Some(c) => Some(
                to_raw(&serde_json::json!({"cursor": c})).map_err(|e| protocol(e.to_string()))?,
            ),
            None => None,
        };
        let reply = inst
            .request("tools/list", params.as_deref(), timeout)
            .await?;
        let result = match reply {
            Reply::Result(r) => r,
            Reply::Error(e) => return Err(protocol(format!("tools/list failed: {e}"))),
        };
        #[derive(serde::Deserialize)]
        struct Page {
            #[serde(default)]
            tools: Vec<Value>,
            #[serde(rename = "nextCursor", default)]
            next_cursor: Option<String>,
        }
        let page: Page = serde_json::from_str(result.get())
            .map_err(|e| protocol(format!("unreadable tools/list result: {e}")))?;
        tools.extend(page.tools);
        match page.next_cursor {
            Some(c) if !c.is_empty() => cursor = Some(c),
            _ => return Ok(tools),
        }
    }
    Err(protocol("tools/list never stopped paginating".into()))
}
