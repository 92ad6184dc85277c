//! [`Gradient`]: the concurrency limit learned from the latency of
//! admitted calls, window by window: the arithmetic alone, on a clock
//! the caller passes in (tests drive it by hand).

use std::time::Duration;

/// The parameters of the gradient controller that learns an
/// [`AdaptiveLimitLayer`](super::AdaptiveLimitLayer)'s concurrency limit
/// (the [module docs](super) say why these defaults).
///
/// # The rule
///
/// Each window (100 ms by default, and at least `min_samples` latency
/// samples) gives the mean latency of the unary calls that ended in it,
/// `rtt`, and the most calls in flight at once, `peak`. The *baseline*
/// is the least window mean over the last `baseline_horizon` (10 s): the
/// latency of a call that found no queue. Then, as Envoy's adaptive
/// concurrency filter and Netflix's gradient limits do:
///
/// ```text
/// gradient  = clamp(baseline × (1 + tolerance) / rtt, 0.5, 1.0)
/// limit'    = limit × gradient + headroom(limit)
/// ```
///
/// with `headroom(limit) = queue_factor × √limit`. With no queue the
/// gradient is 1 and the limit grows by the headroom, and after three such
/// windows in a row by 15 % a window at least (if the window used at least
/// half of it: a server that is not
/// loaded learns nothing about its capacity, so the limit does not drift
/// up); with a queue the gradient shrinks it, at most by half a window.
/// A window's mean is noisy: the latency now counts less one standard
/// error of its window, and each window counts towards the baseline as
/// its mean plus two (the least of many noisy means would otherwise sit
/// below the true unqueued latency, and hold the limit too low). At rest the limit sits
/// where the queue it lets build is about the headroom: on a server of
/// `C` workers, `limit ≈ C × (1 + tolerance) + headroom`.
///
/// # Keeping the baseline true
///
/// Under a steady overload every window is at the limit, so every window
/// carries the headroom's queue, and a baseline taken from them would
/// creep up with it (Netflix's Gradient2 drifts so). Two things keep it
/// true: the baseline is the *least* window over the horizon, and when the
/// limit has been the bound for a `probe_interval` (5 s; 1 s before the
/// first probe), two windows run at half the limit (a *probe*): the first
/// drains the queue, and the second's mean is the unqueued latency again.
/// Envoy pins the limit to 3 for its minimum-RTT measurement; half the
/// limit for two windows refuses far less (under full load, about half of
/// 0.2 s in each 5 s, and nothing when the server is not at its limit: a
/// window below half the limit measures the baseline by itself, and no
/// probe is needed).
///
/// The cost of a baseline: when every call becomes slower (a dependency
/// slows down) the old, shorter baseline holds for up to a horizon, and
/// the limit is too low meanwhile.
///
/// ```
/// use std::time::Duration;
/// use tonic_hotpath::limits::Gradient;
///
/// let gradient = Gradient::default()
///     .initial_limit(32)
///     .limits(4, 512)
///     .window(Duration::from_millis(50));
/// assert_eq!(gradient.initial(), 32);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gradient {
    initial: u32,
    min: u32,
    max: u32,
    window: Duration,
    min_samples: u32,
    tolerance: f64,
    queue_factor: f64,
    baseline_horizon: Duration,
    probe_interval: Duration,
}

impl Default for Gradient {
    fn default() -> Self {
        Self {
            initial: 16,
            min: 2,
            max: 1000,
            window: Duration::from_millis(100),
            min_samples: 30,
            tolerance: 0.05,
            queue_factor: 0.25,
            baseline_horizon: Duration::from_secs(10),
            probe_interval: Duration::from_secs(5),
        }
    }
}

impl Gradient {
    /// The limit before anything is learned (default 16), within the
    /// bounds.
    pub fn initial_limit(mut self, limit: u32) -> Self {
        self.initial = limit;
        self
    }

