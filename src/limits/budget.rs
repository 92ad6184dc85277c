//! [`TenantBudget`]: charging a call's tenants for the work it carries,
//! against their work-unit rates.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::config::Rate;
use super::gcra::Gcra;
use super::keeper::{Dry, SharedRates, SharedUnit};
use super::map::Clock;
use super::refusal::{LimitError, LimitKind};
use super::state::{Bucket, TenantState};
use crate::tenant::OrgId;

/// The work-unit budget of an admitted call: charge it for the work the
/// call carries once the service knows how much (Cortex's distributor
/// counts a write request's samples, then asks its limiter for that many).
///
/// [`TenantLimitLayer`](super::TenantLimitLayer) puts one into the
/// request's extensions when an admitted call's tenant has a
/// [work rate](super::Limits::with_work_rate); read it with
/// [`TenantBudgetExt`], or charge through it directly with
/// [`TenantBudgetExt::charge_work`], which succeeds when there is no
/// budget (no work rate configured: nothing to charge).
///
/// A charge follows `golang.org/x/time/rate`'s `AllowN`: it takes all its
/// units from the tenant's work bucket (`burst` units, refilled at
/// `per_second`) or none; a charge above the burst is always refused; a
/// refused charge takes nothing. The refusal ([`LimitError`], limit
/// [`LimitKind::WorkRate`]) names the tenant, the work rate and the
/// units, and converts into the same `RESOURCE_EXHAUSTED` status as the
/// layer's refusals, with a pushback: how long until the bucket holds the
/// units (none for a charge above the burst: no wait makes it pass).
/// A federated call (`a|b`) charges every tenant named that has a work
/// rate, all or none: refused by one, the others charged get their units
/// back.
///
/// Cloning is cheap (the tenant's state is shared, not copied), so a
/// streaming call can keep it and charge each message. A charge is one
/// compare-and-swap on the tenant's own state (the cache line its
/// in-flight count and call rate live on); charge while the call runs (a
/// tenant's state is evicted only when no call is in flight, and a charge
/// after that counts on the evicted state).
///
/// Charge refusals are returned to the service, not reported to the
/// layer's [`LimitObserver`](super::LimitObserver): the service decides
/// what a refused charge means (refuse the call, drop part of it).
///
/// ```
/// use tonic::{Request, Response, Status};
/// use tonic_hotpath::limits::TenantBudgetExt;
///
/// /// A handler of a write whose request carries `samples`.
/// async fn push(request: Request<Vec<f64>>) -> Result<Response<()>, Status> {
///     let samples = request.get_ref().len() as u64;
///     // Refused: RESOURCE_EXHAUSTED naming the tenant and the limit, with
///     // `grpc-retry-pushback-ms`; no work rate configured: Ok.
///     request.charge_work(samples)?;
///     Ok(Response::new(()))
/// }
/// # drop(push(Request::new(vec![1.0])));
/// ```
#[derive(Clone)]
pub struct TenantBudget {
    accounts: Accounts,
    /// The limiter's clock (a copy, no reference count).
    clock: Clock,
}

#[derive(Clone)]
enum Accounts {
    /// One tenant: no allocation beyond the extension's.
    One(Account),
    /// A federated call's tenants with a work rate, in sorted order.
    Many(Arc<[Account]>),
}

/// One tenant's work bucket and the work rate in force when its call was
/// admitted.
#[derive(Clone)]
pub(crate) struct Account {
    tenant: OrgId,
    state: Arc<TenantState>,
    rate: Rate,
    gcra: Gcra,
    /// With a shared keeper: it, and the fleet-wide work rate.
    fleet: Option<(Arc<dyn SharedRates>, Rate)>,
}

/// Where a charge's units came from, to give them back.
#[derive(Debug, Clone, Copy)]
enum Charge {
    /// From the local bucket, with these parameters.
    Local(Gcra),
    /// From the shared keeper.
    Shared(SharedUnit),
}

impl Account {
    pub(crate) fn new(tenant: OrgId, state: Arc<TenantState>, (rate, gcra): (Rate, Gcra)) -> Self {
        Self {
            tenant,
            state,
            rate,
            gcra,
            fleet: None,
        }
    }

    /// This account charged against the fleet-wide work rate `fleet`
    /// (while `shared` is up).
    pub(crate) fn shared(mut self, shared: Arc<dyn SharedRates>, fleet: Rate) -> Self {
        self.fleet = Some((shared, fleet));
        self
    }

