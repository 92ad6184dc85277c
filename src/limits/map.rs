//! The tenants' states: a concurrent map whose reads take no lock, a cap
//! on how many tenants it tracks, and the eviction of idle ones (the rules
//! are in the [module docs](super), "Memory").

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use papaya::LocalGuard;

use super::snapshot::Snapshot;
use super::state::{Hashed, PassThrough, TenantKey, TenantState};

/// The tenants' states and the overflow state.
#[derive(Debug)]
pub(crate) struct TenantMap {
    map: papaya::HashMap<TenantKey, Arc<TenantState>, PassThrough>,
    /// The state shared by new tenants beyond the cap.
    overflow: Arc<TenantState>,
    clock: Clock,
    /// Set while a sweep runs (one at a time).
    sweeping: AtomicBool,
    /// When the last sweep ran (ns since `start`). Read and written only
    /// when a new tenant is inserted or a sweep runs, never per call.
    last_sweep: AtomicU64,
}

impl TenantMap {
    pub(crate) fn new() -> Self {
        Self {
            map: papaya::HashMap::builder()
                .hasher(PassThrough)
                .resize_mode(papaya::ResizeMode::Blocking)
                .build(),
            overflow: Arc::default(),
            clock: Clock::new(),
            sweeping: AtomicBool::new(false),
            last_sweep: AtomicU64::new(0),
        }
    }

    /// Nanoseconds since the limiter started.
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        self.clock.now()
    }

    /// The limiter's clock.
    pub(crate) fn clock(&self) -> &Clock {
        &self.clock
    }

    /// A guard for lookups (lock-free: it marks this thread as reading).
    #[inline]
    pub(crate) fn guard(&self) -> LocalGuard<'_> {
        self.map.guard()
    }

    /// The state of tenant `key`, inserted if new (see the module docs for
    /// the cap and the overflow state). `overridden` tenants are tracked
    /// beyond the cap.
    #[inline]
    pub(crate) fn get_or_insert<'g>(
        &'g self,
        key: Hashed<'_>,
        overridden: bool,
        config: &Snapshot,
        guard: &'g LocalGuard<'g>,
    ) -> &'g Arc<TenantState> {
        match self.map.get(&key, guard) {
            Some(state) => state,
            None => self.insert(key, overridden, config, guard),
        }
    }

    #[cold]
    #[inline(never)]
    fn insert<'g>(
        &'g self,
        key: Hashed<'_>,
        overridden: bool,
        config: &Snapshot,
        guard: &'g LocalGuard<'g>,
    ) -> &'g Arc<TenantState> {
        let now = self.now();
        let last = self.last_sweep.load(Ordering::Relaxed);
        if now.saturating_sub(last) >= nanos(config.idle_timeout) {
            self.sweep(now);
        }
        if !overridden && self.map.len() >= config.max_tenants {
            return &self.overflow;
        }
        self.map
            .get_or_insert_with(TenantKey::new(key), Arc::default, guard)
    }

    /// Removes the evicted state `dead` of tenant `key` (if the sweep that
    /// evicted it has not yet), so that the next lookup inserts a fresh one.
    #[cold]
    pub(crate) fn remove_dead(
        &self,
        key: Hashed<'_>,
        dead: &Arc<TenantState>,
        guard: &LocalGuard<'_>,
    ) {
        let _ = self
            .map
            .remove_if(&key, |_, state| Arc::ptr_eq(state, dead), guard);
    }

    /// Runs one eviction sweep now, unless one is running; returns how many
    /// states it evicted.
    pub(crate) fn sweep(&self, now: u64) -> usize {
        if self.sweeping.swap(true, Ordering::Acquire) {
            return 0;
        }
        let guard = self.map.guard();
        let mut evicted = 0;
        for (key, state) in self.map.iter(&guard) {
            if state.sweep(now) {
                let _ = self
                    .map
                    .remove_if(key, |_, current| Arc::ptr_eq(current, state), &guard);
                evicted += 1;
            }
        }
        self.last_sweep.store(now, Ordering::Relaxed);
        self.sweeping.store(false, Ordering::Release);
        evicted
    }

    /// How many tenants have a state of their own.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Calls in flight of the tenant `key`; `None` if it has no state of
    /// its own.
    pub(crate) fn in_flight(&self, key: Hashed<'_>) -> Option<u32> {
        let guard = self.map.guard();
        self.map.get(&key, &guard).map(|state| state.in_flight())
    }

    /// Calls in flight in the overflow state.
    pub(crate) fn overflow_in_flight(&self) -> u32 {
        self.overflow.in_flight()
    }
}

/// The limiter's clock: rate buckets and sweeps count nanoseconds from
/// `start`. quanta reads the CPU's time-stamp counter where it is
/// invariant (falling back to the OS's monotonic clock): about 15 ns less
/// per rate-limited call than `Instant::now` (BENCHMARKS.md); the clock
/// governor uses too. A copy (a budget's) reads the same time: cloning
/// copies the calibration, no reference count.
#[derive(Debug, Clone)]
pub(crate) struct Clock {
    clock: quanta::Clock,
    start: u64,
}

impl Clock {
    fn new() -> Self {
        let clock = quanta::Clock::new();
        let start = clock.raw();
        Self { clock, start }
    }

    /// Nanoseconds since the limiter started.
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        self.clock.delta_as_nanos(self.start, self.clock.raw())
    }
}

/// `duration` in nanoseconds, saturating.
fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}
