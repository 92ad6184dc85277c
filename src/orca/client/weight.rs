//! Endpoint weights (gRFC A58): the weight one report gives
//! ([`report_weight`]), one endpoint's weight state ([`EndpointWeight`],
//! grpc-go's `endpointWeight`), and the group its mean is taken over
//! ([`EndpointWeights`]).
//!
//! Everything here is atomics: a report (from a call's trailers, on that
//! call's thread, or from the out-of-band stream) and a pick read and
//! write one endpoint's state without a lock; the group's member list is
//! swapped whole (arc-swap) when an endpoint joins or leaves.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;

use super::config::WeightConfig;
use crate::orca::OrcaLoadReport;

/// The weight one report gives, gRFC A58's formula as grpc-go's
/// `OnLoadReport` computes it: `qps / (utilization + eps / qps * penalty)`,
/// where `utilization` is the application utilization, or the CPU
/// utilization when that is zero.
///
/// `None` for a report grpc-go ignores (utilization or qps zero), and for
/// one whose weight would not be a positive finite number (negative or NaN
/// values, which grpc-go's setters never send).
///
/// ```
/// use tonic_hotpath::orca::OrcaLoadReport;
/// use tonic_hotpath::orca::client::report_weight;
///
/// let report = OrcaLoadReport {
///     cpu_utilization: 0.5,
///     rps_fractional: 100.0,
///     eps: 10.0,
///     ..Default::default()
/// };
/// // 100 / (0.5 + 10 / 100 * 1.0)
/// assert!((report_weight(&report, 1.0).unwrap() - 100.0 / 0.6).abs() < 1e-9);
/// assert_eq!(report_weight(&OrcaLoadReport::default(), 1.0), None);
/// ```
pub fn report_weight(report: &OrcaLoadReport, error_utilization_penalty: f64) -> Option<f64> {
    let mut utilization = report.application_utilization;
    if utilization == 0.0 {
        utilization = report.cpu_utilization;
    }
    let qps = report.rps_fractional;
    if utilization == 0.0 || qps == 0.0 {
        return None;
    }
    let error_rate = report.eps / qps;
    let weight = qps / (utilization + error_rate * error_utilization_penalty);
    (weight.is_finite() && weight > 0.0).then_some(weight)
}

/// A group of endpoints whose weights are compared: the replicas one
/// balancer spreads calls over. An endpoint without a usable weight (no
/// report yet, in its blackout period, or expired) counts as the mean of
/// the usable weights of the group (gRFC A58); when none has one, all
/// count the same and the balancer falls back to in-flight calls.
///
/// Cheap to clone (a shared handle). [`endpoint`](Self::endpoint) adds an
/// endpoint; it leaves the group when the last of its handles (its
/// [`EndpointWeight`] clones, the stats handler, the out-of-band watcher,
/// the [`WeightedLoad`](super::WeightedLoad) service) is dropped.
///
/// ```
/// use std::time::{Duration, Instant};
///
/// use tonic_hotpath::orca::OrcaLoadReport;
/// use tonic_hotpath::orca::client::{EndpointWeights, WeightConfig};
///
/// let config = WeightConfig::builder().blackout_period(Duration::ZERO).build()?;
/// let group = EndpointWeights::new(config);
/// let (a, b) = (group.endpoint(), group.endpoint());
/// let now = Instant::now();
/// a.on_load_report_at(
///     &OrcaLoadReport { cpu_utilization: 0.5, rps_fractional: 100.0, ..Default::default() },
///     now,
/// );
/// assert_eq!(a.weight_at(now), Some(200.0));
/// assert_eq!(b.weight_at(now), None); // no report yet
/// assert_eq!(group.mean_weight_at(now), Some(200.0));
/// # Ok::<(), tonic_hotpath::orca::client::WeightConfigError>(())
/// ```
#[derive(Clone, Default)]
pub struct EndpointWeights {
    group: Arc<Group>,
}