    /// Takes `units` from the tenant's work bucket at `now` (read off
    /// `clock`, which a refusal reads again), or refuses.
    #[inline]
    fn charge(&self, now: u64, units: u64, clock: impl Fn() -> u64) -> Result<Charge, LimitError> {
        if let Some((shared, fleet)) = &self.fleet
            && shared.is_up()
        {
            return self.charge_shared(&**shared, *fleet, now, units, &clock);
        }
        let (rate, gcra) = self.local(now);
        if units > u64::from(rate.burst) {
            return Err(self.refusal(rate, units));
        }
        match self.state.take(Bucket::Work, gcra, now, units, clock) {
            Ok(()) => Ok(Charge::Local(gcra)),
            Err(wait) => Err(self
                .refusal(rate, units)
                .with_retry_after(Duration::from_nanos(wait))),
        }
    }

    /// The local work bucket at `now`: with a shared keeper that is
    /// down, its fallback (the tenant's recent share of the fleet's work
    /// traffic on this replica), if known; otherwise the work rate in
    /// force (÷ replicas).
    #[inline]
    fn local(&self, now: u64) -> (Rate, Gcra) {
        if let Some((shared, fleet)) = &self.fleet
            && let Some(share) = shared.fallback(&self.state, Bucket::Work, *fleet, now)
        {
            return share;
        }
        (self.rate, self.gcra)
    }

    /// [`charge`](Self::charge) against the fleet-wide work rate, kept by
    /// `shared`.
    fn charge_shared(
        &self,
        shared: &dyn SharedRates,
        fleet: Rate,
        now: u64,
        units: u64,
        clock: &dyn Fn() -> u64,
    ) -> Result<Charge, LimitError> {
        if units > u64::from(fleet.burst) {
            return Err(self.refusal(fleet, units));
        }
        let tenant = self.tenant.as_str();
        match shared.take(
            &self.state,
            tenant,
            Bucket::Work,
            fleet,
            self.gcra,
            units,
            now,
            clock,
        ) {
            Ok(unit) => Ok(Charge::Shared(unit)),
            Err(Dry { wait, .. }) => Err(self
                .refusal(fleet, units)
                .with_retry_after(Duration::from_nanos(wait))),
        }
    }

    /// Gives back `units` charged at `now` as `charge`.
    fn refund(&self, charge: Charge, now: u64, units: u64) {
        match (charge, &self.fleet) {
            (Charge::Local(gcra), _) => self.state.give_back(Bucket::Work, gcra, units),
            (Charge::Shared(unit), Some((shared, _))) => {
                shared.give_back(&self.state, Bucket::Work, unit, units, now);
            }
            (Charge::Shared(_), None) => {}
        }
    }

    #[cold]
    fn refusal(&self, rate: Rate, units: u64) -> LimitError {
        LimitError::new(self.tenant.clone(), LimitKind::WorkRate { rate, units })
    }
}

impl TenantBudget {
    /// The budget of a single tenant's call.
    pub(crate) fn one(account: Account, clock: Clock) -> Self {
        Self {
            accounts: Accounts::One(account),
            clock,
        }
    }

    /// The budget of a federated call: `accounts` in the tenants' order.
    pub(crate) fn many(accounts: Vec<Account>, clock: Clock) -> Self {
        Self {
            accounts: Accounts::Many(accounts.into()),
            clock,
        }
    }

    /// Charges the call's tenants `units` work units each.
    ///
    /// # Errors
    ///
    /// [`LimitError`] ([`LimitKind::WorkRate`]) when a tenant's work
    /// bucket does not hold `units` now, or `units` is above its burst;
    /// nothing is taken from any tenant then.
    pub fn charge(&self, units: u64) -> Result<(), LimitError> {
        if units == 0 {
            return Ok(());
        }
        let now = self.clock.now();
        match &self.accounts {
            Accounts::One(account) => account.charge(now, units, || self.clock.now()).map(drop),
            Accounts::Many(accounts) => charge_all(accounts, now, units, || self.clock.now()),
        }
    }

    /// The tenants this budget charges (those of the call with a work
    /// rate), in sorted order.
    pub fn tenants(&self) -> impl Iterator<Item = &OrgId> {
        self.accounts().iter().map(|account| &account.tenant)
    }

    /// The work rate of `tenant` in force on this replica when the call
    /// was admitted (under the global strategy, divided by the replicas);
    /// `None` if this budget does not charge it.
    pub fn work_rate(&self, tenant: &str) -> Option<Rate> {
        self.accounts()
            .iter()
            .find(|account| account.tenant == tenant)
            .map(|account| account.rate)
    }

    fn accounts(&self) -> &[Account] {
        match &self.accounts {
            Accounts::One(account) => std::slice::from_ref(account),
            Accounts::Many(accounts) => accounts,
        }
    }
}

