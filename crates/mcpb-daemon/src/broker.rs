//! The daemon's lifecycle state: the current configuration generation (swapped by a reload),
//! upstreams retired by a reload until they stop, the registry of open sessions, the known tool
//! lists, the drain of running requests, and the session slots. Requests do not work on the
//! broker itself: each takes a `ProfileView` of it.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Instant;

use mcpb_config::{Lifecycle, ProfileSettings, Settings};
use mcpb_upstream::{
    Ledger, ListChanged, Shared as SharedLimits, StopTimings, Upstream, UpstreamContext, ledger_dir,
};
use parking_lot::{Mutex, RwLock};

use crate::drain::Drain;
use crate::generation::Generation;
use crate::known::KnownLists;
use crate::link::Registry;
use crate::view::{ProfileView, SearchCache};

pub(crate) struct Broker {
    generation: RwLock<Arc<Generation>>,
    /// What every upstream gets from the daemon; upstreams a reload adds get the same.
    pub(crate) ctx: UpstreamContext,
    /// Upstreams replaced or removed by a reload, until they have stopped.
    pub(crate) retired: Mutex<Vec<Arc<Upstream>>>,
    pub(crate) started: Instant,
    pub(crate) started_unix: u64,
    /// Sessions open now (for status).
    pub(crate) sessions: AtomicUsize,
    /// Sessions waiting for one of `max_clients` slots (for status).
    pub(crate) waiting_sessions: AtomicUsize,
    pub(crate) drain: Arc<Drain>,
    /// One per client session being served (`broker.max_clients`).
    pub(crate) session_slots: Arc<tokio::sync::Semaphore>,
    pub(crate) registry: Arc<Registry>,
    pub(crate) known: Arc<KnownLists>,
    searches: Arc<SearchCache>,
    /// Tool list fetches begun by listings and searches, shared by all of them.
    fetches: Arc<crate::view::ListFetches>,
    /// Code runs: workspaces and the runner, set up at start (start-only settings).
    exec: Arc<crate::exec::Exec>,
    /// Which upstream listed which resource URI.
    owners: Arc<crate::view::ResourceOwners>,
    /// Which sessions subscribed to which resource.
    pub(crate) subscriptions: Arc<crate::notices::Subscriptions>,
    /// Tool calls counted, and written to the audit log.
    pub(crate) calls: Arc<crate::calls::Calls>,
    /// The web console once `mcp-broker console` started it.
    pub(crate) console: Mutex<Option<ConsoleSlot>>,
    /// Why the daemon serves the last valid copy of its config file instead of the file (it
    /// did not load when the daemon started), until a reload reads the file.
    pub(crate) config_warning: Mutex<Option<String>>,
}

/// A console serving: its address, the settings it was started with, and its own stop (kept
/// here so a reload can stop it; `console.rs` starts it).
pub(crate) struct ConsoleSlot {
    pub(crate) url: String,
    pub(crate) settings: mcpb_config::console::ConsoleSettings,
    pub(crate) stop: Arc<tokio::sync::watch::Sender<bool>>,
}