pub(super) struct Group {
    config: WeightConfig,
    /// Times are kept as nanoseconds since this instant, plus one (zero is
    /// "never").
    epoch: Instant,
    members: ArcSwap<Vec<Arc<State>>>,
    /// The cached mean's bits (NaN: no endpoint has a usable weight).
    mean: AtomicU64,
    /// When the mean is due to be recomputed (a stamp; 0: now).
    next_mean: AtomicU64,
}

impl Default for Group {
    fn default() -> Self {
        Self::new(WeightConfig::default())
    }
}

impl Group {
    fn new(config: WeightConfig) -> Self {
        Self {
            config,
            epoch: Instant::now(),
            members: ArcSwap::from_pointee(Vec::new()),
            mean: AtomicU64::new(f64::NAN.to_bits()),
            next_mean: AtomicU64::new(0),
        }
    }

    /// `now` as a stamp: nanoseconds since the epoch plus one (an instant
    /// before the epoch reads as the epoch).
    fn stamp(&self, now: Instant) -> u64 {
        nanos(now.saturating_duration_since(self.epoch)).saturating_add(1)
    }

    fn compute_mean(&self, now: u64) -> Option<f64> {
        let members = self.members.load();
        let (mut sum, mut count) = (0.0, 0u32);
        for state in members.iter() {
            if let Some(weight) = state.weight(&self.config, now) {
                sum += weight;
                count += 1;
            }
        }
        (count > 0).then(|| sum / f64::from(count))
    }

    pub(super) fn mean(&self, now: u64) -> Option<f64> {
        let period = nanos(self.config.weight_update_period());
        if period == 0 {
            return self.compute_mean(now);
        }
        let due = self.next_mean.load(Ordering::Acquire);
        // One caller recomputes; the others use the value as it was.
        if now >= due
            && self
                .next_mean
                .compare_exchange(
                    due,
                    now.saturating_add(period),
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok()
        {
            let mean = self.compute_mean(now).unwrap_or(f64::NAN);
            self.mean.store(mean.to_bits(), Ordering::Release);
        }
        let mean = f64::from_bits(self.mean.load(Ordering::Acquire));
        (!mean.is_nan()).then_some(mean)
    }
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

impl EndpointWeights {
    /// An empty group with these settings.
    pub fn new(config: WeightConfig) -> Self {
        Self {
            group: Arc::new(Group::new(config)),
        }
    }

    /// The group's settings.
    pub fn config(&self) -> &WeightConfig {
        &self.group.config
    }

    /// A new endpoint of the group, with no report yet.
    pub fn endpoint(&self) -> EndpointWeight {
        let state = Arc::new(State::default());
        self.group.members.rcu(|members| {
            let mut members = Vec::clone(members);
            members.push(Arc::clone(&state));
            members
        });
        EndpointWeight {
            member: Arc::new(Member {
                group: Arc::clone(&self.group),
                state,
            }),
        }
    }

    /// How many endpoints the group has.
    pub fn len(&self) -> usize {
        self.group.members.load().len()
    }

    /// Whether the group has no endpoint.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The mean of the endpoints' usable weights at `now`, computed now
    /// (not the cached value the balancer reads between weight updates);
    /// `None` when no endpoint has a usable weight.
    pub fn mean_weight_at(&self, now: Instant) -> Option<f64> {
        self.group.compute_mean(self.group.stamp(now))
    }
}

impl fmt::Debug for EndpointWeights {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EndpointWeights")
            .field("config", &self.group.config)
            .field("endpoints", &self.len())
            .finish()
    }
}

/// One endpoint's weight state.
#[derive(Default)]
pub(super) struct State {
    /// The last weight's bits.
    weight: AtomicU64,
    /// When the last non-empty report came (a stamp; 0: never).
    last_updated: AtomicU64,
    /// Since when reports have been coming without a gap of the
    /// expiration period (a stamp).
    non_empty_since: AtomicU64,
    pub(super) in_flight: AtomicUsize,
    reports: AtomicU64,
    malformed: AtomicU64,
}

impl State {
    /// grpc-go's `endpointWeight.weight`.
    fn weight(&self, config: &WeightConfig, now: u64) -> Option<f64> {
        let last = self.last_updated.load(Ordering::Acquire);
        if last == 0 || now.saturating_sub(last) >= nanos(config.weight_expiration_period()) {
            return None;
        }
        let blackout = nanos(config.blackout_period());
        if blackout != 0 {
            let since = self.non_empty_since.load(Ordering::Acquire);
            if since == 0 || now.saturating_sub(since) < blackout {
                return None;
            }
        }
        Some(f64::from_bits(self.weight.load(Ordering::Acquire)))
    }

