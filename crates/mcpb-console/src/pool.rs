//! The connections of the daemon's HTTP listeners (the HTTP front and the console), in two
//! pools. A new connection waits in a small pool of its own until one of its requests shows a
//! valid token (the front's bearer token, the console's key or session); then it moves to the
//! main pool. A connection that shows none within a short deadline is closed, and when the
//! waiting pool is full the oldest waiting connection makes room for the newest: anyone on the
//! machine can open connections, but connections without a token can never take the room of
//! requests with one.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// How long a connection may go without a request carrying a valid token.
pub const WAITING_DEADLINE: Duration = Duration::from_secs(3);

/// One accepted connection.
pub struct Conn {
    id: u64,
    permit: Mutex<Option<OwnedSemaphorePermit>>,
    evicted: std::sync::atomic::AtomicBool,
    changed: Notify,
}

impl Conn {
    /// Whether a valid token moved it to the main pool.
    pub fn admitted(&self) -> bool {
        self.permit.lock().is_some()
    }

    pub fn evicted(&self) -> bool {
        self.evicted.load(Ordering::Acquire)
    }

    /// Resolves when the connection is admitted or evicted.
    pub async fn changed(&self) {
        self.changed.notified().await;
    }
}

pub struct Pools {
    main: Arc<Semaphore>,
    waiting: Mutex<VecDeque<Arc<Conn>>>,
    next: AtomicU64,
    max_waiting: usize,
}

impl Pools {
    pub fn new(max_main: usize, max_waiting: usize) -> Self {
        Self {
            main: Arc::new(Semaphore::new(max_main)),
            waiting: Mutex::default(),
            next: AtomicU64::new(0),
            max_waiting: max_waiting.max(1),
        }
    }

    /// A new connection, in the waiting pool; the oldest waiting one is evicted when it is full.
    pub fn arrive(&self) -> Arc<Conn> {
        let conn = Arc::new(Conn {
            id: self.next.fetch_add(1, Ordering::Relaxed),
            permit: Mutex::new(None),
            evicted: std::sync::atomic::AtomicBool::new(false),
            changed: Notify::new(),
        });
        let mut waiting = self.waiting.lock();
        while waiting.len() >= self.max_waiting {
            if let Some(old) = waiting.pop_front() {
                old.evicted.store(true, Ordering::Release);
                old.changed.notify_one();
            }
        }
        waiting.push_back(conn.clone());
        conn
    }

    /// Moves `conn` to the main pool after a request with a valid token; false when the main
    /// pool is full.
    pub fn admit(&self, conn: &Conn) -> bool {
        let mut permit = conn.permit.lock();
        if permit.is_some() {
            return true;
        }
        let Ok(p) = self.main.clone().try_acquire_owned() else {
            return false;
        };
        *permit = Some(p);
        drop(permit);
        self.waiting.lock().retain(|c| c.id != conn.id);
        conn.changed.notify_one();
        true
    }

    /// The connection closed.
    pub fn leave(&self, conn: &Conn) {
        self.waiting.lock().retain(|c| c.id != conn.id);
    }

    /// Connections waiting to show a token.
    pub fn waiting(&self) -> usize {
        self.waiting.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiting_connections_never_take_the_room_of_admitted_ones() {
        let pools = Pools::new(2, 3);
        let first: Vec<_> = (0..3).map(|_| pools.arrive()).collect();
        // A fourth arrival evicts the oldest waiting connection, never refuses the newcomer.
        let fourth = pools.arrive();
        assert!(first[0].evicted() && !first[1].evicted());
        assert_eq!(pools.waiting(), 3);
        assert!(pools.admit(&fourth));
        assert!(fourth.admitted() && !fourth.evicted());
        assert_eq!(pools.waiting(), 2);
        // A flood of waiting connections evicts only waiting ones.
        for _ in 0..100 {
            pools.arrive();
        }
        assert!(!fourth.evicted());
        let second = pools.arrive();
        assert!(pools.admit(&second));
        let third = pools.arrive();
        assert!(!pools.admit(&third), "the main pool is full");
        pools.leave(&third);
        assert_eq!(pools.waiting(), 2);
        // A closed admitted connection gives its room back.
        drop(second);
        assert!(pools.admit(&pools.arrive()));
    }
}
