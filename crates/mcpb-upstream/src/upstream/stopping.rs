//! Ending an upstream's instances: a session's own on release, idle ones, all of them at
//! shutdown (the stop ladder), or at once with SIGKILL for a daemon told twice.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use mcpb_config::Lifecycle;

use super::{Upstream, UpstreamState};
use crate::instance::Instance;
use crate::state::StartGate;

impl Upstream {
    /// A session ended (or asked to close): its per-session instance stops, after any start of
    /// it under way. Returns whether an instance was running for it.
    pub async fn release_session(&self, session: u64) -> bool {
        // The gate stays registered until its start is over: a caller dropped while waiting
        // here leaves everything in place for the next release, and a new call of the session
        // meanwhile waits on the same gate instead of starting a second instance.
        let gate = {
            let mut state = self.state.lock();
            state.users.remove(&session);
            state.session_gates.get(&session).cloned()
        };
        let Some(gate) = gate else {
            return false;
        };
        let _started = gate.lock().await;
        let inst = {
            let mut state = self.state.lock();
            state.session_gates.remove(&session);
            state.sessions.remove(&session)
        };
        match inst {
            Some(inst) => {
                inst.stop().await;
                true
            }
            None => false,
        }
    }

    /// The shared instance a check started for itself (a listing to compare or measure), when
    /// no session has used it since and no call holds it: stopped, so a check leaves nothing
    /// running. An eager server keeps running.
    pub async fn stop_after_check(&self) {
        if self.settings.lifecycle != Lifecycle::Shared
            || self.settings.start == mcpb_config::StartMode::Eager
        {
            return;
        }
        let inst = {
            let mut state = self.state.lock();
            let quiet = state
                .shared
                .as_ref()
                .is_some_and(|i| i.idle_for().is_some());
            if !quiet || !state.users.is_empty() || self.shared_gate.try_lock().is_err() {
                return;
            }
            state.shared.take()
        };
        if let Some(inst) = inst {
            inst.stop().await;
            self.forget_announced_change();
            self.set_status(|s| {
                s.state = UpstreamState::Stopped;
                s.pid = None;
                s.stopped_because = Some("starts on first use (stopped after a check)".into());
            });
        }
    }

    /// A change the stopped process announced is not the next one's: kept, it would make the
    /// next listing start the server to refresh a list the catalog answers (a server that
    /// announces a change as it starts, as the reference `everything` does, would never stay
    /// stopped). The next start lists anew, and a call's start compares that list with the
    /// catalog and the pins before the call runs.
    fn forget_announced_change(&self) {
        self.tools_stale
            .store(false, std::sync::atomic::Ordering::SeqCst);
    }

    /// Stops one instance, counted as stopping until its process group is gone (a start meanwhile
    /// waits for its slot rather than failing at `max_instances`).
    async fn stop_one(&self, inst: &Instance) {
        /// Counts down however the stop ends, dropped midway included.
        struct Counted<'a>(&'a AtomicUsize);
        impl Drop for Counted<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        self.stopping.fetch_add(1, Ordering::SeqCst);
        let _counted = Counted(&self.stopping);
        inst.stop().await;
    }

    /// A session ended: it no longer holds a shared instance up (see `stop_idle`).
    pub fn forget_session(&self, session: u64) {
        self.state.lock().users.remove(&session);
    }

    /// Stops instances that had no request for `idle_timeout`; the next call starts one again.
    /// A shared instance stays while a call is in flight, an open session has used it, or
    /// `held` (a client's subscription to one of its resources; it holds a session's own
    /// instance too); a slot whose start is under way is left alone.
    pub async fn stop_idle(&self, held: bool) {
        let Some(limit) = self.settings.idle_timeout else {
            return;
        };
        let idle = |i: &Arc<Instance>| i.is_alive() && i.idle_for().is_some_and(|d| d >= limit);
        let mut stopping = Vec::new();
        {
            let mut state = self.state.lock();
            let unused = !held && state.users.is_empty();
            if unused
                && self.shared_gate.try_lock().is_ok()
                && state.shared.as_ref().is_some_and(idle)
            {
                stopping.extend(state.shared.take());
            }
            // A subscription holds the session instances too: the one that took it would
            // otherwise be replaced by a start that knows nothing of it.
            let sessions: Vec<u64> = state
                .sessions
                .iter()
                .filter(|(_, i)| !held && idle(i))
                .map(|(id, _)| *id)
                .collect();
            for id in sessions {
                let free = state
                    .session_gates
                    .get(&id)
                    .is_none_or(|g| g.try_lock().is_ok());
                if free {
                    stopping.extend(state.sessions.remove(&id));
                }
            }
        }
        for inst in stopping {
            tracing::info!(upstream = %self.settings.name, pid = inst.pid(), "stopping idle upstream");
            self.stop_one(&inst).await;
            if self.settings.lifecycle == Lifecycle::Shared {
                self.forget_announced_change();
                let why = format!(
                    "idle for {}s with no session using it; starts again on its next call",
                    limit.as_secs()
                );
                self.set_status(|s| {
                    s.state = UpstreamState::Stopped;
                    s.pid = None;
                    s.stopped_because = Some(why);
                });
            }
        }
    }

    /// Stops every instance, including those still in their handshake, with the stop ladder.
    pub async fn stop(&self) {
        let starting = std::mem::take(&mut self.state.lock().starting);
        for inst in &starting {
            inst.stop().await;
        }
        // Starts under way end (their process is gone) before their slots are emptied.
        let _shared = self.shared_gate.lock().await;
        let gates: Vec<StartGate> = self
            .state
            .lock()
            .session_gates
            .drain()
            .map(|(_, g)| g)
            .collect();
        for gate in gates {
            let _ = gate.lock().await;
        }
        let all: Vec<Arc<Instance>> = {
            let mut state = self.state.lock();
            let mut all: Vec<Arc<Instance>> = state.shared.take().into_iter().collect();
            all.extend(state.sessions.drain().map(|(_, i)| i));
            all.extend(state.per_call.iter().cloned());
            all
        };
        for inst in all {
            self.stop_one(&inst).await;
        }
        // As after an idle stop: the next listing answers from the catalog, the next call's
        // start lists anew.
        self.forget_announced_change();
        self.set_status(|s| {
            if s.state != UpstreamState::Disabled {
                s.state = UpstreamState::Stopped;
            }
            s.pid = None;
        });
    }

    /// SIGKILL to every instance's process group, without waiting: for a daemon told twice to
    /// stop.
    pub fn kill_now(&self) {
        let pids: Vec<u32> = {
            let state = self.state.lock();
            state
                .running()
                .iter()
                .chain(&state.starting)
                .filter_map(|i| i.pid())
                .collect()
        };
        for pid in pids {
            crate::process::signal_group(pid, rustix::process::Signal::KILL);
        }
    }
}
