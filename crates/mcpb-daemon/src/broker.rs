//! Shared daemon state and the router: the passthrough view of a profile (merged `tools/list`)
//! and `tools/call` routed by exposed name to the upstream that owns the tool.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use mcpb_config::{ProfileSettings, Settings};
use mcpb_protocol::BrokerRpcError;
use mcpb_protocol::message::{raw_error_line, response_line, to_raw};
use mcpb_upstream::{
    ClientLink, Ledger, ListChanged, Reply, Shared as SharedLimits, StopTimings, Upstream,
    UpstreamContext, UpstreamError, ledger_dir,
};

use crate::facade::Answer;
use crate::link::Registry;
use crate::view::{self, Seen};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::Notify;

/// One generation of configuration: the settings and the upstreams built from them. A reload
/// swaps in a new generation; requests already running keep the one they started with.
pub struct Config {
    pub settings: Settings,
    pub upstreams: BTreeMap<String, Arc<Upstream>>,
}

pub struct Broker {
    config: std::sync::RwLock<Arc<Config>>,
    pub ctx: UpstreamContext,
    /// Upstreams replaced or removed by a reload, until they have stopped.
    pub retired: std::sync::Mutex<Vec<Arc<Upstream>>>,
    pub started: Instant,
    pub started_unix: u64,
    pub sessions: AtomicUsize,
    pub inflight: AtomicUsize,
    pub idle: Notify,
    pub draining: AtomicBool,
    /// One per client session being served (`broker.max_clients`).
    pub session_slots: Arc<tokio::sync::Semaphore>,
    pub registry: Arc<Registry>,
    pub catalog: Arc<crate::catalog::Catalog>,
    /// Search index per profile name.
    pub search_cache: std::sync::Mutex<HashMap<String, Arc<crate::facade::ProfileIndex>>>,
}

impl Broker {
    pub fn new(settings: Settings) -> Self {
        let max_clients = settings.broker.max_clients;
        let registry = Arc::new(Registry::default());
        let announce = registry.clone();
        let on_list_changed: ListChanged =
            Arc::new(move |upstream: &str| announce.list_changed(upstream));
        let ctx = UpstreamContext {
            passthrough: settings.broker.env_passthrough.clone(),
            secrets_dir: settings.runtime.secrets_dir(),
            max_frame_bytes: settings.broker.max_frame_bytes,
            max_list_bytes: settings.broker.max_tool_list_bytes,
            max_list_tools: settings.broker.max_tools_per_list,
            forward_meta: settings.broker.forward_meta_keys.clone(),
            timings: StopTimings::default(),
            ledger: Some(Ledger::new(ledger_dir(&settings.runtime.state_dir()))),
            on_list_changed: Some(on_list_changed),
            shared: SharedLimits {
                processes: Arc::new(tokio::sync::Semaphore::new(settings.broker.max_processes)),
                max_processes: settings.broker.max_processes,
            },
        };
        let upstreams = settings
            .upstreams
            .values()
            .map(|u| {
                (
                    u.name.clone(),
                    Arc::new(Upstream::new(u.clone(), ctx.clone())),
                )
            })
            .collect();
        let catalog = Arc::new(crate::catalog::Catalog::new(&settings));
        Self {
            catalog,
            search_cache: std::sync::Mutex::default(),
            config: std::sync::RwLock::new(Arc::new(Config {
                settings,
                upstreams,
            })),
            ctx,
            retired: std::sync::Mutex::default(),
            started: Instant::now(),
            started_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            sessions: AtomicUsize::new(0),
            inflight: AtomicUsize::new(0),
            idle: Notify::new(),
            draining: AtomicBool::new(false),
            session_slots: Arc::new(tokio::sync::Semaphore::new(max_clients)),
            registry,
        }
    }

