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
//! tenant's current ones, so a new quota applies from the next call on.
//! The state remembers the interval its TAT was charged with; under a new
//! interval the TAT is rescaled once, so that the calls already counted
//! (`(TAT − now) / interval` of them) still count under the new quota,
//! capped at an empty bucket: raising a limit adds the difference at
//! once, lowering it leaves at most an empty bucket, never a debt beyond.

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

/// One tenant's rate-limit state: its TAT, 0 for a full bucket, and the
/// interval it was charged with (0 before the first call).
#[derive(Debug, Default)]
pub(crate) struct GcraState {
    tat: AtomicU64,
    interval: AtomicU64,
}

impl GcraState {
    /// Takes one call's worth of the bucket at `now` (ns since the epoch);
    /// false (and nothing written) when the call is over the rate.
    #[inline]
    pub(crate) fn try_acquire(&self, gcra: Gcra, now: u64) -> bool {
        let charged = self.interval.load(Ordering::Acquire);
        if charged != gcra.interval {
            self.requote(charged, gcra, now);
        }
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

    /// Rescales the TAT charged with `charged` ns per call to `gcra`'s
    /// interval: the calls it counts stay counted, at most an empty
    /// bucket's worth. One thread does it (the one that swaps the
    /// interval); a call racing it in those nanoseconds may be judged on
    /// the TAT before the rescale.
    #[cold]
    fn requote(&self, charged: u64, gcra: Gcra, now: u64) {
        if self
            .interval
            .compare_exchange(charged, gcra.interval, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
            || charged == 0
        {
            return;
        }
        let empty = gcra.tolerance.saturating_add(gcra.interval);
        let _ = self
            .tat
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |tat| {
                let debt = tat.saturating_sub(now);
                if debt == 0 {
                    return Some(tat);
                }
                let counted = debt as f64 / charged as f64;
                let rescaled = (counted * gcra.interval as f64).min(empty as f64) as u64;
                Some(now.saturating_add(rescaled))
            });
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
    fn a_new_burst_counts_the_calls_already_made() {
        let state = GcraState::default();
        let now = SECOND;
        let old = rate(1.0, 3);
        assert_eq!((0..3).filter(|_| state.try_acquire(old, now)).count(), 3);
        // A larger burst: the 3 calls already made still count.
        let new = rate(1.0, 5);
        assert_eq!((0..10).filter(|_| state.try_acquire(new, now)).count(), 2);
    }

    #[test]
    fn under_a_new_interval_the_calls_made_still_count() {
        let state = GcraState::default();
        let now = SECOND;
        // 3 calls of a burst of 3 at 1 per second; then 10 per second with a
        // burst of 5: 2 more now.
        assert_eq!(
            (0..3)
                .filter(|_| state.try_acquire(rate(1.0, 3), now))
                .count(),
            3
        );
        assert_eq!(
            (0..9)
                .filter(|_| state.try_acquire(rate(10.0, 5), now))
                .count(),
            2
        );
        // Raised far: the 5 made count, the rest of the new burst is there.
        assert_eq!(
            (0..2000)
                .filter(|_| state.try_acquire(rate(10_000.0, 1_000), now))
                .count(),
            995
        );
        // Lowered below what was made: an empty bucket, not a debt.
        assert!(!state.try_acquire(rate(1.0, 10), now));
        assert!(state.try_acquire(rate(1.0, 10), now + SECOND));
        assert!(!state.try_acquire(rate(1.0, 10), now + SECOND));
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
