//! The rate limit's state machine: GCRA (the generic cell rate algorithm)
//! over one `AtomicU64` per tenant, as governor's direct limiter keeps it.
//!
//! The state is the tenant's theoretical arrival time (TAT), in
//! nanoseconds since the limiter's epoch. A call at `now` is allowed when
//! `TAT <= now + tolerance`, and then moves the TAT to
//! `max(TAT, now) + interval`. With `interval = 1 s / rate` and
//! `tolerance = interval × (burst − 1)`, a tenant idle long enough has
//! `burst` calls at once, then one per `interval`.
//!
//! The parameters are not part of the state: each check takes the
//! tenant's current ones, so a new quota applies from the next call on,
//! starting from the bucket the old one left (a TAT is a point in time,
//! meaningful under any quota).

use std::sync::atomic::{AtomicU64, Ordering};

use super::config::Rate;

/// The GCRA parameters of one rate, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Gcra {
    /// Time between two calls at the steady rate (at least 1 ns).
    interval: u64,
    /// How far ahead of `now` the TAT may be: `interval × (burst − 1)`.
    tolerance: u64,
}

impl Gcra {
    /// The parameters of `rate` shared among `replicas` replicas: each
    /// gets `per_second / replicas` (Cortex's global strategy); the burst
    /// is not divided (as in Cortex, a burst must still let one request
    /// through).
    pub(crate) fn of(rate: Rate, replicas: u32) -> Self {
        let per_second = rate.per_second / f64::from(replicas.max(1));
        // Saturating float-to-int conversion: a tiny rate gives the
        // largest interval, a huge one 1 ns.
        let interval = ((1e9 / per_second) as u64).max(1);
        Self {
            interval,
            tolerance: interval.saturating_mul(u64::from(rate.burst.max(1) - 1)),
        }
    }
}

/// One tenant's rate-limit state: its TAT, 0 for a full bucket.
#[derive(Debug, Default)]
pub(crate) struct GcraState {
    tat: AtomicU64,
}

impl GcraState {
    /// Takes one call's worth of the bucket at `now` (ns since the epoch);
    /// false (and nothing written) when the call is over the rate.
    #[inline]
    pub(crate) fn try_acquire(&self, gcra: Gcra, now: u64) -> bool {
        let mut tat = self.tat.load(Ordering::Relaxed);
        loop {
            if tat > now.saturating_add(gcra.tolerance) {
                return false;
            }
            let next = tat.max(now).saturating_add(gcra.interval);
            match self
                .tat
                .compare_exchange_weak(tat, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(current) => tat = current,
            }
        }
    }

    /// Gives back one call's worth taken by [`try_acquire`](Self::try_acquire)
    /// (a call admitted by the rate but refused by another limit).
    pub(crate) fn refund(&self, gcra: Gcra) {
        // `fetch_update` with a closure that never fails: always `Ok`.
        let _ = self
            .tat
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |tat| {
                Some(tat.saturating_sub(gcra.interval))
            });
    }

    /// Whether the bucket is full at `now`: the state is that of a tenant
    /// never seen.
    #[inline]
    pub(crate) fn is_full(&self, now: u64) -> bool {
        self.tat.load(Ordering::Acquire) <= now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;

    fn rate(per_second: f64, burst: u32) -> Gcra {
        Gcra::of(Rate::new(per_second, burst).unwrap(), 1)
    }

    #[test]
    fn a_full_bucket_allows_exactly_the_burst_then_one_per_interval() {
        let gcra = rate(10.0, 5);
        let state = GcraState::default();
        let now = 7 * SECOND;
        assert!(state.is_full(now));
        assert_eq!((0..20).filter(|_| state.try_acquire(gcra, now)).count(), 5);
        assert!(!state.is_full(now));
        // One interval (100 ms) later, one more.
        let later = now + SECOND / 10;
        assert!(state.try_acquire(gcra, later));
        assert!(!state.try_acquire(gcra, later));
        // Long idle: full again, the burst again (not more).
        let idle = later + 10 * SECOND;
        assert!(state.is_full(idle));
        assert_eq!((0..20).filter(|_| state.try_acquire(gcra, idle)).count(), 5);
    }

    #[test]
    fn a_refund_gives_back_one_call() {
        let gcra = rate(1.0, 2);
        let state = GcraState::default();
        assert!(state.try_acquire(gcra, SECOND));
        assert!(state.try_acquire(gcra, SECOND));
        assert!(!state.try_acquire(gcra, SECOND));
        state.refund(gcra);
        assert!(state.try_acquire(gcra, SECOND));
        assert!(!state.try_acquire(gcra, SECOND));
    }

    #[test]
    fn a_new_quota_starts_from_the_bucket_the_old_one_left() {
        let state = GcraState::default();
        let now = SECOND;
        let old = rate(1.0, 3);
        assert_eq!((0..3).filter(|_| state.try_acquire(old, now)).count(), 3);
        // A larger burst: the 3 calls already made still count.
        let new = rate(1.0, 5);
        assert_eq!((0..10).filter(|_| state.try_acquire(new, now)).count(), 2);
    }

    #[test]
    fn the_global_strategy_divides_the_rate_not_the_burst() {
        let local = rate(30.0, 4);
        let global = Gcra::of(Rate::new(30.0, 4).unwrap(), 3);
        assert_eq!(local.interval, 33_333_333);
        assert_eq!(global.interval, 100_000_000);
        let state = GcraState::default();
        assert_eq!((0..10).filter(|_| state.try_acquire(global, 0)).count(), 4);
        assert!(!state.try_acquire(global, SECOND / 10 - 1));
        assert!(state.try_acquire(global, SECOND / 10));
    }

    #[test]
    fn extreme_rates_saturate_instead_of_overflowing() {
        let slow = rate(1e-300, u32::MAX);
        let state = GcraState::default();
        assert!(state.try_acquire(slow, 0));
        assert!(state.try_acquire(slow, 0));
        let fast = rate(1e300, 1);
        assert_eq!(fast.interval, 1);
        let state = GcraState::default();
        assert!(state.try_acquire(fast, 5));
        assert!(!state.try_acquire(fast, 5));
        assert!(state.try_acquire(fast, 6));
    }
}