impl Broker {
    pub(crate) fn new(settings: Settings) -> Self {
        let max_clients = settings.broker.max_clients;
        let registry = Arc::new(Registry::default());
        let announce = registry.clone();
        let on_list_changed: ListChanged =
            Arc::new(move |upstream: &str| announce.list_changed(upstream));
        let subscriptions = Arc::new(crate::notices::Subscriptions::default());
        let (to_sessions, subs) = (registry.clone(), subscriptions.clone());
        let on_notice: mcpb_upstream::Notice = Arc::new(move |upstream, method, params| {
            crate::notices::deliver(&to_sessions, &subs, upstream, method, params);
        });
        let ctx = UpstreamContext {
            passthrough: settings.broker.env_passthrough.clone(),
            secrets_dir: settings.runtime.secrets_dir(),
            state_dir: Some(settings.runtime.state_dir()),
            max_frame_bytes: settings.broker.max_frame_bytes,
            max_list_bytes: settings.broker.max_tool_list_bytes,
            max_list_tools: settings.broker.max_tools_per_list,
            forward_meta: settings.broker.forward_meta_keys.clone(),
            timings: StopTimings::default(),
            ledger: Some(Ledger::new(ledger_dir(&settings.runtime.state_dir()))),
            on_list_changed: Some(on_list_changed),
            on_notice: Some(on_notice),
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
        let known = Arc::new(KnownLists::new(&settings));
        let exec = Arc::new(crate::exec::Exec::new(&settings));
        let audit = &settings.broker.audit;
        let calls = Arc::new(crate::calls::Calls::new(
            audit.enabled.then(|| settings.runtime.audit_path()),
            settings.broker.log_max_bytes,
            audit.arguments,
        ));
        Self {
            calls,
            console: Mutex::default(),
            config_warning: Mutex::default(),
            known,
            exec,
            owners: Arc::default(),
            subscriptions,
            searches: Arc::default(),
            fetches: Arc::default(),
            generation: RwLock::new(Arc::new(Generation::new(settings, upstreams))),
            ctx,
            retired: Mutex::default(),
            started: Instant::now(),
            started_unix: mcpb_config::unix_now(),
            sessions: AtomicUsize::new(0),
            waiting_sessions: AtomicUsize::new(0),
            drain: Arc::default(),
            session_slots: Arc::new(tokio::sync::Semaphore::new(max_clients)),
            registry,
        }
    }

    /// The current configuration generation.
    /// Ends the code-run jails started ahead of their runs (the daemon is stopping).
    pub(crate) async fn stop_code_pool(&self) {
        self.exec.runner.clear_pool().await;
    }

    pub(crate) fn config(&self) -> Arc<Generation> {
        self.generation.read().clone()
    }

    pub(crate) fn swap_config(&self, next: Generation) {
        *self.generation.write() = Arc::new(next);
    }

    /// A profile's view for one request of `session`, on the current generation.
    pub(crate) fn view(&self, profile: Arc<ProfileSettings>, session: u64) -> ProfileView {
        let shared = crate::view::Shared {
            known: self.known.clone(),
            searches: self.searches.clone(),
            exec: self.exec.clone(),
            owners: self.owners.clone(),
            subscriptions: self.subscriptions.clone(),
            calls: self.calls.clone(),
            registry: self.registry.clone(),
            fetches: self.fetches.clone(),
        };
        ProfileView::new(self.config(), shared, profile, session)
    }

    /// Every upstream that may have processes: current ones and those retired by a reload.
    pub(crate) fn all_upstreams(&self) -> Vec<Arc<Upstream>> {
        let mut all: Vec<Arc<Upstream>> = self.config().upstreams.values().cloned().collect();
        all.extend(self.retired.lock().iter().cloned());
        all
    }

    pub(crate) fn profile(&self, name: &str) -> Option<ProfileSettings> {
        self.config().settings.profiles.get(name).cloned()
    }

    /// Tells each shared upstream still running about the resources an ended session was the
    /// last subscriber of (a per-session instance stops with its session anyway; a stopped
    /// upstream is not started for it).
    pub(crate) fn unsubscribe_orphans(&self, session: u64, orphaned: Vec<(String, String)>) {
        let generation = self.config();
        for (name, uri) in orphaned {
            let Some(up) = generation.upstreams.get(&name).cloned() else {
                continue;
            };
            if up.settings().lifecycle != Lifecycle::Shared || !up.running_for(session) {
                continue;
            }
            let subs = self.subscriptions.clone();
            tokio::spawn(async move {
                // A session that subscribed again meanwhile keeps the upstream's subscription.
                if subs.has_subscribers(&name, &uri) {
                    return;
                }
                let params = serde_json::json!({ "uri": uri }).to_string();
                let Ok(raw) = serde_json::value::RawValue::from_string(params) else {
                    return;
                };
                let opts = mcpb_upstream::CallOptions {
                    idle_timeout: up.settings().call_timeout,
                    max_time: up.settings().call_timeout,
                    link: None,
                };
                let outgoing = mcpb_upstream::Outgoing::Request {
                    method: "resources/unsubscribe",
                    params: Some(&raw),
                };
                if let Err(e) = up.call(session, outgoing, &opts).await {
                    tracing::debug!(upstream = up.name(), error = %e, "unsubscribe after a session ended failed");
                }
            });
        }
    }

    /// A session ended. `check`: it was one of the broker's own checks (`client import`'s parity
    /// calls), and the shared servers nobody else uses stop now rather than after their idle
    /// time: a check teaches the catalog and leaves nothing running.
    pub(crate) fn release_session(&self, session: u64, check: bool) {
        // A listing's start of the session's own instance stops first (a half-started process
        // is killed at once), then what the session had running.
        self.fetches.close_session(session);
        for up in self.all_upstreams() {
            up.forget_session(session);
            if check {
                let up = up.clone();
                tokio::spawn(async move { up.stop_after_check().await });
            }
            if up.settings().lifecycle == Lifecycle::PerSession {
                tokio::spawn(async move { up.release_session(session).await });
            }
        }
    }
}