    /// The least and the most the limit may be (default 2 and 1 000;
    /// `min` at least 1, `max` at least `min`).
    pub fn limits(mut self, min: u32, max: u32) -> Self {
        self.min = min.max(1);
        self.max = max.max(self.min);
        self
    }

    /// The shortest window of samples (default 100 ms; at least 1 ms).
    pub fn window(mut self, window: Duration) -> Self {
        self.window = window.max(Duration::from_millis(1));
        self
    }

    /// The fewest samples a window needs (default 30): a window with fewer
    /// is extended, so a quiet server's few calls are not one noisy mean.
    pub fn min_samples(mut self, samples: u32) -> Self {
        self.min_samples = samples.max(1);
        self
    }

    /// How much slower than the baseline a window may be before the limit
    /// shrinks (default 0.05: 5 %), which absorbs the noise of a window's
    /// mean.
    pub fn tolerance(mut self, tolerance: f64) -> Self {
        self.tolerance = if tolerance.is_finite() {
            tolerance.max(0.0)
        } else {
            0.0
        };
        self
    }

    /// The queue the limit allows beyond the workers, as a factor of
    /// `√limit` (default 0.25): more keeps the workers busier through a
    /// burst, less keeps latency nearer the baseline.
    pub fn queue_factor(mut self, factor: f64) -> Self {
        self.queue_factor = if factor.is_finite() {
            factor.max(0.0)
        } else {
            0.0
        };
        self
    }

    /// How long a window's mean counts towards the baseline (default
    /// 10 s).
    pub fn baseline_horizon(mut self, horizon: Duration) -> Self {
        self.baseline_horizon = horizon.max(self.window);
        self
    }

    /// How long the limit may be the bound before a probe window at half
    /// the limit re-measures the baseline (default 5 s).
    pub fn probe_interval(mut self, interval: Duration) -> Self {
        self.probe_interval = interval.max(self.window);
        self
    }

    /// The initial limit, within the bounds.
    pub fn initial(&self) -> u32 {
        self.initial.clamp(self.min, self.max)
    }

    /// The shortest window.
    pub(crate) fn window_of(&self) -> Duration {
        self.window
    }

    /// The fewest samples a window needs.
    pub(crate) fn min_samples_of(&self) -> u32 {
        self.min_samples
    }
}

/// One window's samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Window {
    /// Latency samples (unary calls that ended in the window).
    pub(crate) samples: u64,
    /// Their summed latency, nanoseconds.
    pub(crate) total_nanos: u64,
    /// Their summed squares, in µs².
    pub(crate) squares_micros: u64,
    /// The most calls in flight at once in the window.
    pub(crate) peak: u32,
}

impl Window {
    /// The standard error of the window's mean `mean` (ns): the samples'
    /// standard deviation ÷ √samples.
    fn standard_error(&self, mean: f64) -> f64 {
        let n = self.samples as f64;
        let mean_micros = mean / 1e3;
        let variance = (self.squares_micros as f64 / n - mean_micros * mean_micros).max(0.0);
        variance.sqrt() * 1e3 / n.sqrt()
    }
}

/// The least growth of a limit found used and unqueued for
/// [`CLEAN_WINDOWS`] windows in a row, per window.
const GROWTH: f64 = 0.15;
/// Windows used and unqueued in a row before the limit grows by
/// [`GROWTH`].
const CLEAN_WINDOWS: u8 = 3;

/// Standard errors added to a window's mean for the baseline.
const Z_BASELINE: f64 = 2.0;

/// The least window mean per slot of the baseline horizon (a horizon cut
/// in [`SLOTS`] slots): the least over the horizon is the least slot.
const SLOTS: usize = 10;

