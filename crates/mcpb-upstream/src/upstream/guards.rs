//! Guards that stop an instance when the code holding it goes away early: a start abandoned by
//! its caller, a per-call instance whose call was cancelled.

use std::sync::Arc;

use super::{Upstream, UpstreamState};
use crate::instance::Instance;

/// An instance between spawn and the end of its handshake. Listed in `starting` so `stop`
/// reaches it; when the caller goes away mid-handshake (a cancelled request, a closed session)
/// the half-started process is stopped instead of left holding its capacity.
pub(crate) struct Starting<'a> {
    up: &'a Upstream,
    pub(crate) inst: Arc<Instance>,
    armed: bool,
}

impl<'a> Starting<'a> {
    pub(crate) fn new(up: &'a Upstream, inst: Arc<Instance>) -> Self {
        up.state.lock().starting.push(inst.clone());
        Self {
            up,
            inst,
            armed: true,
        }
    }

    pub(crate) fn done(&mut self) {
        self.armed = false;
    }
}

impl Drop for Starting<'_> {
    fn drop(&mut self) {
        self.up
            .state
            .lock()
            .starting
            .retain(|i| !Arc::ptr_eq(i, &self.inst));
        if self.armed && self.inst.is_alive() {
            tracing::info!(upstream = %self.up.settings().name, pid = self.inst.pid(), "start abandoned by its caller; stopping the half-started process");
            self.inst.request_stop();
            self.up.set_status(|s| {
                if s.state == UpstreamState::Starting {
                    s.state = UpstreamState::Stopped;
                }
            });
        }
    }
}

/// A per-call instance: stopped and forgotten however its call ends, cancelled included.
pub(crate) struct PerCallInstance<'a> {
    up: &'a Upstream,
    pub(crate) inst: Arc<Instance>,
}

impl<'a> PerCallInstance<'a> {
    pub(crate) fn new(up: &'a Upstream, inst: Arc<Instance>) -> Self {
        up.state.lock().per_call.push(inst.clone());
        Self { up, inst }
    }
}

impl Drop for PerCallInstance<'_> {
    fn drop(&mut self) {
        self.up
            .state
            .lock()
            .per_call
            .retain(|i| !Arc::ptr_eq(i, &self.inst));
        self.inst.request_stop();
    }
}
