//! The Redis backend as the limiter's shared rate keeper
//! ([`SharedRates`]): how a call or a work charge spends the tenant's
//! leases ([`FleetTenant`](super::tenant::FleetTenant)), gives units back, falls back, and waits for
//! an answer.

use std::sync::Arc;
use std::time::Instant;

use super::answer::AnswerWait;
use super::lease::{NoCredit, Take};
use super::requests::SharedLimits;
use super::tenant::fleet;
use super::tick::ticks;
use crate::limits::config::Rate;
use crate::limits::gcra::Gcra;
use crate::limits::keeper::{AnswerDue, Dry, ReplicaCount, SharedRates, SharedUnit};
use crate::limits::state::{Bucket, TenantState};

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
        // `ahead`: the request tops up a lease at its low-water mark (no
        // call waits on it), rather than one a call found dry.
        let (taken, request, ahead) = match lease.take(units, tick) {
            Take::Taken { request } => (Ok(SharedUnit::Leased), request, true),
            Take::Dry => match lease.credit(
                units,
                tick,
                || ticks(clock()),
                self.credit_limits(rate.burst),
                || state.take(bucket, local, now, units, clock),
            ) {
                Ok(request) => (Ok(SharedUnit::Credit(local)), request, false),
                Err(NoCredit {
                    wait,
                    request,
                    answer_due,
                }) => (Err(Dry { wait, answer_due }), request, false),
            },
        };
        if request {
            self.request(state, tenant, bucket, rate, ahead);
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
