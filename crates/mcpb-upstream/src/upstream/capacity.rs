//! Process slots: an upstream's `max_instances` and the broker's `max_processes`, taken
//! before a process is spawned and held until its process group is gone.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::Upstream;
use crate::UpstreamError;

impl Upstream {
    /// A slot for one more process of this upstream (and of the broker); none free fails at
    /// once, unless an instance of this upstream is being stopped (for idleness, say): it holds
    /// its slot until its process group is gone, and a call that comes just then waits for
    /// that (up to `queue_timeout`) and starts.
    pub(super) async fn reserve_process(&self) -> Result<Vec<OwnedSemaphorePermit>, UpstreamError> {
        let limit = if self.stopping.load(Ordering::SeqCst) > 0 {
            self.settings.queue_timeout
        } else {
            std::time::Duration::ZERO
        };
        let at_capacity = |reason: String| UpstreamError::AtCapacity {
            upstream: self.settings.name.clone(),
            reason,
        };
        let own = acquire_within(&self.instances, limit)
            .await
            .ok_or_else(|| {
                at_capacity(format!(
                    "it already runs max_instances ({}) processes",
                    self.settings.max_instances
                ))
            })?;
        if self.settings.transport.is_remote() {
            // A remote upstream runs no process here.
            return Ok(vec![own]);
        }
        let global = acquire_within(&self.ctx.shared.processes, limit)
            .await
            .ok_or_else(|| {
                at_capacity(format!(
                    "the broker already runs broker.max_processes ({}) upstream processes",
                    self.ctx.shared.max_processes
                ))
            })?;
        Ok(vec![own, global])
    }
}

/// A permit of `sem` at once, else within `limit`; `None` when none freed up in time.
async fn acquire_within(
    sem: &Arc<Semaphore>,
    limit: std::time::Duration,
) -> Option<OwnedSemaphorePermit> {
    if let Ok(p) = sem.clone().try_acquire_owned() {
        return Some(p);
    }
    if limit.is_zero() {
        return None;
    }
    tokio::time::timeout(limit, sem.clone().acquire_owned())
        .await
        .ok()?
        .ok()
}
