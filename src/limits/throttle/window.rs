//! The throttle's lookback window: accepts and throttles counted per thread
//! stripe, summed into time bins once per bin, and the throttle
//! probability those sums give, cached in an atomic for every call to read.
//!
//! grpc-go's `lookback` keeps a ring of bins behind a mutex and sums it on
//! every call. Here a call never waits on another: it bumps a counter of
//! its thread's stripe (its own cache line, never reset: a counter that
//! only grows cannot lose a count to a concurrent reset), and the first
//! call to see a bin boundary passed (a compare-and-swap on `updating`; the
//! others do not wait, they read the previous probability) turns what the
//! stripes gained since the last update into the closed bin's counts,
//! expires the bins older than the lookback and caches the new
//! probability. A count is thus attributed to the bin in which the update
//! read it (at most one bin late), and the probability follows the counts
//! one bin behind.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::config::ThrottleConfig;

/// The lookback window of one throttle.
#[derive(Debug)]
pub(crate) struct Window {
    bin_nanos: u64,
    ratio_for_accepts: f64,
    requests_padding: f64,
    /// Counts per thread stripe, cumulative since the window was made.
    stripes: Box<[Stripe]>,
    /// The index (`now / bin_nanos`) of the open bin, and the time it
    /// closes (a comparison on the call's path instead of a division).
    head: AtomicU64,
    closes_at: AtomicU64,
    /// Held by the call updating the bins (nobody waits on it).
    updating: AtomicBool,
    /// Written only while `updating` is held: the closed bins' counts
    /// (absolute bin `i` at `i % len`), their sums, and the stripes'
    /// totals at the last update.
    bins: Box<[Counts<AtomicU64>]>,
    sums: Counts<AtomicU64>,
    seen: Counts<AtomicU64>,
    /// The cached throttle probability (`f64` bits).
    probability: AtomicU64,
}

/// A pair of accept and throttle counts.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counts<T = u64> {
    pub(crate) accepts: T,
    pub(crate) throttles: T,
}

impl Counts<AtomicU64> {
    fn load(&self) -> Counts {
        Counts {
            accepts: self.accepts.load(Ordering::Relaxed),
            throttles: self.throttles.load(Ordering::Relaxed),
        }
    }

    fn store(&self, counts: Counts) {
        self.accepts.store(counts.accepts, Ordering::Relaxed);
        self.throttles.store(counts.throttles, Ordering::Relaxed);
    }
}

impl Counts {
    fn plus(self, other: Self) -> Self {
        Self {
            accepts: self.accepts.wrapping_add(other.accepts),
            throttles: self.throttles.wrapping_add(other.throttles),
        }
    }

    fn minus(self, other: Self) -> Self {
        Self {
            accepts: self.accepts.wrapping_sub(other.accepts),
            throttles: self.throttles.wrapping_sub(other.throttles),
        }
    }
}

/// One stripe's counters, on a cache line of its own (128 bytes: two
/// lines on x86, whose prefetcher pulls pairs; one on aarch64's M-series).
#[derive(Debug, Default)]
#[repr(align(128))]
struct Stripe(Counts<AtomicU64>);

/// What a call's outcome adds to the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The backend answered with anything but a refusal.
    Accepted,
    /// The backend refused the call, or the throttle rejected it locally.
    Throttled,
}

impl Window {
    /// An empty window, its open bin the one of `now` (nanoseconds).
    pub(crate) fn new(config: &ThrottleConfig, now: u64) -> Self {
        let bin_nanos = config.bin_nanos();
        let stripes = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .clamp(1, 64);
        Self {
            bin_nanos,
            ratio_for_accepts: config.ratio_for_accepts,
            requests_padding: config.requests_padding,
            stripes: (0..stripes).map(|_| Stripe::default()).collect(),
            head: AtomicU64::new(now / bin_nanos),
            closes_at: AtomicU64::new(closing(now / bin_nanos, bin_nanos)),
            updating: AtomicBool::new(false),
            bins: (0..config.bins).map(|_| Counts::default()).collect(),
            sums: Counts::default(),
            seen: Counts::default(),
            probability: AtomicU64::new(0f64.to_bits()),
        }
    }

    /// The throttle probability at `now`: the cached one, updated first if
    /// `now` is past the open bin and no other call is updating it.
    #[inline]
    pub(crate) fn probability(&self, now: u64) -> f64 {
        if now >= self.closes_at.load(Ordering::Relaxed) {
            self.advance(now / self.bin_nanos);
        }
        f64::from_bits(self.probability.load(Ordering::Relaxed))
    }

    /// Counts `outcome` on the stripe of `stripe` (any number: it is
    /// reduced to a stripe here).
    #[inline]
    pub(crate) fn register(&self, outcome: Outcome, stripe: usize) {
        self.register_many(outcome, stripe, 1);
    }

