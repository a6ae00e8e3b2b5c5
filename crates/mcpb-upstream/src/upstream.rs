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
use crate::instance::{Instance, Launch, Reply};
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
    pub last_error: Option<String>,
    pub stderr_tail: Vec<String>,
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
            last_error: None,
            stderr_tail: Vec::new(),
        };
        Self {
            settings,
            passthrough,
            secrets_dir,
            max_frame_bytes,
            timings,
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
            slot.instance = None;
            slot.tools = None;
        }
        self.set_status(|s| {
            s.state = UpstreamState::Starting;
            s.pid = None;
        });
        match self.start().await {
            Ok((inst, tools)) => {
                let count = tools.len();
                slot.instance = Some(inst.clone());
                slot.tools = Some(Arc::new(tools));
                self.set_status(|s| {
                    s.state = UpstreamState::Running;
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
                self.set_status(|s| {
                    s.state = UpstreamState::Failed;
                    s.pid = None;
                    s.last_error = Some(e.to_string());
                });
                Err(e)
            }
        }
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
        })?;
        tracing::info!(upstream = %self.settings.name, pid = inst.pid(), "upstream process started");
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
        match handshake.await {
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

    /// Stops the running instance, if any, with the full stop ladder.
    pub async fn stop(&self) {
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
