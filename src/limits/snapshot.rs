//! The configuration the per-call path reads: defaults, per-tenant
//! overrides and settings, compiled once per change and swapped in whole
//! (`arc-swap`), so a call reads one consistent version without a lock.

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::time::Duration;

use hashbrown::HashTable;

use super::config::{Limits, Rate};
use super::gcra::Gcra;
use super::keeper::Keeper;
use super::observer::LimitObserver;
use super::state::Hashed;
use crate::tenant::OrgId;
use crate::tenant::paths::PathSet;

/// Default cap on tracked tenants (tenants with an override come on top).
pub(crate) const DEFAULT_MAX_TENANTS: usize = 10_000;
/// Default idle timeout of a tenant's state.
pub(crate) const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// One tenant's limits as the per-call path uses them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Effective {
    /// The limits as configured (before any division among replicas).
    pub(crate) configured: Limits,
    pub(crate) max_in_flight: Option<u32>,
    /// The rate in force on this replica (for refusal messages) and its
    /// GCRA parameters.
    pub(crate) rate: Option<(Rate, Gcra)>,
    /// The work-unit rate in force on this replica and its parameters.
    pub(crate) work: Option<(Rate, Gcra)>,
    /// Whether these come from an override: such a tenant is tracked
    /// even beyond the cap on tracked tenants.
    pub(crate) overridden: bool,
}

impl Effective {
    /// `configured` on one of `replicas` replicas: each rate divided among
    /// them, and with `fleet_burst` (a shared backend's fallback) each
    /// burst too (at least 1), so that the fleet together stays within one
    /// burst.
    fn of(configured: Limits, replicas: u32, overridden: bool, fleet_burst: bool) -> Self {
        let local = |rate: Rate| {
            let mut local = rate;
            local.per_second /= f64::from(replicas.max(1));
            if fleet_burst {
                local.burst = (rate.burst / replicas.max(1)).max(1);
            }
            (
                local,
                Gcra::of(
                    Rate {
                        burst: local.burst,
                        ..rate
                    },
                    replicas,
                ),
            )
        };
        Self {
            configured,
            max_in_flight: configured.max_in_flight,
            rate: configured.rate.map(local),
            work: configured.work_rate.map(local),
            overridden,
        }
    }

    /// Whether the tenant has no limit (and so no state).
    #[inline]
    pub(crate) fn is_unlimited(&self) -> bool {
        self.max_in_flight.is_none() && self.rate.is_none() && self.work.is_none()
    }
}

/// One entry of the overrides table.
#[derive(Debug, Clone)]
struct Override {
    hash: u64,
    id: OrgId,
    effective: Effective,
}

/// Everything a call reads, as one immutable version.
#[derive(Clone)]
pub(crate) struct Snapshot {
    defaults: Effective,
    overrides: HashTable<Override>,
    replicas: u32,
    /// The paths limited: `None` for every request.
    pub(crate) scope: Option<Arc<PathSet>>,
    pub(crate) observer: Option<Arc<dyn LimitObserver>>,
    pub(crate) max_tenants: usize,
    pub(crate) idle_timeout: Duration,
    /// The pushback an in-flight refusal carries (none by default).
    pub(crate) in_flight_pushback: Option<Duration>,
    /// Where the tenants' rates are kept: chosen once, when the layer is
    /// built.
    pub(crate) keeper: Keeper,
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut f = f.debug_struct("Snapshot");
        f.field("defaults", &self.defaults.configured)
            .field("overrides", &self.overrides.len())
            .field("replicas", &self.replicas)
            .field("scope", &self.scope)
            .field("observer", &self.observer.is_some())
            .field("max_tenants", &self.max_tenants)
            .field("idle_timeout", &self.idle_timeout)
            .field("in_flight_pushback", &self.in_flight_pushback)
            .field("keeper", &self.keeper);
        f.finish()
    }
}

impl Snapshot {
    pub(crate) fn new(defaults: Limits) -> Self {
        Self {
            defaults: Effective::of(defaults, 1, false, false),
            overrides: HashTable::new(),
            replicas: 1,
            scope: None,
            observer: None,
            max_tenants: DEFAULT_MAX_TENANTS,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            in_flight_pushback: None,
            keeper: Keeper::Local,
        }
    }

    /// The limits of the tenant `key`: its override, or the defaults.
    #[inline]
    pub(crate) fn limits_for(&self, key: Hashed<'_>) -> &Effective {
        if self.overrides.is_empty() {
            return &self.defaults;
        }
        self.overrides
            .find(key.hash, |entry| entry.id == key.id)
            .map_or(&self.defaults, |entry| &entry.effective)
    }

    /// Whether a request to `path` is limited.
    #[inline]
    pub(crate) fn in_scope(&self, path: &str) -> bool {
        self.scope.as_ref().is_none_or(|scope| scope.matches(path))
    }

    pub(crate) fn defaults(&self) -> Limits {
        self.defaults.configured
    }

    pub(crate) fn replicas(&self) -> u32 {
        self.replicas
    }

    /// The configured limits of `tenant`: its override or the defaults.
    pub(crate) fn configured_for(&self, hasher: &RandomState, tenant: &str) -> Limits {
        self.limits_for(Hashed::new(hasher, tenant)).configured
    }