    /// Counts `n` outcomes at once (tests reach the wrap this way).
    #[inline]
    fn register_many(&self, outcome: Outcome, stripe: usize, n: u64) {
        let Stripe(counts) = &self.stripes[stripe % self.stripes.len()];
        let counter = match outcome {
            Outcome::Accepted => &counts.accepts,
            Outcome::Throttled => &counts.throttles,
        };
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// The counts of the closed bins in the window (what the cached
    /// probability was computed from).
    pub(crate) fn sums(&self) -> Counts {
        // Read without the update's flag: each count is exact, a pair read
        // during an update may mix two bins' sums.
        self.sums.load()
    }

    /// Closes the bins before `new_head`: the stripes' gains since the
    /// last update go to the bin that was open, bins older than the
    /// lookback are subtracted, and the probability is recomputed.
    #[cold]
    fn advance(&self, new_head: u64) {
        if self
            .updating
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        let head = self.head.load(Ordering::Relaxed);
        if new_head > head {
            let len = self.bins.len() as u64;
            let total = self
                .stripes
                .iter()
                .fold(Counts::default(), |sum, Stripe(counts)| {
                    sum.plus(counts.load())
                });
            let gained = total.minus(self.seen.load());
            self.seen.store(total);
            let mut sums = self.sums.load();
            // The window after the update: bins `new_head - len` to
            // `new_head - 1`. Every slot from there on is rewritten: the
            // closed bin's with its gains, later (empty) ones with zero.
            for index in head.max(new_head.saturating_sub(len))..new_head {
                let slot = &self.bins[(index % len) as usize];
                let counts = if index == head {
                    gained
                } else {
                    Counts::default()
                };
                sums = sums.minus(slot.load()).plus(counts);
                slot.store(counts);
            }
            self.sums.store(sums);
            let probability =
                throttle_probability(sums, self.ratio_for_accepts, self.requests_padding);
            self.probability
                .store(probability.to_bits(), Ordering::Relaxed);
            self.head.store(new_head, Ordering::Relaxed);
            self.closes_at
                .store(closing(new_head, self.bin_nanos), Ordering::Relaxed);
        }
        self.updating.store(false, Ordering::Release);
    }
}

/// When bin `index` closes (saturating: the last bin of `u64` time never
/// does).
fn closing(index: u64, bin_nanos: u64) -> u64 {
    index.saturating_add(1).saturating_mul(bin_nanos)
}

/// grpc-go's formula, `(requests − K·accepts) / (requests + padding)`,
/// where `requests = accepts + throttles`, floored at 0 (grpc-go compares
/// a negative value to a draw in `[0, 1)`, which never throttles: the
/// same).
pub(crate) fn throttle_probability(counts: Counts, ratio_for_accepts: f64, padding: f64) -> f64 {
    // u64 to f64 rounds above 2^53: a probability needs no more precision.
    #[allow(clippy::cast_precision_loss)]
    let (accepts, throttles) = (counts.accepts as f64, counts.throttles as f64);
    let requests = accepts + throttles;
    ((requests - ratio_for_accepts * accepts) / (requests + padding)).max(0.0)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const SECOND: u64 = 1_000_000_000;

    /// 1 s in 10 bins of 100 ms, K = 2, padding 8 (grpc-go's).
    fn window(k: f64, padding: f64) -> Window {
        let config = ThrottleConfig::new(Duration::from_secs(1), 10, k, padding).unwrap();
        Window::new(&config, 0)
    }

    fn add(window: &Window, accepts: u64, throttles: u64) {
        window.register_many(Outcome::Accepted, 0, accepts);
        window.register_many(Outcome::Throttled, 1, throttles);
    }

    #[test]
    fn counts_count_once_their_bin_closes_and_add_up_across_stripes() {
        let window = window(2.0, 8.0);
        for stripe in 0..100 {
            window.register(Outcome::Accepted, stripe);
        }
        add(&window, 0, 5);
        // The open bin is not counted yet.
        assert_eq!(window.probability(SECOND / 20), 0.0);
        assert_eq!(window.sums(), Counts::default());
        window.probability(SECOND / 10);
        let sums = Counts {
            accepts: 100,
            throttles: 5,
        };
        assert_eq!(window.sums(), sums);
        // Later bins add to it.
        add(&window, 1, 2);
        window.probability(3 * SECOND / 10);
        assert_eq!(
            window.sums(),
            Counts {
                accepts: 101,
                throttles: 7
            }
        );
    }

    #[test]
    fn threads_racing_over_bin_boundaries_lose_no_count() {
        let config = ThrottleConfig::new(Duration::from_secs(1), 1_000, 2.0, 8.0).unwrap();
        let window = Window::new(&config, 0);
        std::thread::scope(|scope| {
            for thread in 0..4u64 {
                let window = &window;
                scope.spawn(move || {
                    for i in 0..10_000u64 {
                        let outcome = if i % 3 == 0 {
                            Outcome::Throttled
                        } else {
                            Outcome::Accepted
                        };
                        window.register(outcome, thread as usize);
                        // 1 µs a call: 10 ms, ten 1 ms bins, each thread
                        // crossing every boundary.
                        window.probability(i * 1_000 + thread);
                    }
                });
            }
        });
        window.probability(20_000_000);
        let throttles = 4 * (0..10_000).filter(|i| i % 3 == 0).count() as u64;
        assert_eq!(
            window.sums(),
            Counts {
                accepts: 40_000 - throttles,
                throttles
            }
        );
    }

    #[test]
    fn bins_expire_after_the_lookback() {
        let window = window(2.0, 8.0);
        add(&window, 0, 10); // bin 0
        window.probability(SECOND / 10);
        add(&window, 0, 20); // bin 1
        window.probability(2 * SECOND / 10);
        assert_eq!(window.sums().throttles, 30);
        // Bin 0 leaves when bin 10 closes, at 1.1 s (the window is then
        // bins 1 to 10).
        window.probability(10 * SECOND / 10);
        assert_eq!(window.sums().throttles, 30);
        window.probability(11 * SECOND / 10);
        assert_eq!(window.sums().throttles, 20);
        window.probability(12 * SECOND / 10);
        assert_eq!(window.sums().throttles, 0);
        assert_eq!(window.probability(12 * SECOND / 10), 0.0);
    }

    #[test]
    fn a_gap_longer_than_the_lookback_empties_the_window() {
        let window = window(2.0, 8.0);
        add(&window, 3, 40);
        window.probability(SECOND / 10);
        add(&window, 0, 7); // still in the open bin, 1, when time jumps
        window.probability(50 * SECOND);
        assert_eq!(window.sums(), Counts::default());
        assert_eq!(window.probability(50 * SECOND), 0.0);
        // The ring still works after the jump.
        add(&window, 0, 4);
        window.probability(50 * SECOND + SECOND / 10);
        assert_eq!(window.sums().throttles, 4);
    }

    #[test]
    fn a_clock_going_back_changes_nothing() {
        let window = window(2.0, 8.0);
        add(&window, 0, 8);
        window.probability(5 * SECOND / 10);
        let before = window.probability(5 * SECOND / 10);
        add(&window, 0, 8);
        assert_eq!(window.probability(SECOND / 10), before);
        assert_eq!(window.sums().throttles, 8);
    }

    #[test]
    fn the_probability_is_the_formula_at_chosen_counts() {
        for (k, padding, accepts, throttles, expected) in [
            // Zero requests: nothing is throttled.
            (2.0, 8.0, 0, 0, 0.0),
            (1.0, 1.0, 0, 0, 0.0),
            // Only refusals: requests / (requests + padding).
            (2.0, 8.0, 0, 92, 92.0 / 100.0),
            (2.0, 1.0, 0, 99, 99.0 / 100.0),
            // K = 2: accepts make up for twice as many requests.
            (2.0, 8.0, 10, 10, 0.0),
            (2.0, 8.0, 10, 30, 20.0 / 48.0),
            (2.0, 1.0, 25, 75, 50.0 / 101.0),
            // K = 1: any refusal throttles.
            (1.0, 8.0, 10, 10, 10.0 / 28.0),
            (1.0, 1.0, 99, 1, 1.0 / 101.0),
            (1.0, 8.0, 10, 0, 0.0),
        ] {
            let window = window(k, padding);
            add(&window, accepts, throttles);
            let got = window.probability(SECOND / 10);
            assert_eq!(
                got, expected,
                "K {k}, padding {padding}, {accepts} accepts, {throttles} throttles"
            );
        }
    }

    #[test]
    fn counters_wrapping_around_still_count_exactly() {
        let window = window(2.0, 8.0);
        // Bring the cumulative counters next to the wrap, then let that
        // bin expire.
        add(&window, u64::MAX - 5, u64::MAX - 3);
        window.probability(SECOND / 10);
        window.probability(5 * SECOND);
        assert_eq!(window.sums(), Counts::default());
        add(&window, 10, 20);
        window.probability(5 * SECOND + SECOND / 10);
        assert_eq!(
            window.sums(),
            Counts {
                accepts: 10,
                throttles: 20
            }
        );
        assert_eq!(
            window.probability(5 * SECOND + SECOND / 10),
            (30.0 - 20.0) / 38.0
        );
        // Huge counts in the formula stay a probability.
        let huge = Counts {
            accepts: 0,
            throttles: u64::MAX,
        };
        let p = throttle_probability(huge, 2.0, 8.0);
        assert!((0.0..=1.0).contains(&p), "{p}");
    }

    #[test]
    fn times_near_the_end_of_u64_do_not_overflow() {
        let config = ThrottleConfig::new(Duration::from_nanos(10), 10, 2.0, 8.0).unwrap();
        let window = Window::new(&config, u64::MAX - 5);
        add(&window, 0, 3);
        window.probability(u64::MAX - 3);
        assert_eq!(window.sums().throttles, 3);
        window.probability(u64::MAX);
        assert_eq!(window.sums().throttles, 3);
    }
}
