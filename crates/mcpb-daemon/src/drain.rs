//! The drain primitive: every request holds a guard while it runs; shutdown raises the signal
//! (new requests are refused), then waits until no guard is left or a grace deadline passes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tokio::sync::Notify;

#[derive(Default)]
pub(crate) struct Drain {
    inflight: AtomicUsize,
    idle: Notify,
    draining: AtomicBool,
}

/// Held by one running request.
pub(crate) struct DrainGuard(Arc<Drain>);

impl Drain {
    /// Counts a request as in flight until the guard drops.
    pub(crate) fn begin(self: &Arc<Self>) -> DrainGuard {
        self.inflight.fetch_add(1, Ordering::SeqCst);
        DrainGuard(self.clone())
    }

    pub(crate) fn inflight(&self) -> usize {
        self.inflight.load(Ordering::SeqCst)
    }

    pub(crate) fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// From now on sessions refuse new requests.
    pub(crate) fn start(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// Resolves once no request is in flight.
    pub(crate) async fn idle(&self) {
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            // Registered before the check, so a guard dropped in between still wakes us.
            idle.as_mut().enable();
            if self.inflight() == 0 {
                return;
            }
            idle.await;
        }
    }

    /// Waits for the requests in flight to end, at most `grace`; false when the grace ran out.
    pub(crate) async fn wait(&self, grace: std::time::Duration) -> bool {
        tokio::time::timeout(grace, self.idle()).await.is_ok()
    }
}

impl Drop for DrainGuard {
    fn drop(&mut self) {
        if self.0.inflight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn waits_for_every_guard_then_reports_idle() {
        let drain = Arc::new(Drain::default());
        let a = drain.begin();
        let b = drain.begin();
        assert_eq!(drain.inflight(), 2);
        drain.start();
        assert!(drain.is_draining());
        let waiter = {
            let d = drain.clone();
            tokio::spawn(async move { d.wait(Duration::from_secs(30)).await })
        };
        tokio::time::sleep(Duration::from_secs(1)).await;
        drop(a);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!waiter.is_finished(), "one request still runs");
        drop(b);
        assert!(waiter.await.unwrap());
        assert_eq!(drain.inflight(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn the_grace_deadline_ends_the_wait() {
        let drain = Arc::new(Drain::default());
        let _stuck = drain.begin();
        let started = tokio::time::Instant::now();
        assert!(!drain.wait(Duration::from_secs(5)).await);
        assert_eq!(started.elapsed(), Duration::from_secs(5));
    }

    #[tokio::test]
    async fn idle_with_nothing_in_flight_is_immediate() {
        let drain = Arc::new(Drain::default());
        drop(drain.begin());
        drain.idle().await;
        assert!(!drain.is_draining());
    }
}