    /// grpc-go's `endpointWeight.OnLoadReport`, with the expiry's reset of
    /// the blackout period done here (grpc-go does it in `weight`, which
    /// its balancer calls every second). Whether the blackout period
    /// started (the first report, or the first after an expiry).
    fn report(&self, config: &WeightConfig, report: &OrcaLoadReport, now: u64) -> bool {
        self.reports.fetch_add(1, Ordering::Relaxed);
        let Some(weight) = report_weight(report, config.error_utilization_penalty()) else {
            return false;
        };
        self.weight.store(weight.to_bits(), Ordering::Release);
        let previous = self.last_updated.fetch_max(now, Ordering::AcqRel);
        if previous == 0 || now.saturating_sub(previous) >= nanos(config.weight_expiration_period())
        {
            self.non_empty_since.store(now, Ordering::Release);
            return true;
        }
        false
    }
}

/// Takes the endpoint out of its group when its last handle goes.
struct Member {
    group: Arc<Group>,
    state: Arc<State>,
}

impl Drop for Member {
    fn drop(&mut self) {
        self.group.members.rcu(|members| {
            members
                .iter()
                .filter(|state| !Arc::ptr_eq(state, &self.state))
                .cloned()
                .collect::<Vec<_>>()
        });
    }
}

/// One endpoint's weight (grpc-go's `endpointWeight`): fed by reports
/// (a call's trailers through [`stats_handler`](Self::stats_handler), the
/// out-of-band stream through [`out_of_band`](Self::out_of_band), or by
/// hand), read by the balancer through [`load`](Self::load). Cheap to
/// clone: the clones share the state.
///
/// A weight is usable once non-empty reports have been coming for the
/// blackout period, until the expiration period passes without one
/// ([`WeightConfig`]); a report grpc-go ignores (utilization or qps zero)
/// changes nothing.
///
/// ```
/// use std::time::{Duration, Instant};
///
/// use tonic_hotpath::orca::OrcaLoadReport;
/// use tonic_hotpath::orca::client::EndpointWeights;
///
/// let group = EndpointWeights::default(); // 10 s blackout, 3 min expiry
/// let endpoint = group.endpoint();
/// let report = OrcaLoadReport {
///     application_utilization: 0.25,
///     cpu_utilization: 0.9, // not used: the application's is set
///     rps_fractional: 50.0,
///     ..Default::default()
/// };
/// let start = Instant::now();
/// endpoint.on_load_report_at(&report, start);
/// assert_eq!(endpoint.weight_at(start + Duration::from_secs(5)), None); // blackout
/// endpoint.on_load_report_at(&report, start + Duration::from_secs(10));
/// assert_eq!(endpoint.weight_at(start + Duration::from_secs(10)), Some(200.0));
/// // No report for 3 minutes: expired.
/// assert_eq!(endpoint.weight_at(start + Duration::from_secs(190)), None);
/// ```
#[derive(Clone)]
pub struct EndpointWeight {
    member: Arc<Member>,
}

impl EndpointWeight {
    pub(super) fn state(&self) -> &State {
        &self.member.state
    }

    pub(super) fn group(&self) -> &Group {
        &self.member.group
    }

    pub(super) fn stamp(&self, now: Instant) -> u64 {
        self.member.group.stamp(now)
    }

