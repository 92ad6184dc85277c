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
    /// Takes one call's worth of the bucket at `now` (ns since the epoch,
    /// read off `clock` before this call). Over the rate, nothing is
    /// written and the error is how long (ns, above 0) until the bucket
    /// admits the call: the TAT the refusal saw, less the reading it was
    /// judged at plus the tolerance. Only a refusal computes it, and only
    /// a refusal reads `clock`: it is judged again against a reading
    /// taken after the TAT it compares was loaded
    /// ([`judge_fresh`](Self::judge_fresh)); an admission costs no clock
    /// read beyond `now`.
    #[inline]
    pub(crate) fn try_acquire(
        &self,
        gcra: Gcra,
        now: u64,
        clock: impl Fn() -> u64,
    ) -> Result<(), u64> {
        let charged = self.interval.load(Ordering::Acquire);
        if charged != gcra.interval {
            self.requote(charged, gcra, now, &clock);
        }
        let mut tat = self.tat.load(Ordering::Relaxed);
        loop {
            if tat > now.saturating_add(gcra.tolerance) {
                return self.judge_fresh(gcra, tat, now, 1, &clock);
            }
            let next = tat.max(now).saturating_add(gcra.interval);
            match self
                .tat
                .compare_exchange_weak(tat, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return Ok(()),
                Err(current) => tat = current,
            }
        }
    }

    /// Takes `n` units' worth of the bucket at `now`, as x/time/rate's
    /// `AllowN`: all of them or none. Refused, nothing is written and the
    /// error is how long (ns, above 0) until the bucket holds `n`, which
    /// it does some day only if `n` is at most the burst (the caller
    /// refuses larger charges before coming here). `n = 1` is
    /// [`try_acquire`](Self::try_acquire); a refusal is judged again as
    /// there.
    pub(crate) fn try_acquire_n(
        &self,
        gcra: Gcra,
        now: u64,
        n: u64,
        clock: impl Fn() -> u64,
    ) -> Result<(), u64> {
        let charged = self.interval.load(Ordering::Acquire);
        if charged != gcra.interval {
            self.requote(charged, gcra, now, &clock);
        }
        let cost = gcra.interval.saturating_mul(n);
        // An empty bucket's TAT: `now + interval × burst`.
        let limit = now
            .saturating_add(gcra.tolerance)
            .saturating_add(gcra.interval);
        let mut tat = self.tat.load(Ordering::Relaxed);
        loop {
            let next = tat.max(now).saturating_add(cost);
            if next > limit {
                return self.judge_fresh(gcra, tat, now, n, &clock);
            }
            match self
                .tat
                .compare_exchange_weak(tat, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return Ok(()),
                Err(current) => tat = current,
            }
        }
    }

    /// The refusal path of [`try_acquire_n`](Self::try_acquire_n) (and of
    /// [`try_acquire`](Self::try_acquire), `n = 1`): the bucket, at `tat`,
    /// had not `n` units at `now`, but `now` was read before `tat` was
    /// loaded. Judges the call again, as many times as the TAT moves,
    /// each time against a reading of `clock` taken after the TAT was
    /// loaded (never earlier than `now`: time does not go back for one
    /// call); refused only then.
    ///
    /// Why such a refusal is a true one. Each call charged to the bucket
    /// read the clock (`nⱼ`) before its compare-and-swap moved the TAT to
    /// `max(TAT, nⱼ) + interval × units`; a refund moves it back by what
    /// it gave. Under one quota (a new one rescales the TAT once,
    /// [`requote`](Self::requote)), by induction over the swaps and
    /// refunds, a TAT loaded is at most the largest `nⱼ + cⱼ × interval`
    /// over the charges `j` whose swap the load saw and the epoch (`n = 0`,
    /// every charge counted), or 0 (a refund saturates), where `cⱼ` counts
    /// the units charged, less those refunded, from `j`'s swap to the
    /// load. A refusal of `n` units against a reading `N` means
    /// `TAT + n × interval > N + tolerance + interval`, so for some `j`:
    /// `cⱼ + n > (N − nⱼ) / interval + burst`. `nⱼ` was read before `j`'s
    /// swap, the swap came before the load, and `N` after it: the window
    /// `N − nⱼ` is not negative, the `cⱼ` units were charged in it and
    /// this call's `n` asked for in it, more than the burst plus the rate
    /// times the window: the calls really exceed the rate (as GCRA
    /// defines it: at most `burst + rate × W` in any window `W`). Against
    /// a `now` read before the load (the bug this path fixes: a thread
    /// preempted between its clock read and its swap), `N − nⱼ` may be
    /// negative: the other threads' calls made after `now` were counted
    /// into a window that ended before they happened, and at 10⁹ calls/s
    /// with a burst of 10⁶ a call was refused at any rate once its thread
    /// had slept more than 1 ms.
    ///
    /// What this rests on: clock readings are ordered as the memory
    /// operations around them (one read after a load is not below one
    /// read, on any core, before the store that load saw). quanta reads
    /// the CPU's time-stamp counter only where it is invariant
    /// (synchronised across cores), else the OS's monotonic clock;
    /// `rdtsc` is not serialising, so a reading may be off by the CPU's
    /// out-of-order window and by any skew between cores' counters: an
    /// error `δ` (tens of ns) lets a refusal happen with more than
    /// `burst + rate × (W − δ)` calls in a window `W`. An admission judged
    /// against a stale `now` stands: the call is charged at the time it
    /// read the clock.
    #[cold]
    #[inline(never)]
    fn judge_fresh(
        &self,
        gcra: Gcra,
        mut tat: u64,
        mut now: u64,
        n: u64,
        clock: &impl Fn() -> u64,
    ) -> Result<(), u64> {
        let cost = gcra.interval.saturating_mul(n);
        loop {
            now = now.max(clock());
            let limit = now
                .saturating_add(gcra.tolerance)
                .saturating_add(gcra.interval);
            let next = tat.max(now).saturating_add(cost);
            if next > limit {
                return Err(next - limit);
            }
            match self
                .tat
                .compare_exchange_weak(tat, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return Ok(()),
                Err(current) => tat = current,
            }
        }
    }

    /// Rescales the TAT charged with `charged` ns per call to `gcra`'s
    /// interval: the calls it counts stay counted, at most an empty
    /// bucket's worth. One thread does it (the one that swaps the
    /// interval); a call racing it in those nanoseconds may be judged on
    /// the TAT before the rescale. The calls counted are those ahead of a
    /// clock reading taken after the TAT was loaded: a reading older than
    /// the TAT's last charges (`now`, if the thread was preempted since)
    /// would count the time in between as calls.
    #[cold]
    fn requote(&self, charged: u64, gcra: Gcra, now: u64, clock: &impl Fn() -> u64) {
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
                let now = now.max(clock());
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
        self.refund_n(gcra, 1);
    }

    /// Gives back `n` units' worth taken by
    /// [`try_acquire_n`](Self::try_acquire_n).
    pub(crate) fn refund_n(&self, gcra: Gcra, n: u64) {
        let cost = gcra.interval.saturating_mul(n);
        // `fetch_update` with a closure that never fails: always `Ok`.
        let _ = self
            .tat
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |tat| {
                Some(tat.saturating_sub(cost))
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
    const MILLI: u64 = 1_000_000;
    const MICRO: u64 = 1_000;

    impl GcraState {
        /// [`try_acquire`](GcraState::try_acquire) at `now`, the clock
        /// standing still.
        fn at(&self, gcra: Gcra, now: u64) -> Result<(), u64> {
            self.try_acquire(gcra, now, || now)
        }

        /// [`try_acquire_n`](GcraState::try_acquire_n) at `now`, the clock
        /// standing still.
        fn at_n(&self, gcra: Gcra, now: u64, n: u64) -> Result<(), u64> {
            self.try_acquire_n(gcra, now, n, || now)
        }

        fn allows(&self, gcra: Gcra, now: u64) -> bool {
            self.at(gcra, now).is_ok()
        }
    }

    fn rate(per_second: f64, burst: u32) -> Gcra {
        Gcra::of(Rate::new(per_second, burst).unwrap(), 1)
    }

    #[test]
    fn a_full_bucket_allows_exactly_the_burst_then_one_per_interval() {
        let gcra = rate(10.0, 5);
        let state = GcraState::default();
        let now = 7 * SECOND;
        assert!(state.is_full(now));
        assert_eq!((0..20).filter(|_| state.allows(gcra, now)).count(), 5);
        assert!(!state.is_full(now));
        // One interval (100 ms) later, one more.
        let later = now + SECOND / 10;
        assert!(state.allows(gcra, later));
        assert!(!state.allows(gcra, later));
        // Long idle: full again, the burst again (not more).
        let idle = later + 10 * SECOND;
        assert!(state.is_full(idle));
        assert_eq!((0..20).filter(|_| state.allows(gcra, idle)).count(), 5);
    }

    #[test]
    fn a_refund_gives_back_one_call() {
        let gcra = rate(1.0, 2);
        let state = GcraState::default();
        assert!(state.allows(gcra, SECOND));
        assert!(state.allows(gcra, SECOND));
        assert!(!state.allows(gcra, SECOND));
        state.refund(gcra);
        assert!(state.allows(gcra, SECOND));
        assert!(!state.allows(gcra, SECOND));
    }

    #[test]
    fn a_new_burst_counts_the_calls_already_made() {
        let state = GcraState::default();
        let now = SECOND;
        let old = rate(1.0, 3);
        assert_eq!((0..3).filter(|_| state.allows(old, now)).count(), 3);
        // A larger burst: the 3 calls already made still count.
        let new = rate(1.0, 5);
        assert_eq!((0..10).filter(|_| state.allows(new, now)).count(), 2);
    }

    #[test]
    fn under_a_new_interval_the_calls_made_still_count() {
        let state = GcraState::default();
        let now = SECOND;
        // 3 calls of a burst of 3 at 1 per second; then 10 per second with a
        // burst of 5: 2 more now.
        assert_eq!(
            (0..3).filter(|_| state.allows(rate(1.0, 3), now)).count(),
            3
        );
        assert_eq!(
            (0..9).filter(|_| state.allows(rate(10.0, 5), now)).count(),
            2
        );
        // Raised far: the 5 made count, the rest of the new burst is there.
        assert_eq!(
            (0..2000)
                .filter(|_| state.allows(rate(10_000.0, 1_000), now))
                .count(),
            995
        );
        // Lowered below what was made: an empty bucket, not a debt.
        assert!(!state.allows(rate(1.0, 10), now));
        assert!(state.allows(rate(1.0, 10), now + SECOND));
        assert!(!state.allows(rate(1.0, 10), now + SECOND));
    }

    #[test]
    fn the_global_strategy_divides_the_rate_not_the_burst() {
        let local = rate(30.0, 4);
        let global = Gcra::of(Rate::new(30.0, 4).unwrap(), 3);
        assert_eq!(local.interval, 33_333_333);
        assert_eq!(global.interval, 100_000_000);
        let state = GcraState::default();
        assert_eq!((0..10).filter(|_| state.allows(global, 0)).count(), 4);
        assert!(!state.allows(global, SECOND / 10 - 1));
        assert!(state.allows(global, SECOND / 10));
    }

    #[test]
    fn extreme_rates_saturate_instead_of_overflowing() {
        let slow = rate(1e-300, u32::MAX);
        let state = GcraState::default();
        assert!(state.allows(slow, 0));
        assert!(state.allows(slow, 0));
        let fast = rate(1e300, 1);
        assert_eq!(fast.interval, 1);
        let state = GcraState::default();
        assert!(state.allows(fast, 5));
        assert!(!state.allows(fast, 5));
        assert!(state.allows(fast, 6));
    }

    #[test]
    fn a_refusal_says_how_long_until_the_bucket_admits_the_call() {
        let gcra = rate(10.0, 5);
        let state = GcraState::default();
        let now = 3 * SECOND;
        assert_eq!((0..5).filter(|_| state.allows(gcra, now)).count(), 5);
        // TAT = now + 500 ms, tolerance 400 ms: the next token in 100 ms.
        assert_eq!(state.at(gcra, now), Err(100 * MILLI));
        assert_eq!(state.at(gcra, now + 30 * MILLI), Err(70 * MILLI));
        assert_eq!(state.at(gcra, now + 100 * MILLI - 1), Err(1));
        assert_eq!(state.at(gcra, now + 100 * MILLI), Ok(()));
        assert_eq!(state.at(gcra, now + 100 * MILLI), Err(100 * MILLI));
    }

    #[test]
    fn n_units_are_taken_all_or_none_with_the_wait_for_all_of_them() {
        let gcra = rate(10.0, 5);
        let state = GcraState::default();
        let now = SECOND;
        assert_eq!(state.at_n(gcra, now, 3), Ok(()));
        // 2 left: 3 more need one more token (100 ms); nothing taken.
        assert_eq!(state.at_n(gcra, now, 3), Err(100 * MILLI));
        assert_eq!(state.at_n(gcra, now, 2), Ok(()));
        assert_eq!(state.at_n(gcra, now, 1), Err(100 * MILLI));
        assert_eq!(state.at_n(gcra, now, 5), Err(500 * MILLI));
        assert_eq!(state.at_n(gcra, now, 0), Ok(()));
        state.refund_n(gcra, 3);
        assert_eq!(state.at_n(gcra, now, 4), Err(100 * MILLI));
        assert_eq!(state.at_n(gcra, now, 3), Ok(()));
        // A full bucket again after 500 ms: the whole burst at once.
        assert_eq!(state.at_n(gcra, now + 500 * MILLI, 5), Ok(()));
    }

    #[test]
    fn one_unit_is_one_call() {
        let gcra = rate(7.0, 3);
        let (calls, units) = (GcraState::default(), GcraState::default());
        for step in 0..200u64 {
            let now = SECOND + step * 37 * MILLI / 3;
            assert_eq!(calls.at(gcra, now), units.at_n(gcra, now, 1), "{step}");
        }
    }

    /// The operator stack's limit (10⁹ calls/s, a burst of 10⁶: a
    /// tolerance just under 1 ms) and a true rate a thousandth of it, one
    /// call per µs. Thread A reads the clock, then is preempted for 2 ms
    /// before its compare-and-swap; meanwhile thread B's calls, read 1 µs
    /// apart, move the TAT on with their later readings. A's call is
    /// admitted: judged against its own reading, B's calls made after it
    /// would count into a window that ends before they happened (as they
    /// did before the fix: refused, "wait 1 ms").
    #[test]
    fn a_call_preempted_after_reading_the_clock_is_judged_when_it_reaches_the_bucket() {
        let gcra = rate(1e9, 1_000_000);
        let (calls, units) = (GcraState::default(), GcraState::default());
        let read = 5 * SECOND;
        let mut b = read;
        for _ in 0..2_000 {
            b += MICRO;
            assert_eq!(calls.at(gcra, b), Ok(()));
            assert_eq!(units.at_n(gcra, b, 100), Ok(()));
        }
        let resumed = b + 1;
        assert_eq!(calls.try_acquire(gcra, read, || resumed), Ok(()));
        assert_eq!(units.try_acquire_n(gcra, read, 100, || resumed), Ok(()));
        // Charged at the TAT it found: the burst is all there for B.
        assert_eq!(
            (0..1_000_001)
                .filter(|_| calls.allows(gcra, resumed))
                .count(),
            1_000_000 - 1
        );
    }

    /// A call that really is over the rate is still refused, and its wait
    /// counts from the reading taken after the TAT: a stale reading does
    /// not make it longer, a clock behind the call's own reading (another
    /// core's counter) does not move time back.
    #[test]
    fn a_refusal_is_judged_and_timed_against_a_reading_taken_after_the_tat() {
        let gcra = rate(10.0, 5);
        let (calls, units) = (GcraState::default(), GcraState::default());
        let now = 3 * SECOND;
        assert_eq!((0..5).filter(|_| calls.allows(gcra, now)).count(), 5);
        assert_eq!(units.at_n(gcra, now, 5), Ok(()));
        // Read 20 ms before the burst, judged 30 ms after it: 70 ms to go.
        let stale = now - 20 * MILLI;
        let later = || now + 30 * MILLI;
        assert_eq!(calls.try_acquire(gcra, stale, later), Err(70 * MILLI));
        assert_eq!(units.try_acquire_n(gcra, stale, 2, later), Err(170 * MILLI));
        let behind = || now;
        assert_eq!(
            calls.try_acquire(gcra, now + 30 * MILLI, behind),
            Err(70 * MILLI)
        );
        // Nothing was taken: at 100 ms, one call.
        assert!(calls.allows(gcra, now + 100 * MILLI));
        assert!(!calls.allows(gcra, now + 100 * MILLI));
    }

    /// The hot path is not slower: an admission reads no clock beyond the
    /// `now` it is given (only a refusal, or a new quota, does).
    #[test]
    fn an_admission_reads_no_clock() {
        let gcra = rate(10.0, 5);
        let unread = || -> u64 { panic!("the clock was read for an admission") };
        let (calls, units) = (GcraState::default(), GcraState::default());
        for _ in 0..5 {
            assert_eq!(calls.try_acquire(gcra, SECOND, unread), Ok(()));
        }
        assert_eq!(
            calls.try_acquire(gcra, SECOND + 100 * MILLI, unread),
            Ok(())
        );
        assert_eq!(units.try_acquire_n(gcra, SECOND, 3, unread), Ok(()));
        assert_eq!(units.try_acquire_n(gcra, SECOND, 2, unread), Ok(()));
    }

    /// A new quota seen first by a call whose reading went stale (2 ms,
    /// the TAT charged since at 1 ns per call): the calls the bucket counts
    /// are those ahead of a reading taken after the TAT, one here, not the
    /// 2 ms between the stale reading and the TAT (2 000 001 calls at
    /// 1 ns, an empty bucket under the new quota).
    #[test]
    fn a_new_quota_counts_the_calls_ahead_of_a_fresh_reading() {
        let state = GcraState::default();
        let old = rate(1e9, 1_000_000);
        let read = 5 * SECOND;
        let b = read + 2 * MILLI;
        assert!(state.allows(old, b));
        let resumed = b;
        // 1 000 calls/s, a burst of 10: B's call, A's, and 8 more.
        let new = rate(1_000.0, 10);
        assert_eq!(state.try_acquire(new, read, || resumed), Ok(()));
        assert_eq!((0..20).filter(|_| state.allows(new, resumed)).count(), 8);
    }
}