    /// The overrides, sorted by tenant.
    pub(crate) fn overrides(&self) -> Vec<(OrgId, Limits)> {
        let mut overrides: Vec<_> = self
            .overrides
            .iter()
            .map(|entry| (entry.id.clone(), entry.effective.configured))
            .collect();
        overrides.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        overrides
    }

    /// How many tenants have an override.
    #[cfg(test)]
    pub(crate) fn override_count(&self) -> usize {
        self.overrides.len()
    }

    /// A copy of these settings changed by `change`.
    pub(crate) fn with(&self, change: impl FnOnce(&mut Self)) -> Self {
        let mut next = self.clone();
        change(&mut next);
        next
    }

    pub(crate) fn with_defaults(&self, defaults: Limits) -> Self {
        Self {
            defaults: Effective::of(defaults, self.replicas, false, self.fleet_burst()),
            ..self.clone()
        }
    }

    /// These settings with `tenant`'s override set to `limits` (`None`:
    /// removed).
    pub(crate) fn with_override(
        &self,
        hasher: &RandomState,
        tenant: &OrgId,
        limits: Option<Limits>,
    ) -> Self {
        let mut next = self.clone();
        let hash = hasher.hash_one(tenant.as_str());
        let found = next.overrides.find_entry(hash, |entry| entry.id == *tenant);
        match (found, limits) {
            (Ok(mut entry), Some(limits)) => {
                entry.get_mut().effective =
                    Effective::of(limits, self.replicas, true, self.fleet_burst());
            }
            (Ok(entry), None) => {
                entry.remove();
            }
            (Err(_), Some(limits)) => {
                next.overrides.insert_unique(
                    hash,
                    Override {
                        hash,
                        id: tenant.clone(),
                        effective: Effective::of(limits, self.replicas, true, self.fleet_burst()),
                    },
                    |entry| entry.hash,
                );
            }
            (Err(_), None) => {}
        }
        next
    }

    /// These settings with the overrides replaced by `overrides` (a
    /// tenant listed twice keeps its last limits).
    pub(crate) fn with_overrides(
        &self,
        hasher: &RandomState,
        overrides: impl IntoIterator<Item = (OrgId, Limits)>,
    ) -> Self {
        let mut next = Self {
            overrides: HashTable::new(),
            ..self.clone()
        };
        for (tenant, limits) in overrides {
            next = next.with_override(hasher, &tenant, Some(limits));
        }
        next
    }

    /// Whether the bursts are divided among the replicas too: with a
    /// shared backend, whose fallback keeps the fleet within one burst.
    fn fleet_burst(&self) -> bool {
        matches!(self.keeper, Keeper::Shared(_))
    }

    /// These settings with the rates kept by `keeper`: every rate
    /// recompiled (with a shared keeper, bursts divided among the
    /// replicas too).
    #[allow(
        dead_code,
        reason = "the shared half of the seam: used once a shared keeper is built in"
    )]
    pub(crate) fn with_keeper(&self, keeper: Keeper) -> Self {
        let next = Self {
            keeper,
            ..self.clone()
        };
        next.with_replicas(next.replicas)
    }

    /// These settings on `replicas` replicas (at least 1): every rate
    /// recompiled.
    pub(crate) fn with_replicas(&self, replicas: u32) -> Self {
        let replicas = replicas.max(1);
        let mut next = self.clone();
        next.replicas = replicas;
        let fleet_burst = self.fleet_burst();
        next.defaults = Effective::of(self.defaults.configured, replicas, false, fleet_burst);
        for entry in next.overrides.iter_mut() {
            entry.effective =
                Effective::of(entry.effective.configured, replicas, true, fleet_burst);
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(text: &str) -> OrgId {
        OrgId::new(text).unwrap()
    }

    #[test]
    fn a_tenant_gets_its_override_or_the_defaults() {
        let hasher = RandomState::new();
        let defaults = Limits::unlimited().with_max_in_flight(4);
        let special = Limits::unlimited().with_max_in_flight(9);
        let snapshot = Snapshot::new(defaults).with_override(&hasher, &id("big"), Some(special));
        assert_eq!(snapshot.configured_for(&hasher, "big"), special);
        assert_eq!(snapshot.configured_for(&hasher, "other"), defaults);
        assert!(snapshot.limits_for(Hashed::new(&hasher, "big")).overridden);
        let removed = snapshot.with_override(&hasher, &id("big"), None);
        assert_eq!(removed.configured_for(&hasher, "big"), defaults);
        assert_eq!(removed.override_count(), 0);
        let replaced = snapshot.with_overrides(&hasher, [(id("b"), special), (id("a"), defaults)]);
        assert_eq!(
            replaced.overrides(),
            vec![(id("a"), defaults), (id("b"), special)]
        );
    }

    #[test]
    fn replicas_divide_the_rate_in_force_not_the_configured_one() {
        let hasher = RandomState::new();
        let rate = Rate::new(90.0, 10).unwrap();
        let limits = Limits::unlimited().with_rate(rate).with_work_rate(rate);
        let snapshot = Snapshot::new(limits)
            .with_override(&hasher, &id("t"), Some(limits))
            .with_replicas(3);
        for tenant in ["t", "other"] {
            let effective = snapshot.limits_for(Hashed::new(&hasher, tenant));
            assert_eq!(effective.configured.rate, Some(rate));
            for (local, _) in [effective.rate.unwrap(), effective.work.unwrap()] {
                assert_eq!((local.per_second, local.burst), (30.0, 10));
            }
        }
    }
}