/// The controller's state: the limit, the baseline, the probe.
#[derive(Debug, Clone)]
pub(crate) struct Controller {
    config: Gradient,
    limit: f64,
    /// Per slot: its index (time ÷ slot length) and the least mean in it
    /// (nanoseconds; `f64::INFINITY` when empty).
    baseline: [(u64, f64); SLOTS],
    /// Since when (nanoseconds) the limit has been the bound, if it is.
    bound_since: Option<u64>,
    /// During a probe: the limit to return to, and the probe windows
    /// left (two: one drains the queue, one measures).
    probing: Option<(f64, u8)>,
    /// Whether a probe has run (the first comes sooner).
    probed: bool,
    /// The last window's mean latency, nanoseconds.
    last_rtt: f64,
    /// Windows used and unqueued in a row.
    clean: u8,
}

impl Controller {
    pub(crate) fn new(config: Gradient) -> Self {
        Self {
            config,
            limit: f64::from(config.initial()),
            baseline: [(u64::MAX, f64::INFINITY); SLOTS],
            bound_since: None,
            probing: None,
            probed: false,
            last_rtt: 0.0,
            clean: 0,
        }
    }

    /// The limit in force (whole calls, at least 1).
    pub(crate) fn limit(&self) -> u32 {
        // In range: clamped to the bounds (u32) whenever it changes.
        self.limit.round() as u32
    }

    /// The baseline (the least window mean over the horizon), if any.
    pub(crate) fn baseline(&self, now: u64) -> Option<Duration> {
        self.least(now)
            .map(|nanos| Duration::from_nanos(nanos as u64))
    }

    /// The last window's mean latency.
    pub(crate) fn last_rtt(&self) -> Duration {
        Duration::from_nanos(self.last_rtt as u64)
    }

    /// Whether a probe window is running.
    pub(crate) fn is_probing(&self) -> bool {
        self.probing.is_some()
    }

    fn slot_nanos(&self) -> u64 {
        let horizon = u64::try_from(self.config.baseline_horizon.as_nanos()).unwrap_or(u64::MAX);
        (horizon / SLOTS as u64).max(1)
    }

    /// The least window mean over the horizon ending at `now`.
    fn least(&self, now: u64) -> Option<f64> {
        let current = now / self.slot_nanos();
        self.baseline
            .iter()
            .filter(|(index, _)| *index != u64::MAX && current - index < SLOTS as u64)
            .map(|(_, mean)| *mean)
            .min_by(f64::total_cmp)
    }

    fn remember(&mut self, now: u64, mean: f64) {
        let index = now / self.slot_nanos();
        let slot = &mut self.baseline[(index % SLOTS as u64) as usize];
        if slot.0 != index {
            *slot = (index, mean);
        } else if mean < slot.1 {
            slot.1 = mean;
        }
    }

    /// Ends a window at `now` (nanoseconds on the caller's clock, never
    /// going back): learns from it and returns the new limit. A window
    /// without samples changes nothing.
    pub(crate) fn update(&mut self, window: Window, now: u64) -> u32 {
        if window.samples == 0 {
            return self.limit();
        }
        let rtt = window.total_nanos as f64 / window.samples as f64;
        let error = window.standard_error(rtt);
        self.last_rtt = rtt;
        // A window's mean is noisy: the least of many is below their true
        // mean by a few standard errors. Each counts as its mean plus two
        // (the unqueued latency it proves at most).
        self.remember(now, rtt + Z_BASELINE * error);
        if let Some((limit, left)) = self.probing.take() {
            // The first probe window drained the queue; the second
            // measured the baseline. Then back to the limit.
            if left > 1 {
                self.probing = Some((limit, left - 1));
            } else {
                self.limit = limit;
                self.bound_since = None;
            }
            return self.limit();
        }
        // Bound: the window reached the limit in force during it.
        let bound = f64::from(window.peak) >= self.limit.floor();
        let baseline = self.least(now).unwrap_or(rtt);
        // The latency now, less one standard error: noise alone does not
        // shrink the limit.
        let now_at_least = (rtt - error).max(1.0);
        let gradient = (baseline * (1.0 + self.config.tolerance) / now_at_least).clamp(0.5, 1.0);
        let headroom = self.config.queue_factor * self.limit.sqrt();
        let used = f64::from(window.peak) >= self.limit / 2.0;
        let next = if gradient >= 1.0 && !used {
            // Not loaded: nothing learned about the capacity.
            self.clean = 0;
            self.limit
        } else if gradient >= 1.0 {
            // Used without a queue: grow by the headroom; after three such
            // windows in a row capacity is plainly unused (restored), and
            // the limit grows by 15 % a window at least.
            self.clean = self.clean.saturating_add(1);
            if self.clean >= CLEAN_WINDOWS {
                self.limit + headroom.max(self.limit * GROWTH)
            } else {
                self.limit + headroom
            }
        } else {
            self.clean = 0;
            self.limit * gradient + headroom
        };
        self.limit = next.clamp(f64::from(self.config.min), f64::from(self.config.max));
        self.probe_when_due(bound, now);
        self.limit()
    }

