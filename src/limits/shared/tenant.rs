//! [`FleetTenant`]: what the Redis backend keeps per tenant, in the
//! tenant's state (its extra slot): a lease on each of the tenant's
//! fleet-wide buckets, and the event its waiting calls listen on.

use event_listener::Event;

use super::lease::Lease;
use super::tick::ticks;
use crate::limits::state::{Bucket, TenantExtra, TenantState};

/// What the backend keeps per tenant, in its state: the leases on its
/// fleet-wide call and work buckets.
#[derive(Debug, Default)]
pub(crate) struct FleetTenant {
    call_lease: Lease,
    work_lease: Lease,
    /// Notified after every answer to a request for either lease (and a
    /// request that ended without one), for the calls waiting on it. One
    /// word until a call listens.
    pub(crate) answered: Event,
}

impl FleetTenant {
    /// The lease on `bucket`.
    pub(crate) fn lease(&self, bucket: Bucket) -> &Lease {
        match bucket {
            Bucket::Calls => &self.call_lease,
            Bucket::Work => &self.work_lease,
        }
    }
}

impl TenantExtra for FleetTenant {
    /// Idle when the leases hold nothing an eviction would lose (units in
    /// stock, a request in flight); a debt not yet charged is forgotten.
    fn is_idle(&self, now: u64) -> bool {
        let tick = ticks(now);
        self.call_lease.is_idle(tick) && self.work_lease.is_idle(tick)
    }
}

/// The backend's part of `state` (made on first use).
#[inline]
pub(crate) fn fleet(state: &TenantState) -> Option<&FleetTenant> {
    state.extra::<FleetTenant>()
}
