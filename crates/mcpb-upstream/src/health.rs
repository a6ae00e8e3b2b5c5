//! Restart discipline for one upstream.

use std::collections::VecDeque;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Restart discipline: exponential backoff with jitter between attempts, and a failfast period
/// once an upstream failed too often in a short window, so a broken server costs callers an
/// immediate error instead of a start attempt each.
#[derive(Debug, Default)]
pub(crate) struct Health {
    consecutive: u32,
    recent: VecDeque<Instant>,
    pub(crate) next_attempt: Option<Instant>,
    pub(crate) failfast_until: Option<Instant>,
}

const BACKOFF_BASE: Duration = Duration::from_millis(250);
const BACKOFF_MAX: Duration = Duration::from_secs(8);
const FAILFAST_AFTER: usize = 5;
const FAILFAST_WINDOW: Duration = Duration::from_secs(60);
const FAILFAST_FOR: Duration = Duration::from_secs(30);

impl Health {
    pub(crate) fn failed(&mut self, now: Instant) {
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

    /// The latest start (or run) failed and none has worked since.
    pub(crate) fn failing(&self) -> bool {
        self.consecutive > 0
    }

    pub(crate) fn succeeded(&mut self) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn delay(h: &Health, now: Instant) -> Duration {
        h.next_attempt.unwrap().duration_since(now)
    }

    #[test]
    fn backoff_doubles_with_jitter_and_stops_at_the_maximum() {
        let mut h = Health::default();
        let now = Instant::now();
        let mut last = Duration::ZERO;
        for n in 0..4u32 {
            h.failed(now);
            let d = delay(&h, now);
            let base = BACKOFF_BASE * 2u32.pow(n);
            assert!(
                d >= base.mul_f64(0.79) && d <= base.mul_f64(1.21),
                "{n}: {d:?}"
            );
            assert!(d > last);
            last = d;
        }
        let mut h = Health::default();
        for _ in 0..30 {
            h.failed(now - FAILFAST_WINDOW * 2);
        }
        assert!(delay(&h, now - FAILFAST_WINDOW * 2) <= BACKOFF_MAX.mul_f64(1.21));
    }

    #[test]
    fn five_failures_within_a_minute_open_a_failfast_window() {
        let mut h = Health::default();
        let start = Instant::now();
        for i in 0..4 {
            h.failed(start + Duration::from_secs(i));
            assert!(h.failfast_until.is_none());
        }
        let fifth = start + Duration::from_secs(4);
        h.failed(fifth);
        assert_eq!(h.failfast_until, Some(fifth + FAILFAST_FOR));
        assert!(h.failing());
    }

    #[test]
    fn failures_spread_over_more_than_a_minute_never_failfast() {
        let mut h = Health::default();
        let start = Instant::now();
        for i in 0..10u64 {
            h.failed(start + Duration::from_secs(20 * i));
        }
        assert!(h.failfast_until.is_none());
    }

    #[test]
    fn a_success_clears_backoff_failfast_and_failing() {
        let mut h = Health::default();
        let now = Instant::now();
        for _ in 0..FAILFAST_AFTER {
            h.failed(now);
        }
        assert!(h.failfast_until.is_some() && h.failing());
        h.succeeded();
        assert!(h.failfast_until.is_none() && h.next_attempt.is_none() && !h.failing());
        h.failed(now);
        let d = delay(&h, now);
        assert!(
            d <= BACKOFF_BASE.mul_f64(1.21),
            "the count starts over: {d:?}"
        );
    }
}
