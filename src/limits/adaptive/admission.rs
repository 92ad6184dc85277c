//! The state every clone of an [`AdaptiveLimitLayer`](super::AdaptiveLimitLayer)
//! shares: the limit the controller learned, the calls in flight, the
//! latency samples of the current window, and the tenants' shares; and
//! one call's admission ([`Admission::admit`]) and end ([`Place`]).
//!
//! The admitted path takes no lock: a few atomic operations on the calls
//! in flight (one counter for the server, one per tenant) and, when the
//! call ends, one on this thread's stripe of the window's samples. The
//! window closes on the call that finds it over, whose thread alone runs
//! the controller (a `try_lock` no other thread waits on).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::controller::{Controller, Gradient, Window};
use super::shares::{Share, Shares};
use super::stripes::Stripes;
use crate::limits::observer::LimitObserver;
use crate::limits::overload::OverloadError;
use crate::limits::tenants::{Tenants, tenants_of};
use crate::tenant::OrgId;
use crate::tenant::paths::PathSet;
use crate::wire;

/// How a method's calls are treated at the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Priority {
    /// Refused at the limit when its tenant holds its share.
    Normal,
    /// Never refused (health checks): counted, never shed.
    NeverShed,
    /// Refused first: once the calls in flight reach a fraction of the
    /// limit, whatever its tenant's share.
    ShedFirst,
}

/// The settings of the shared state, fixed when the first service is
/// made.
pub(crate) struct Settings {
    pub(crate) gradient: Gradient,
    pub(crate) never_shed: Option<Arc<PathSet>>,
    pub(crate) shed_first: Option<Arc<PathSet>>,
    pub(crate) shed_first_fraction: f64,
    pub(crate) idle_timeout: Duration,
    pub(crate) observer: Option<Arc<dyn LimitObserver>>,
}

/// What an adaptive limit reports after each window.
pub(crate) type Hook = Arc<dyn Fn(&super::AdaptiveStatus) + Send + Sync>;

/// The shared state.
pub(crate) struct Admission {
    settings: Settings,
    clock: quanta::Clock,
    start: u64,
    limit: AtomicU32,
    in_flight: AtomicU32,
    /// The most calls in flight at once in the current window.
    peak: AtomicU32,
    /// The windows closed so far (from 1: the first window is 1).
    window_index: AtomicU64,
    /// Calls admitted in the last window closed.
    last_admitted: AtomicU64,
    samples: Stripes,
    window_start: AtomicU64,
    controller: Mutex<Controller>,
    /// The last window's mean latency and the baseline, nanoseconds.
    latency: AtomicU64,
    baseline: AtomicU64,
    last_sweep: AtomicU64,
    shares: Shares,
    hooks: Vec<Hook>,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission")
            .field("gradient", &self.settings.gradient)
            .field("limit", &self.limit)
            .field("in_flight", &self.in_flight)
            .finish_non_exhaustive()
    }
}

impl Admission {
    pub(crate) fn new(settings: Settings, shares: Shares, hooks: Vec<Hook>) -> Self {
        let clock = quanta::Clock::new();
        let start = clock.raw();
        let controller = Controller::new(settings.gradient);
        Self {
            limit: AtomicU32::new(controller.limit()),
            controller: Mutex::new(controller),
            settings,
            clock,
            start,
            in_flight: AtomicU32::new(0),
            peak: AtomicU32::new(0),
            window_index: AtomicU64::new(1),
            last_admitted: AtomicU64::new(0),
            samples: Stripes::new(),
            window_start: AtomicU64::new(0),
            latency: AtomicU64::new(0),
            baseline: AtomicU64::new(0),
            last_sweep: AtomicU64::new(0),
            shares,
            hooks,
        }
    }

    /// Nanoseconds since the state was made.
    #[inline]
    fn now(&self) -> u64 {
        self.clock.delta_as_nanos(self.start, self.clock.raw())
    }

    /// The limit in force.
    pub(crate) fn limit(&self) -> u32 {
        self.limit.load(Ordering::Relaxed)
    }

    /// The calls in flight.
    pub(crate) fn in_flight(&self) -> u32 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// The last window's mean latency.
    pub(crate) fn latency(&self) -> Duration {
        Duration::from_nanos(self.latency.load(Ordering::Relaxed))
    }

    /// The baseline latency (the least window mean over the horizon).
    pub(crate) fn baseline(&self) -> Duration {
        Duration::from_nanos(self.baseline.load(Ordering::Relaxed))
    }

