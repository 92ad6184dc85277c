//! [`LimitsHandle`]: the limits of a running layer, read and changed at
//! run time.

use std::fmt;
use std::sync::Arc;

use super::config::Limits;
use super::limiter::Limiter;
use super::state::Hashed;
use crate::tenant::OrgId;

/// The limits of a [`TenantLimitLayer`](super::TenantLimitLayer) (from
/// [`handle`](super::TenantLimitLayer::handle)), read and changed while it
/// serves: cheap to clone, shared with the layer and its services.
///
/// Every change swaps in a whole new configuration atomically: a call
/// sees the old limits or the new ones, never a mix, and takes no lock to
/// read them. A tenant's state carries over a change: its calls in flight
/// still count, and so do the calls its rate bucket counts (at most an
/// empty bucket's worth under the new rate).
///
/// ```
/// use tonic_hotpath::tenant::OrgId;
/// use tonic_hotpath::limits::{Limits, Rate, TenantLimitLayer};
///
/// let layer = TenantLimitLayer::new(Limits::unlimited().with_max_in_flight(8));
/// let handle = layer.handle();
/// // Later, from an admin endpoint or a config watcher:
/// let big = OrgId::new("big-tenant")?;
/// handle.set_override(big.clone(), Limits::unlimited().with_rate(Rate::new(1000.0, 2000)?));
/// assert_eq!(handle.limits_for("big-tenant").rate.map(|r| r.burst), Some(2000));
/// assert_eq!(handle.limits_for("anyone-else").max_in_flight, Some(8));
/// handle.remove_override(&big);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct LimitsHandle {
    pub(crate) limiter: Arc<Limiter>,
}

impl fmt::Debug for LimitsHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LimitsHandle")
            .field("config", &self.limiter.config.load())
            .field("tracked_tenants", &self.tracked_tenants())
            .finish()
    }
}

impl LimitsHandle {
    /// The default limits (of every tenant without an override).
    pub fn defaults(&self) -> Limits {
        self.limiter.config.load().defaults()
    }

    /// Replaces the default limits.
    pub fn set_defaults(&self, limits: Limits) {
        self.limiter.update(|config| config.with_defaults(limits));
    }

    /// The limits of `tenant` as configured: its override, or the
    /// defaults (before any division among [replicas](Self::set_replicas)).
    pub fn limits_for(&self, tenant: &str) -> Limits {
        self.limiter
            .config
            .load()
            .configured_for(&self.limiter.hasher, tenant)
    }

    /// Every override, sorted by tenant.
    pub fn overrides(&self) -> Vec<(OrgId, Limits)> {
        self.limiter.config.load().overrides()
    }

    /// Gives `tenant` its own limits (replacing any earlier override).
    /// A tenant with an override always has a state of its own, even
    /// beyond the cap on tracked tenants.
    pub fn set_override(&self, tenant: OrgId, limits: Limits) {
        let hasher = &self.limiter.hasher;
        self.limiter
            .update(|config| config.with_override(hasher, &tenant, Some(limits)));
    }

    /// Puts `tenant` back on the defaults; returns the override it had.
    pub fn remove_override(&self, tenant: &OrgId) -> Option<Limits> {
        let removed = self
            .overrides()
            .into_iter()
            .find_map(|(id, limits)| (id == *tenant).then_some(limits));
        let hasher = &self.limiter.hasher;
        self.limiter
            .update(|config| config.with_override(hasher, tenant, None));
        removed
    }

    /// Replaces every override at once (one swap: a call sees the old set
    /// or the new one). A tenant listed twice keeps its last limits.
    pub fn replace_overrides(&self, overrides: impl IntoIterator<Item = (OrgId, Limits)>) {
        let overrides: Vec<_> = overrides.into_iter().collect();
        let hasher = &self.limiter.hasher;
        self.limiter
            .update(|config| config.with_overrides(hasher, overrides.iter().cloned()));
    }

    /// How many replicas share each tenant's rate (Cortex's global
    /// strategy): each replica allows `per_second / replicas`, with the
    /// whole burst; in-flight limits stay per replica. The application
    /// reports the number (from its ring or service discovery) as it
    /// changes; 0 counts as 1. The default, 1, is Cortex's local
    /// strategy.
    pub fn set_replicas(&self, replicas: u32) {
        self.limiter.update(|config| config.with_replicas(replicas));
    }

    /// The replicas sharing each rate (1 unless [set](Self::set_replicas)).
    pub fn replicas(&self) -> u32 {
        self.limiter.config.load().replicas()
    }

    /// How many tenants have a state of their own now (tenants with calls
    /// in flight or recent calls; see
    /// [`max_tenants`](super::TenantLimitLayer::max_tenants)).
    pub fn tracked_tenants(&self) -> usize {
        self.limiter.tenants.len()
    }

    /// The calls of `tenant` in flight now as the limiter counts them;
    /// `None` if it has no state of its own (no limit, idle and evicted,
    /// or beyond the cap).
    pub fn in_flight(&self, tenant: &str) -> Option<u32> {
        self.limiter
            .tenants
            .in_flight(Hashed::new(&self.limiter.hasher, tenant))
    }

    /// Calls in flight of tenants beyond the cap on tracked tenants, which
    /// share one state.
    pub fn overflow_in_flight(&self) -> u32 {
        self.limiter.tenants.overflow_in_flight()
    }

    /// Runs an eviction sweep now: marks tenants with calls since the last
    /// sweep as seen, and evicts idle tenants not seen since (no call in
    /// flight, full rate bucket: nothing is lost). Returns how many were
    /// evicted. Sweeps also run by themselves as new tenants arrive, at
    /// most once per [idle timeout](super::TenantLimitLayer::idle_timeout).
    pub fn evict_idle(&self) -> usize {
        let tenants = &self.limiter.tenants;
        tenants.sweep(tenants.now())
    }
}
