//! The Redis backend as the limiter's shared rate keeper
//! ([`SharedRates`]): what it keeps per tenant ([`FleetTenant`]: a lease
//! on each of the tenant's fleet-wide buckets), and how a call or a work
//! charge spends them.

use std::sync::Arc;
use std::time::Instant;

use event_listener::Event;

use super::answer::AnswerWait;
use super::lease::{Lease, NoCredit, Take, ticks};
use super::requests::SharedLimits;
use crate::limits::config::Rate;
use crate::limits::gcra::Gcra;
use crate::limits::keeper::{AnswerDue, Dry, ReplicaCount, SharedRates, SharedUnit};
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

/// No unit, and nothing known of the fleet: the shortest pushback (never
/// met: a limiter's states hold only its own keeper's part).
const UNKNOWN: Dry = Dry {
    wait: 1_000_000,
    answer_due: false,
};

impl SharedRates for SharedLimits {
    fn report_replicas(&self, to: ReplicaCount) {
        self.backend().inner.attach(to);
    }

    #[inline]
    fn is_up(&self) -> bool {
        SharedLimits::is_up(self)
    }

    /// A unit of the tenant's lease or, the lease dry, on credit (see
    /// [`Lease::credit`]); sends the lease request the take or the credit
    /// calls for.
    #[inline]
    fn take(
        &self,
        state: &Arc<TenantState>,
        tenant: &str,
        bucket: Bucket,
        rate: Rate,
        local: Gcra,
        units: u64,
        now: u64,
        clock: &dyn Fn() -> u64,
    ) -> Result<SharedUnit, Dry> {
        let Some(lease) = fleet(state).map(|fleet| fleet.lease(bucket)) else {
            return Err(UNKNOWN);
        };
        let tick = ticks(now);
        let (taken, request) = match lease.take(units, tick) {
            Take::Taken { request } => (Ok(SharedUnit::Leased), request),
            Take::Dry => match lease.credit(
                units,
                tick,
                || ticks(clock()),
                self.credit_limits(rate.burst),
                || state.take(bucket, local, now, units, clock),
            ) {
                Ok(request) => (Ok(SharedUnit::Credit(local)), request),
                Err(NoCredit {
                    wait,
                    request,
                    answer_due,
                }) => (Err(Dry { wait, answer_due }), request),
            },
        };
        if request {
            self.request(state, tenant, bucket, rate);
        }
        taken
    }

    fn give_back(
        &self,
        state: &TenantState,
        bucket: Bucket,
        unit: SharedUnit,
        units: u64,
        now: u64,
    ) {
        let Some(lease) = fleet(state).map(|fleet| fleet.lease(bucket)) else {
            return;
        };
        match unit {
            SharedUnit::Leased => lease.give_back(units, ticks(now)),
            SharedUnit::Credit(local) => {
                lease.forgive(units);
                state.give_back(bucket, local, units);
            }
        }
    }

    /// The replica's recent share of the tenant's fleet traffic on
    /// `bucket`, if known.
    fn fallback(
        &self,
        state: &TenantState,
        bucket: Bucket,
        rate: Rate,
        now: u64,
    ) -> Option<(Rate, Gcra)> {
        fleet(state)?.lease(bucket).fallback(rate, ticks(now))
    }

    fn wait_for_answer(&self, state: &TenantState, until: Option<Instant>) -> Option<AnswerDue> {
        let wait = AnswerWait::new(fleet(state)?, self, until)?;
        let deadline = wait.deadline();
        Some(AnswerDue {
            answered: Box::pin(wait),
            deadline,
        })
    }
}