    /// Tells the observer of a refusal.
    #[cold]
    pub(crate) fn observe(&self, refused: &OverloadError) {
        if let Some(observer) = &self.settings.observer {
            observer.on_overloaded(refused);
        }
    }

    /// The tenants tracked.
    pub(crate) fn tenants(&self) -> usize {
        self.shares.len()
    }

    /// The pushback of a refusal: the current latency (about the time the
    /// calls in flight take to turn over), at least 1 ms.
    fn retry_after(&self) -> Duration {
        self.latency().max(Duration::from_millis(1))
    }

    fn priority(&self, path: &str) -> Priority {
        if self
            .settings
            .never_shed
            .as_ref()
            .is_some_and(|set| set.matches(path))
        {
            Priority::NeverShed
        } else if self
            .settings
            .shed_first
            .as_ref()
            .is_some_and(|set| set.matches(path))
        {
            Priority::ShedFirst
        } else {
            Priority::Normal
        }
    }

    /// Admits `request`, or says why not. An admitted call holds its
    /// [`Place`] until it ends.
    #[inline]
    pub(crate) fn admit<B>(
        self: &Arc<Self>,
        request: &http::Request<B>,
    ) -> Result<Place, OverloadError> {
        let priority = self.priority(request.uri().path());
        let tenants = tenants_of(request);
        let (shares, first) = match &tenants {
            None => (Places::One(self.shares.of(None)), None),
            Some(Tenants::One(id)) => (Places::One(self.shares.of(Some(id))), Some(*id)),
            Some(Tenants::Many(ids)) => self.places_of(ids),
            Some(Tenants::Parsed(ids)) => self.places_of(ids.as_slice()),
        };
        if priority != Priority::NeverShed
            && let Some(deadline) = wire::status::timeout(request.headers())
        {
            let latency = self.latency();
            if deadline < latency {
                return Err(OverloadError::deadline(
                    deadline,
                    latency,
                    first.map(org_id),
                    self.retry_after(),
                ));
            }
        }
        let limit = self.limit();
        let before = self.in_flight.fetch_add(1, Ordering::AcqRel);
        let mut over_share = None;
        shares.for_each(|share| {
            let (mine, active) = self.shares.enter(share);
            let fair = Shares::fair(limit, Shares::weight(share), active);
            if u64::from(mine) > fair && over_share.is_none() {
                over_share = Some((fair, active));
            }
        });
        let admitted = match priority {
            Priority::NeverShed => true,
            Priority::ShedFirst => {
                f64::from(before) < f64::from(limit) * self.settings.shed_first_fraction
            }
            Priority::Normal => match over_share {
                _ if before < limit => true,
                None => true,
                Some((_, active)) => self.light(&shares, active, before, limit),
            },
        };
        if !admitted {
            return Err(self.refuse(
                priority,
                before,
                limit,
                over_share.map(|(fair, _)| fair),
                &shares,
                first,
            ));
        }
        let window = self.window_index.load(Ordering::Relaxed);
        shares.for_each(|share| share.admitted(window));
        self.samples.admitted();
        let now_in = before + 1;
        if now_in > self.peak.load(Ordering::Relaxed) {
            self.peak.fetch_max(now_in, Ordering::Relaxed);
        }
        Ok(Place {
            admission: Arc::clone(self),
            shares,
            start: self.now(),
            sample: false,
        })
    }

    /// At the limit, a call over its tenant's share of the calls in
    /// flight: admitted all the same if its tenants are light, each
    /// admitted in the last window less than ¾ of its share of the calls
    /// the server admitted then (`active`: the tenants' summed weight), so
    /// that a quiet tenant's burst is not refused for a noisy one (the
    /// noisy tenant, over its share of both, is refused first); the calls
    /// in flight stay within twice the limit. During a probe (and in the
    /// window after it) the server's admissions are those of the last
    /// window before it.
    #[cold]
    fn light(&self, shares: &Places, active: u64, before: u32, limit: u32) -> bool {
        if u64::from(before) >= u64::from(limit) * 2 {
            return false;
        }
        let window = self.window_index.load(Ordering::Relaxed);
        let admitted = self.last_admitted.load(Ordering::Relaxed);
        let mut light = true;
        shares.for_each(|share| {
            let share_of_admitted = admitted * u64::from(Shares::weight(share)) / active.max(1);
            light &= u64::from(share.last_window(window)) * 4 < share_of_admitted * 3;
        });
        light
    }

