//! The backend's circuit breaker: up while Redis answers; down after
//! [`FAILURES_TO_OPEN`] failures in a row, until an operation succeeds
//! again. The per-call path reads one flag.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Failures in a row that mark the backend down.
pub(crate) const FAILURES_TO_OPEN: u32 = 2;

#[derive(Debug)]
pub(crate) struct Breaker {
    up: AtomicBool,
    failures: AtomicU32,
    /// When the backend went down (while down), and the time spent down
    /// before that.
    down: Mutex<Option<Instant>>,
    down_nanos: AtomicU64,
}

impl Breaker {
    pub(crate) fn new() -> Self {
        Self {
            up: AtomicBool::new(true),
            failures: AtomicU32::new(0),
            down: Mutex::new(None),
            down_nanos: AtomicU64::new(0),
        }
    }

    /// Whether the fleet's buckets are in use (one shared read).
    #[inline]
    pub(crate) fn is_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    /// An operation succeeded: up again if it was down (logged once).
    pub(crate) fn success(&self, address: &str) {
        if self.failures.load(Ordering::Relaxed) != 0 {
            self.failures.store(0, Ordering::Relaxed);
        }
        if self.is_up() {
            return;
        }
        let mut down = self
            .down
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if let Some(since) = down.take() {
            let nanos = u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.down_nanos.fetch_add(nanos, Ordering::Relaxed);
            self.up.store(true, Ordering::Release);
            tracing::info!(
                redis = address,
                down_for = ?since.elapsed(),
                "tenant limits: Redis answers again; the fleet's buckets are back in use"
            );
        }
    }

    /// An operation failed (`why`, without credentials): down after
    /// [`FAILURES_TO_OPEN`] in a row (logged once, when it goes down).
    pub(crate) fn failure(&self, address: &str, why: &str) {
        let failures = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
        if failures < FAILURES_TO_OPEN || !self.is_up() {
            return;
        }
        let mut down = self
            .down
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if down.is_none() {
            *down = Some(Instant::now());
            self.up.store(false, Ordering::Release);
            tracing::warn!(
                redis = address,
                error = why,
                "tenant limits: Redis unavailable; each replica falls back to its recent share of each tenant's fleet traffic (rate ÷ replicas without one)"
            );
        }
    }

    /// Time spent down, in total (the current stretch included).
    pub(crate) fn time_down(&self) -> Duration {
        let past = Duration::from_nanos(self.down_nanos.load(Ordering::Relaxed));
        let down = self
            .down
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        past + down.map_or(Duration::ZERO, |since| since.elapsed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_failures_in_a_row_open_it_and_one_success_closes_it() {
        let breaker = Breaker::new();
        breaker.failure("a", "x");
        breaker.success("a");
        breaker.failure("a", "x");
        assert!(breaker.is_up(), "not two in a row");
        breaker.failure("a", "x");
        assert!(!breaker.is_up());
        assert!(breaker.time_down() > Duration::ZERO || breaker.time_down() == Duration::ZERO);
        breaker.success("a");
        assert!(breaker.is_up());
        let down = breaker.time_down();
        assert_eq!(breaker.time_down(), down, "no longer counting");
    }
}
