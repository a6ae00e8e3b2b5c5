//! An upstream's changing state, under the one lock `Upstream` holds it in: restart health,
//! the instances that run or start, the last tool list, what the handshake learnt, the status.

use std::collections::HashMap;
use std::sync::Arc;

use mcpb_config::Lifecycle;

use crate::health::Health;
use crate::instance::Instance;
use crate::status::UpstreamStatus;

/// Held while an instance for one slot (the shared one, or one session's) is started, so two
/// callers never start two; the instance itself lives in `State`.
pub(crate) type StartGate = Arc<tokio::sync::Mutex<()>>;

/// Everything about an upstream that changes, under one lock. The lock is never held across an
/// `.await` and cannot be poisoned (parking_lot), so `status()` always answers.
pub(crate) struct State {
    pub(crate) health: Health,
    /// Instances between spawn and the end of their handshake, so `stop` reaches them too.
    pub(crate) starting: Vec<Arc<Instance>>,
    /// The instance of a shared upstream.
    pub(crate) shared: Option<Arc<Instance>>,
    /// Each session's own instance (per_session), and the gate of each session's start.
    pub(crate) sessions: HashMap<u64, Arc<Instance>>,
    pub(crate) session_gates: HashMap<u64, StartGate>,
    pub(crate) per_call: Vec<Arc<Instance>>,
    /// The last tool list the upstream sent (the daemon's catalog judges it).
    pub(crate) tools: Option<Arc<Vec<mcpb_protocol::Tool>>>,
    /// How the next start speaks to the upstream.
    pub(crate) probe: Probe,
    /// A background start after failures is under way (lists never wait for one).
    pub(crate) retrying: bool,
    /// A tool list refresh is running; `refreshed` wakes those waiting for it.
    pub(crate) refreshing: bool,
    /// When the last refresh was due to start (see `listing::REFRESH_SPACING`).
    pub(crate) last_refresh: Option<std::time::Instant>,
    /// Open sessions that called it (or read from it): a shared instance is not stopped for
    /// idleness while one of them is open.
    pub(crate) users: std::collections::HashSet<u64>,
    pub(crate) status: UpstreamStatus,
}

/// What the broker learnt about an upstream's handshake.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Probe {
    /// Probing `server/discover` killed the upstream: use `initialize` only.
    pub(crate) handshake_only: bool,
    /// A start has answered `server/discover` as a 2026-07-28 server.
    pub(crate) seen_modern: bool,
    /// The probe went unanswered once: starts use `initialize` only, until it is refused.
    pub(crate) skip: bool,
}

impl State {
    /// The instance serving `session`: the shared one, or the session's own.
    pub(crate) fn instance(&self, lifecycle: Lifecycle, session: u64) -> Option<Arc<Instance>> {
        match lifecycle {
            Lifecycle::PerSession => self.sessions.get(&session).cloned(),
            Lifecycle::Shared | Lifecycle::PerCall | Lifecycle::Disabled => self.shared.clone(),
        }
    }

    pub(crate) fn set_instance(
        &mut self,
        lifecycle: Lifecycle,
        session: u64,
        inst: Option<Arc<Instance>>,
    ) {
        match (lifecycle, inst) {
            (Lifecycle::PerSession, Some(i)) => {
                self.sessions.insert(session, i);
            }
            (Lifecycle::PerSession, None) => {
                self.sessions.remove(&session);
            }
            (_, inst) => self.shared = inst,
        }
    }

    /// Every instance that runs now (not those still starting).
    pub(crate) fn running(&self) -> Vec<Arc<Instance>> {
        self.shared
            .iter()
            .chain(self.sessions.values())
            .chain(&self.per_call)
            .filter(|i| i.is_alive())
            .cloned()
            .collect()
    }
}