    /// The current configuration generation.
    pub fn config(&self) -> Arc<Config> {
        match self.config.read() {
            Ok(c) => c.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    pub fn swap_config(&self, next: Config) {
        match self.config.write() {
            Ok(mut c) => *c = Arc::new(next),
            Err(poisoned) => *poisoned.into_inner() = Arc::new(next),
        }
    }

    /// Every upstream that may have processes: current ones and those retired by a reload.
    pub fn all_upstreams(&self) -> Vec<Arc<Upstream>> {
        let mut all: Vec<Arc<Upstream>> = self.config().upstreams.values().cloned().collect();
        if let Ok(r) = self.retired.lock() {
            all.extend(r.iter().cloned());
        }
        all
    }

    pub fn profile(&self, name: &str) -> Option<ProfileSettings> {
        self.config().settings.profiles.get(name).cloned()
    }

    /// Stops the per-session instances of an ended session, in the background: the ladder may
    /// take seconds and the session's connection is already closing.
    pub fn release_session(&self, session: u64) {
        for up in self.all_upstreams() {
            if up.settings().lifecycle == mcpb_config::Lifecycle::PerSession {
                let up = up.clone();
                tokio::spawn(async move { up.release_session(session).await });
            }
        }
    }

    /// Counts a request as in flight until the guard drops, so shutdown can drain.
    pub fn begin(self: &Arc<Self>) -> InflightGuard {
        self.inflight.fetch_add(1, Ordering::SeqCst);
        InflightGuard(self.clone())
    }

    /// What `tools/list` shows the profile: the facade plus pinned tools when compact, else
    /// every visible tool (an error when that exceeds `max_tools`, never a silent cut).
    pub async fn list_tools(
        &self,
        profile: &ProfileSettings,
        session: u64,
        facade: bool,
    ) -> Result<Value, BrokerRpcError> {
        let mut out = Vec::new();
        if facade {
            out = mcpb_facade::definitions(view::sep(profile), profile.result_size_chars);
            if profile.compact_tools_enabled {
                // The facade alone starts nothing; pinned tools come from the known lists.
                if !profile.pinned_tools.is_empty() {
                    let seen = self.seen_tools(profile, session, false).await;
                    out.extend(
                        seen.iter()
                            .filter(|s| view::is_pinned(profile, s))
                            .map(Seen::exposed_definition),
                    );
                }
                return Ok(serde_json::json!({ "tools": out }));
            }
        }
        let seen = self.seen_tools(profile, session, true).await;
        if let Some(max) = profile.max_tools
            && seen.len() > max as usize
        {
            return Err(BrokerRpcError::Internal(format!(
                "profile '{}' exposes {} tools, more than its max_tools ({max}); hint: turn on compact_tools_enabled, narrow its upstreams, or raise max_tools",
                profile.name,
                seen.len()
            )));
        }
        out.extend(seen.iter().map(Seen::exposed_definition));
        Ok(serde_json::json!({ "tools": out }))
    }

    /// Routes one `tools/call` (a facade tool or a raw one) and returns the response frame.
    pub async fn call_tool(
        &self,
        profile: &ProfileSettings,
        id: &RawValue,
        params: Option<&RawValue>,
        link: Arc<dyn ClientLink>,
        modern: bool,
        facade: bool,
    ) -> Vec<u8> {
        let session = link.session_id();
        let answer = match self.route_call(profile, params, link, facade).await {
            Ok(a) => a,
            Err(BrokerRpcError::UnknownTool(name)) => {
                let near = self.suggest(profile, &name, session).await;
                return BrokerRpcError::UnknownToolNear { name, near }.to_line(Some(id));
            }
            Err(e) => return e.to_line(Some(id)),
        };
        let reply = match answer {
            Answer::Upstream(r) => r,
            Answer::Result(v) => match to_raw(&v) {
                Ok(raw) => Reply::Result(raw),
                Err(e) => return BrokerRpcError::Internal(e.to_string()).to_line(Some(id)),
            },
        };
        match reply {
            Reply::Result(r) if needs_input(&r) => BrokerRpcError::Internal(
                "the upstream asked for more input (2026-07-28 input_required), which mcp-broker cannot relay yet".into(),
            )
            .to_line(Some(id)),
            Reply::Result(r) if modern => response_line(id, &modern_result(r)),
            Reply::Result(r) => response_line(id, &handshake_result(r)),
            Reply::Error(e) => raw_error_line(id, &e),
        }
    }

    async fn route_call(
        &self,
        profile: &ProfileSettings,
        params: Option<&RawValue>,
        link: Arc<dyn ClientLink>,
        facade: bool,
    ) -> Result<Answer, BrokerRpcError> {
        #[derive(Deserialize)]
        struct CallParams<'a> {
            #[serde(borrow)]
            name: Cow<'a, str>,
        }
        let params =
            params.ok_or_else(|| BrokerRpcError::InvalidParams("missing params".into()))?;
        let call: CallParams<'_> = serde_json::from_str(params.get())
            .map_err(|e| BrokerRpcError::InvalidParams(format!("tools/call params: {e}")))?;
        let exposed = call.name.as_ref();
        if facade
            && let Some(tool) = mcpb_facade::FacadeTool::from_name(view::sep(profile), exposed)
        {
            let value: Value = serde_json::from_str(params.get())
                .map_err(|e| BrokerRpcError::InvalidParams(format!("tools/call params: {e}")))?;
            return self.facade(tool, profile, &value, link).await;
        }
        let session = link.session_id();
        let seen = self.resolve(profile, exposed, session, true).await?;
        if profile.compact_tools_enabled && !view::is_pinned(profile, &seen) {
            return Err(BrokerRpcError::UnknownTool(exposed.to_string()));
        }
        let reply = seen.call(profile, session, params, link).await?;
        Ok(Answer::Upstream(reply))
    }
}

/// A 2026-07-28 upstream's multi-round-trip answer: it needs the client to supply input first.
pub(crate) fn needs_input(result: &RawValue) -> bool {
    mcpb_protocol::rewrite::member(result, "resultType")
        .is_some_and(|t| t.get() == "\"input_required\"")
}

/// A handshake-era upstream's result on its way to a 2026-07-28 client, which requires
/// `resultType`. Everything else stays as the upstream wrote it.
fn modern_result(result: Box<RawValue>) -> Box<RawValue> {
    if mcpb_protocol::rewrite::member(&result, "resultType").is_some() {
        return result;
    }
    mcpb_protocol::rewrite::with_members(&result, &[("resultType", "\"complete\"")])
        .unwrap_or(result)
}

/// A 2026-07-28 upstream's result on its way to a client of an earlier revision, which has no
/// `resultType`: the field goes, everything else stays as the upstream wrote it.
fn handshake_result(result: Box<RawValue>) -> Box<RawValue> {
    let complete = mcpb_protocol::rewrite::member(&result, "resultType")
        .is_some_and(|t| t.get() == "\"complete\"");
    if !complete {
        return result;
    }
    mcpb_protocol::rewrite::without_members(&result, &["resultType"]).unwrap_or(result)
}

pub fn upstream_error(e: UpstreamError) -> BrokerRpcError {
    match e {
        UpstreamError::Timeout { upstream, ms } => BrokerRpcError::Timeout { upstream, ms },
        UpstreamError::HardLimit { upstream, ms } => BrokerRpcError::HardLimit { upstream, ms },
        other => BrokerRpcError::UpstreamUnavailable {
            upstream: other.upstream().to_string(),
            reason: other.to_string(),
        },
    }
}

pub fn json_line(id: &RawValue, value: &Value) -> Vec<u8> {
    match to_raw(value) {
        Ok(raw) => response_line(id, &raw),
        Err(e) => BrokerRpcError::Internal(e.to_string()).to_line(Some(id)),
    }
}

pub struct InflightGuard(Arc<Broker>);

impl Drop for InflightGuard {
    fn drop(&mut self) {
        if self.0.inflight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}