    #[cold]
    fn places_of<'a>(&self, ids: &'a [OrgId]) -> (Places, Option<&'a str>) {
        let places = ids
            .iter()
            .map(|id| self.shares.of(Some(id.as_str())))
            .collect();
        (Places::Many(places), ids.first().map(OrgId::as_str))
    }

    /// Undoes a refused call's counts and says why it was refused.
    #[cold]
    #[inline(never)]
    fn refuse(
        &self,
        priority: Priority,
        before: u32,
        limit: u32,
        over_share: Option<u64>,
        shares: &Places,
        first: Option<&str>,
    ) -> OverloadError {
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
        shares.for_each(|share| self.shares.leave(share));
        let tenant = first.map(org_id);
        if priority == Priority::ShedFirst {
            OverloadError::shed_first(before, limit, tenant, self.retry_after())
        } else {
            OverloadError::limit(limit, tenant, over_share.unwrap_or(0), self.retry_after())
        }
    }

    /// Ends a call that started at `start`: its latency is a sample if
    /// `sample` (a unary call that ended normally).
    fn end(&self, shares: &Places, start: u64, sample: bool) {
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
        shares.for_each(|share| self.shares.leave(share));
        let now = self.now();
        if sample {
            self.samples.add(now.saturating_sub(start));
        }
        let window =
            u64::try_from(self.settings.gradient.window_of().as_nanos()).unwrap_or(u64::MAX);
        if now.saturating_sub(self.window_start.load(Ordering::Relaxed)) >= window {
            self.close_window(now, window);
        }
    }

    /// Closes the window if it is over and holds enough samples (or is
    /// ten windows long): runs the controller and publishes its limit.
    #[cold]
    fn close_window(&self, now: u64, window: u64) {
        let Ok(mut controller) = self.controller.try_lock() else {
            return;
        };
        let start = self.window_start.load(Ordering::Acquire);
        if now.saturating_sub(start) < window {
            return;
        }
        let sums = self.samples.peek();
        let min_samples = u64::from(self.settings.gradient.min_samples_of());
        if sums.samples < min_samples && now.saturating_sub(start) < window.saturating_mul(10) {
            return;
        }
        self.samples.take(sums);
        let peak = self.peak.swap(self.in_flight(), Ordering::Relaxed);
        let admitted = self.samples.take_admitted();
        // A probe window admits half as much: judged against it, a quiet
        // tenant that kept its pace would seem heavy (see `light`). The
        // admissions of the last window before the probe stand for it.
        if !controller.is_probing() {
            self.last_admitted.store(admitted, Ordering::Relaxed);
        }
        self.window_index.fetch_add(1, Ordering::Relaxed);
        let limit = controller.update(
            Window {
                samples: sums.samples,
                total_nanos: sums.nanos,
                squares_micros: sums.squares,
                peak,
            },
            now,
        );
        self.limit.store(limit, Ordering::Relaxed);
        let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.latency
            .store(nanos(controller.last_rtt()), Ordering::Relaxed);
        if let Some(baseline) = controller.baseline(now) {
            self.baseline.store(nanos(baseline), Ordering::Relaxed);
        }
        self.window_start.store(now, Ordering::Release);
        drop(controller);
        let idle = nanos(self.settings.idle_timeout);
        if now.saturating_sub(self.last_sweep.load(Ordering::Relaxed)) >= idle {
            self.last_sweep.store(now, Ordering::Relaxed);
            self.shares.sweep();
        }
        if !self.hooks.is_empty() {
            let status = super::AdaptiveStatus::of(self);
            for hook in &self.hooks {
                hook(&status);
            }
        }
    }
}

/// A valid org id, borrowed from the request, as an owned one.
fn org_id(id: &str) -> OrgId {
    OrgId::from_checked(id.as_bytes())
}

/// The shares a call is counted in: its tenant's, or each tenant's of a
/// federated call.
#[derive(Debug)]
enum Places {
    One(Arc<Share>),
    Many(Vec<Arc<Share>>),
}

impl Places {
    fn for_each(&self, mut f: impl FnMut(&Share)) {
        match self {
            Self::One(share) => f(share),
            Self::Many(shares) => shares.iter().for_each(|share| f(share)),
        }
    }
}

/// An admitted call's place: given back when the call ends (its response
/// body ends, or is dropped).
#[derive(Debug)]
pub(crate) struct Place {
    admission: Arc<Admission>,
    shares: Places,
    start: u64,
    /// Whether the call's latency is a sample: set on a unary call that
    /// ended normally.
    sample: bool,
}

impl Place {
    /// Ends the call; its latency is a sample if `sample`.
    pub(crate) fn end(mut self, sample: bool) {
        self.sample = sample;
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.admission.end(&self.shares, self.start, self.sample);
    }
}