/// Charges every account `units`, all or none.
#[cold]
fn charge_all(
    accounts: &[Account],
    now: u64,
    units: u64,
    clock: impl Fn() -> u64 + Copy,
) -> Result<(), LimitError> {
    if units == 0 {
        return Ok(());
    }
    let mut charges = Vec::with_capacity(accounts.len());
    for account in accounts {
        match account.charge(now, units, clock) {
            Ok(charge) => charges.push(charge),
            Err(refused) => {
                for (account, charge) in accounts.iter().zip(charges) {
                    account.refund(charge, now, units);
                }
                return Err(refused);
            }
        }
    }
    Ok(())
}

impl fmt::Debug for TenantBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(
                self.accounts()
                    .iter()
                    .map(|account| (&account.tenant, account.rate)),
            )
            .finish()
    }
}

/// The [`TenantBudget`] that [`TenantLimitLayer`](super::TenantLimitLayer)
/// put into a request's extensions, for handlers (tonic) and plain HTTP
/// routes.
///
/// ```
/// use tonic::Request;
/// use tonic_hotpath::limits::TenantBudgetExt;
///
/// // Without a budget (no layer, or no work rate for the tenant), charges
/// // succeed and cost nothing.
/// let request = Request::new(());
/// assert!(request.tenant_budget().is_none());
/// assert!(request.charge_work(1_000_000).is_ok());
/// ```
pub trait TenantBudgetExt {
    /// The call's budget; `None` when none of its tenants has a work rate
    /// (or no limit layer admitted it).
    fn tenant_budget(&self) -> Option<&TenantBudget>;

    /// Charges the call's tenants `units` work units
    /// ([`TenantBudget::charge`]); `Ok` without a budget.
    ///
    /// # Errors
    ///
    /// As [`TenantBudget::charge`].
    fn charge_work(&self, units: u64) -> Result<(), LimitError> {
        self.tenant_budget()
            .map_or(Ok(()), |budget| budget.charge(units))
    }
}

impl<T> TenantBudgetExt for tonic::Request<T> {
    fn tenant_budget(&self) -> Option<&TenantBudget> {
        self.extensions().get()
    }
}

impl<B> TenantBudgetExt for http::Request<B> {
    fn tenant_budget(&self) -> Option<&TenantBudget> {
        self.extensions().get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::map::TenantMap;

    const SECOND: u64 = 1_000_000_000;

    fn account(tenant: &str, per_second: f64, burst: u32) -> Account {
        let rate = Rate::new(per_second, burst).unwrap();
        Account::new(
            OrgId::new(tenant).unwrap(),
            Arc::default(),
            (rate, Gcra::of(rate, 1)),
        )
    }

    #[test]
    fn a_charge_above_the_burst_is_refused_without_pushback_or_tokens() {
        let account = account("team-a", 1.0, 10);
        let refused = account.charge(SECOND, 11, || SECOND).unwrap_err();
        assert_eq!(
            refused.limit(),
            LimitKind::WorkRate {
                rate: account.rate,
                units: 11
            }
        );
        assert_eq!(refused.retry_after(), None);
        assert_eq!(
            refused.to_string(),
            "work rate limit (1 per second, burst 10) exceeded for tenant \"team-a\" by a \
             charge of 11"
        );
        assert!(account.charge(SECOND, 10, || SECOND).is_ok());
        let refused = account.charge(SECOND, 3, || SECOND).unwrap_err();
        assert_eq!(refused.retry_after(), Some(Duration::from_secs(3)));
        assert!(account.charge(SECOND, 0, || SECOND).is_ok());
    }

    #[test]
    fn a_federated_charge_is_all_or_none() {
        let accounts = [account("a", 1.0, 10), account("b", 1.0, 4)];
        assert_eq!(charge_all(&accounts, SECOND, 3, || SECOND), Ok(()));
        let refused = charge_all(&accounts, SECOND, 3, || SECOND).unwrap_err();
        assert_eq!(refused.tenant(), "b");
        // a got its 3 back: 7 left there, 1 in b.
        assert!(accounts[0].charge(SECOND, 7, || SECOND).is_ok());
        assert!(accounts[1].charge(SECOND, 1, || SECOND).is_ok());
    }

    #[test]
    fn a_budget_lists_its_tenants_and_rates() {
        let clock = TenantMap::new().clock().clone();
        let budget = TenantBudget::many(vec![account("a", 2.0, 3), account("b", 5.0, 6)], clock);
        assert_eq!(budget.tenants().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(budget.work_rate("b").map(|rate| rate.burst), Some(6));
        assert_eq!(budget.work_rate("c"), None);
        assert_eq!(format!("{budget:?}").matches("burst").count(), 2);
        assert_eq!(budget.charge(3), Ok(()));
        assert!(budget.charge(1).is_err());
    }
}