    /// Starts a probe (half the limit for two windows) when the limit has
    /// been the bound for a probe interval (a fifth of it before the first
    /// probe: a server started under overload never saw an unqueued
    /// window, and its baseline is too long until it probes).
    fn probe_when_due(&mut self, bound: bool, now: u64) {
        if !bound {
            self.bound_since = None;
            return;
        }
        let since = *self.bound_since.get_or_insert(now);
        let mut interval = u64::try_from(self.config.probe_interval.as_nanos()).unwrap_or(u64::MAX);
        if !self.probed {
            interval /= 5;
        }
        if now.saturating_sub(since) >= interval {
            self.probing = Some((self.limit, 2));
            self.probed = true;
            self.limit = (self.limit / 2.0).max(f64::from(self.config.min));
            self.bound_since = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn window(samples: u64, mean_ms: f64, peak: u32) -> Window {
        // No spread: every sample at the mean.
        let micros = (mean_ms * 1e3) as u64;
        Window {
            samples,
            total_nanos: (samples as f64 * mean_ms * MS as f64) as u64,
            squares_micros: samples * micros * micros,
            peak,
        }
    }

    /// A server of `workers` workers and a service time of `service_ms`,
    /// under more load than it serves: each window, `limit` calls in
    /// flight, the mean latency by Little's law.
    fn overloaded(controller: &mut Controller, workers: f64, service_ms: f64, now: &mut u64) {
        *now += 100 * MS;
        let limit = controller.limit();
        let mean = service_ms * (f64::from(limit) / workers).max(1.0);
        controller.update(window(50, mean, limit), *now);
    }

    #[test]
    fn an_unloaded_server_keeps_its_limit() {
        let mut controller = Controller::new(Gradient::default());
        for i in 1..=50 {
            assert_eq!(controller.update(window(20, 10.0, 3), i * 100 * MS), 16);
        }
    }

    #[test]
    fn a_window_without_samples_changes_nothing() {
        let mut controller = Controller::new(Gradient::default());
        assert_eq!(controller.update(window(0, 0.0, 16), 100 * MS), 16);
        assert_eq!(controller.baseline(100 * MS), None);
    }

    #[test]
    fn no_queue_at_the_limit_grows_by_the_headroom() {
        let mut controller = Controller::new(Gradient::default());
        // 16 in flight, at the baseline: 16 + 0.25 × √16 = 17; after three
        // such windows, 15 % a window.
        assert_eq!(controller.update(window(20, 10.0, 16), 100 * MS), 17);
        assert_eq!(controller.update(window(20, 10.0, 17), 200 * MS), 18);
        assert_eq!(controller.update(window(20, 10.0, 18), 300 * MS), 21);
    }

    #[test]
    fn a_queue_shrinks_the_limit_at_most_by_half_a_window() {
        let mut controller = Controller::new(Gradient::default().initial_limit(100));
        controller.update(window(20, 10.0, 10), 100 * MS);
        // Twice the baseline × 1.05: gradient 0.525; 100 × 0.525 + 2.5.
        assert_eq!(controller.update(window(20, 20.0, 100), 200 * MS), 55);
        // Ten times: the gradient is clamped to 0.5.
        let limit = controller.update(window(20, 100.0, 55), 300 * MS);
        assert_eq!(
            limit,
            (55.0_f64 * 0.5 + 0.25 * 55.0_f64.sqrt()).round() as u32
        );
    }

    #[test]
    fn the_limit_settles_above_the_workers_by_about_the_headroom() {
        let mut controller = Controller::new(Gradient::default());
        let mut now = 0;
        controller.update(window(20, 10.0, 4), now + 1);
        for _ in 0..40 {
            overloaded(&mut controller, 8.0, 10.0, &mut now);
        }
        let limit = controller.limit();
        assert!((9..=12).contains(&limit), "{limit}");
    }

    #[test]
    fn capacity_quartered_and_restored_is_followed_within_a_second_each() {
        // No probe in these 5 s.
        let config = Gradient::default().probe_interval(Duration::from_secs(60));
        let mut controller = Controller::new(config);
        let mut now = 0;
        controller.update(window(20, 10.0, 4), now + 1);
        for _ in 0..30 {
            overloaded(&mut controller, 8.0, 10.0, &mut now);
        }
        // 8 workers → 2: within 10 windows the limit is at most 2 + 2.
        for _ in 0..10 {
            overloaded(&mut controller, 2.0, 10.0, &mut now);
        }
        assert!(controller.limit() <= 4, "{}", controller.limit());
        // Back to 8: within 10 windows the workers are all used again.
        for _ in 0..10 {
            overloaded(&mut controller, 8.0, 10.0, &mut now);
        }
        assert!(controller.limit() >= 8, "{}", controller.limit());
    }

    #[test]
    fn a_long_bound_limit_probes_at_half_for_two_windows() {
        let config = Gradient::default().probe_interval(Duration::from_secs(1));
        let mut controller = Controller::new(config);
        let mut now = 0;
        controller.update(window(20, 10.0, 4), now + 1);
        let mut starts = Vec::new();
        let mut probing_windows = 0;
        let mut before = 0;
        for i in 1..=30 {
            let limit = controller.limit();
            let was = controller.is_probing();
            overloaded(&mut controller, 8.0, 10.0, &mut now);
            if controller.is_probing() {
                probing_windows += 1;
                if !was {
                    starts.push(i);
                    before = limit;
                    assert!(controller.limit() <= limit.div_ceil(2) + 1);
                }
            } else if was {
                // Back to the limit before the probe.
                assert!(controller.limit() >= before - 1, "{}", controller.limit());
            }
        }
        // The first probe after 0.2 s at the limit, then one a second.
        assert_eq!(starts, [3, 16, 29]);
        assert_eq!(probing_windows, 2 + 2 + 2);
    }

    #[test]
    fn the_baseline_is_the_least_mean_over_the_horizon_and_expires() {
        let mut controller = Controller::new(Gradient::default());
        controller.update(window(20, 8.0, 2), 100 * MS);
        controller.update(window(20, 12.0, 2), 2_000 * MS);
        assert_eq!(
            controller.baseline(2_000 * MS),
            Some(Duration::from_millis(8))
        );
        // 10 s later the 8 ms window has left the horizon.
        controller.update(window(20, 12.0, 2), 10_500 * MS);
        assert_eq!(
            controller.baseline(10_500 * MS),
            Some(Duration::from_millis(12))
        );
    }

    #[test]
    fn bounds_hold_and_odd_settings_are_tamed() {
        let config = Gradient::default()
            .limits(0, 0)
            .tolerance(f64::NAN)
            .queue_factor(-1.0)
            .initial_limit(u32::MAX);
        assert_eq!(config.initial(), 1);
        let mut controller = Controller::new(config);
        assert_eq!(controller.update(window(5, 10.0, 1), MS), 1);
        let config = Gradient::default().limits(4, 6);
        let mut controller = Controller::new(config);
        for i in 1..100 {
            let limit = controller.update(window(5, 10.0, 6), i * 100 * MS);
            assert!((4..=6).contains(&limit));
        }
    }
}