    /// Feeds a report received now.
    pub fn on_load_report(&self, report: &OrcaLoadReport) {
        self.on_load_report_at(report, Instant::now());
    }

    /// Feeds a report received at `now`.
    pub fn on_load_report_at(&self, report: &OrcaLoadReport, now: Instant) {
        let group = &self.member.group;
        let started = self
            .member
            .state
            .report(&group.config, report, group.stamp(now));
        if started && group.config.blackout_period().is_zero() {
            // Usable at once: the group's mean need not wait for its next
            // update.
            group.next_mean.store(0, Ordering::Release);
        }
    }

    /// The weight usable now, if any.
    pub fn weight(&self) -> Option<f64> {
        self.weight_at(Instant::now())
    }

    /// The weight usable at `now`, if any: `None` before the first report,
    /// during the blackout period, and once expired.
    pub fn weight_at(&self, now: Instant) -> Option<f64> {
        self.weight_at_stamp(self.stamp(now))
    }

    pub(super) fn weight_at_stamp(&self, now: u64) -> Option<f64> {
        let group = &self.member.group;
        self.member.state.weight(&group.config, now)
    }

    /// Calls in flight through this endpoint's
    /// [`WeightedLoad`](super::WeightedLoad) service.
    pub fn in_flight(&self) -> usize {
        self.member.state.in_flight.load(Ordering::Relaxed)
    }

    /// Reports fed so far (whether or not they changed the weight).
    pub fn reports(&self) -> u64 {
        self.member.state.reports.load(Ordering::Relaxed)
    }

    /// Calls whose `endpoint-load-metrics-bin` could not be read (several
    /// values, not base64, not an `OrcaLoadReport`); they leave the weight
    /// as it was.
    pub fn malformed_reports(&self) -> u64 {
        self.member.state.malformed.load(Ordering::Relaxed)
    }

    pub(super) fn count_malformed(&self) {
        self.member.state.malformed.fetch_add(1, Ordering::Relaxed);
    }
}

impl fmt::Debug for EndpointWeight {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EndpointWeight")
            .field("weight", &self.weight())
            .field("in_flight", &self.in_flight())
            .field("reports", &self.reports())
            .field("malformed_reports", &self.malformed_reports())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(app: f64, cpu: f64, qps: f64, eps: f64) -> OrcaLoadReport {
        OrcaLoadReport {
            application_utilization: app,
            cpu_utilization: cpu,
            rps_fractional: qps,
            eps,
            ..OrcaLoadReport::default()
        }
    }

    #[test]
    fn formula_is_grpc_go_on_load_report() {
        // grpc-go's TestBalancer_TwoAddresses_ErrorPenalty: qps 10, eps 10,
        // utilization 0.1 and penalty 1 gives 10 / (0.1 + 1).
        let weight = report_weight(&report(0.0, 0.1, 10.0, 10.0), 1.0).unwrap();
        assert!((weight - 10.0 / 1.1).abs() < 1e-12);
        // Application utilization wins over CPU when set.
        assert_eq!(report_weight(&report(0.5, 0.1, 10.0, 0.0), 1.0), Some(20.0));
        assert_eq!(report_weight(&report(0.0, 0.5, 10.0, 0.0), 1.0), Some(20.0));
        // The penalty scales the error rate.
        assert_eq!(report_weight(&report(0.5, 0.0, 10.0, 5.0), 0.0), Some(20.0));
        assert_eq!(
            report_weight(&report(0.5, 0.0, 10.0, 5.0), 2.0),
            Some(10.0 / 1.5)
        );
        // Ignored: no utilization, no qps, and values grpc-go never sends.
        assert_eq!(report_weight(&report(0.0, 0.0, 10.0, 0.0), 1.0), None);
        assert_eq!(report_weight(&report(0.5, 0.5, 0.0, 1.0), 1.0), None);
        assert_eq!(report_weight(&report(f64::NAN, 0.0, 10.0, 0.0), 1.0), None);
        assert_eq!(report_weight(&report(-0.5, 0.0, 10.0, 0.0), 1.0), None);
    }

    #[test]
    fn ignored_reports_change_nothing() {
        let config = WeightConfig::builder()
            .blackout_period(Duration::ZERO)
            .build()
            .unwrap();
        let group = EndpointWeights::new(config);
        let endpoint = group.endpoint();
        let t0 = Instant::now();
        endpoint.on_load_report_at(&report(0.0, 0.0, 10.0, 0.0), t0);
        assert_eq!(endpoint.weight_at(t0), None);
        endpoint.on_load_report_at(&report(0.0, 0.5, 10.0, 0.0), t0);
        endpoint.on_load_report_at(&report(0.0, 0.0, 10.0, 0.0), t0 + Duration::from_secs(1));
        assert_eq!(endpoint.weight_at(t0 + Duration::from_secs(1)), Some(20.0));
        assert_eq!(endpoint.reports(), 3);
    }

    #[test]
    fn blackout_and_expiry_follow_grpc_go() {
        let group = EndpointWeights::default();
        let endpoint = group.endpoint();
        let t0 = Instant::now();
        let at = |secs: u64| t0 + Duration::from_secs(secs);
        let r = report(0.0, 0.5, 10.0, 0.0);
        endpoint.on_load_report_at(&r, at(0));
        assert_eq!(endpoint.weight_at(at(9)), None);
        // Usable at exactly the blackout period (grpc-go: `< blackout` is out).
        assert_eq!(endpoint.weight_at(at(10)), Some(20.0));
        endpoint.on_load_report_at(&r, at(100));
        // Expires the expiration period after the last report (`>=`).
        assert_eq!(endpoint.weight_at(at(279)), Some(20.0));
        assert_eq!(endpoint.weight_at(at(280)), None);
        // Reports again: the blackout starts over.
        endpoint.on_load_report_at(&r, at(300));
        assert_eq!(endpoint.weight_at(at(305)), None);
        assert_eq!(endpoint.weight_at(at(310)), Some(20.0));
        // A zero blackout uses the first report at once.
        let config = WeightConfig::builder()
            .blackout_period(Duration::ZERO)
            .build()
            .unwrap();
        let quick = EndpointWeights::new(config).endpoint();
        quick.on_load_report_at(&r, at(0));
        assert_eq!(quick.weight_at(at(0)), Some(20.0));
    }

    #[test]
    fn mean_is_over_usable_weights_and_members_leave() {
        let config = WeightConfig::builder()
            .blackout_period(Duration::ZERO)
            .weight_update_period(Duration::from_secs(1))
            .build()
            .unwrap();
        let group = EndpointWeights::new(config);
        let (a, b, c) = (group.endpoint(), group.endpoint(), group.endpoint());
        let t0 = Instant::now();
        let stamp = a.stamp(t0);
        assert_eq!(group.group.mean(stamp), None);
        a.on_load_report_at(&report(0.0, 0.5, 10.0, 0.0), t0);
        b.on_load_report_at(&report(0.0, 0.25, 10.0, 0.0), t0);
        assert_eq!(group.mean_weight_at(t0), Some(30.0));
        // A weight usable at once (no blackout) refreshes the cached mean.
        assert_eq!(group.group.mean(stamp), Some(30.0));
        // A new weight waits for the update period.
        let half = t0 + Duration::from_millis(500);
        a.on_load_report_at(&report(0.0, 0.25, 10.0, 0.0), half);
        assert_eq!(group.group.mean(a.stamp(half)), Some(30.0));
        let later = a.stamp(t0 + Duration::from_secs(1));
        assert_eq!(group.group.mean(later), Some(40.0));
        assert_eq!(group.len(), 3);
        drop(b);
        assert_eq!(group.len(), 2);
        assert_eq!(group.mean_weight_at(half), Some(40.0));
        let c2 = c.clone();
        drop(c);
        assert_eq!(group.len(), 2);
        drop(c2);
        assert_eq!(group.len(), 1);
    }
}
