//! The limiter shared by a layer, its services and its handle: the
//! configuration (swapped whole), the tenants' states, and the admission
//! of one call.

use std::collections::hash_map::RandomState;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use super::budget::{Account, TenantBudget};
use super::config::Rate;
use super::gcra::Gcra;
use super::keeper::{AnswerDue, Dry, Keeper, SharedRates, SharedUnit};
use super::map::TenantMap;
use super::refusal::{LimitError, LimitKind};
use super::snapshot::{Effective, Snapshot};
use super::state::{Bucket, Hashed, NotAdmitted, Slot, TenantState};
use super::tenants::{Tenants, tenants_of};
use crate::tenant::OrgId;

/// What a layer, its services and its handle share.
#[derive(Debug)]
pub(crate) struct Limiter {
    /// The configuration; a call loads it without a lock or a reference
    /// count change (arc-swap's per-thread debt slots).
    pub(crate) config: ArcSwap<Snapshot>,
    pub(crate) tenants: TenantMap,
    /// Hashes tenant ids (keyed per limiter: the ids come from clients).
    pub(crate) hasher: RandomState,
}

/// A tenant charged for a call: its state, its limits (its work rate,
/// for the call's budget), and the token it took, to give back if the
/// call is refused for another tenant.
struct Charged<'c> {
    state: Arc<TenantState>,
    limits: &'c Effective,
    token: Token,
    now: u64,
}

/// The rate token an admitted call took, to give back if the call is
/// refused after all (a federated call refused for another tenant).
#[derive(Debug, Clone, Copy)]
enum Token {
    /// None: the tenant has no rate.
    None,
    /// From the local bucket.
    Local(Gcra),
    /// From the shared keeper.
    Shared(SharedUnit),
}

impl Charged<'_> {
    /// Gives back the token taken (a federated call refused for another
    /// tenant).
    fn refund(&self, keeper: &Keeper) {
        match (self.token, keeper) {
            (Token::None, _) => {}
            (Token::Local(gcra), _) => self.state.give_back(Bucket::Calls, gcra, 1),
            (Token::Shared(unit), Keeper::Shared(shared)) => {
                shared.give_back(&self.state, Bucket::Calls, unit, 1, self.now);
            }
            (Token::Shared(_), Keeper::Local) => {}
        }
    }
}

/// Why a tenant's call was not admitted, small (the hot path returns it),
/// made into a [`LimitError`] by [`refusal`] off that path.
struct Refused<'c> {
    limits: &'c Effective,
    why: NotAdmitted,
    /// With a shared keeper, when the tenant's answer due may change the
    /// verdict: the tenant's state, to wait on.
    answer_due: Option<Arc<TenantState>>,
}

impl<'c> Refused<'c> {
    fn new(limits: &'c Effective, why: NotAdmitted) -> Self {
        Self {
            limits,
            why,
            answer_due: None,
        }
    }
}

/// A call not admitted at once.
#[derive(Debug)]
pub(crate) enum NotYet {
    /// Refused.
    Refused(LimitError),
    /// Its tenant's shared bucket was nearly empty at the keeper's last
    /// answer, which is too old to judge the call by: the answer in flight
    /// decides it. Wait on this (it wakes on that answer, or a request
    /// that ended without one, or after the keeper's longest wait), then
    /// [`admit_again`](Limiter::admit_again) the call.
    AnswerDue(AnswerDue),
}

impl Limiter {
    pub(crate) fn new(snapshot: Snapshot) -> Self {
        Self {
            config: ArcSwap::from_pointee(snapshot),
            tenants: TenantMap::new(),
            hasher: RandomState::new(),
        }
    }

    /// Changes the configuration with `change` (atomically with respect to
    /// other changes: retried if one raced it).
    pub(crate) fn update(&self, change: impl Fn(&Snapshot) -> Snapshot) {
        self.config.rcu(|current| Arc::new(change(current)));
    }

    /// Divides the rates among `replicas` replicas, unless they already
    /// are (a shared keeper reports the count on every change).
    #[allow(
        dead_code,
        reason = "the shared half of the seam: used once a shared keeper is built in"
    )]
    pub(crate) fn set_replicas(&self, replicas: u32) {
        if self.config.load().replicas() != replicas {
            self.update(|config| config.with_replicas(replicas));
        }
    }

    /// Admits or refuses a call: `Ok(None)` when it is not limited (out of
    /// scope, no valid org id, or no limit for its tenants), `Ok(Some)`
    /// with its in-flight places when admitted, `Err` when refused (and
    /// reported to the observer). An admitted call whose tenants have a
    /// work rate gets their [`TenantBudget`] in `budget`, for its
    /// extensions. (The request is not changed here: a function that
    /// changes it would copy it before handing it on.)
    #[inline]
    pub(crate) fn admit<B>(
        &self,
        request: &http::Request<B>,
        budget: &mut Option<TenantBudget>,
    ) -> Result<Option<Slot>, LimitError> {
        self.admit_with::<B, false>(request, budget, None)
            .map_err(|not_yet| match not_yet {
                NotYet::Refused(refused) => refused,
                NotYet::AnswerDue(_) => unreachable!("admit_with::<_, false> does not wait"),
            })
    }

    /// [`admit`](Self::admit), except that a single tenant's call that its
    /// fleet-wide lease cannot judge yet is not refused but told to wait
    /// for the answer in flight ([`NotYet::AnswerDue`]).
    #[inline]
    pub(crate) fn admit_or_wait<B>(
        &self,
        request: &http::Request<B>,
        budget: &mut Option<TenantBudget>,
    ) -> Result<Option<Slot>, NotYet> {
        self.admit_with::<B, true>(request, budget, None)
    }

    /// [`admit_or_wait`](Self::admit_or_wait) for a call judged again
    /// after waiting for an answer: it may wait for another (a federated
    /// call's next tenant), but not past `until`, the end of its first
    /// wait; from then on it is judged at once.
    #[cold]
    pub(crate) fn admit_again<B>(
        &self,
        request: &http::Request<B>,
        budget: &mut Option<TenantBudget>,
        until: std::time::Instant,
    ) -> Result<Option<Slot>, NotYet> {
        if std::time::Instant::now() >= until {
            return self.admit(request, budget).map_err(NotYet::Refused);
        }
        self.admit_with::<B, true>(request, budget, Some(until))
    }

    /// [`admit`](Self::admit); with `WAIT`, [`admit_or_wait`](Self::admit_or_wait).
    #[inline]
    fn admit_with<B, const WAIT: bool>(
        &self,
        request: &http::Request<B>,
        budget: &mut Option<TenantBudget>,
        until: Option<std::time::Instant>,
    ) -> Result<Option<Slot>, NotYet> {
        let config = self.config.load();
        if !config.in_scope(request.uri().path()) {
            return Ok(None);
        }
        match tenants_of(request) {
            None => Ok(None),
            Some(Tenants::One(id)) => match self.charge(&config, id) {
                Ok(None) => Ok(None),
                Ok(Some(charged)) => {
                    if charged.limits.work.is_some() {
                        *budget = Some(self.budget_of(&config, id, &charged));
                    }
                    Ok(Some(Slot::one(charged.state)))
                }
                Err(refused) => {
                    self.not_yet::<B, WAIT>(&config, id, refused, request, budget, until)
                }
            },
            Some(Tenants::Many(ids)) => match self.charge_all(&config, ids, budget) {
                Ok(slot) => Ok(slot),
                Err((id, refused)) => {
                    self.not_yet::<B, WAIT>(&config, id.as_str(), refused, request, budget, until)
                }
            },
            Some(Tenants::Parsed(ids)) => match self.charge_all(&config, ids.as_slice(), budget) {
                Ok(slot) => Ok(slot),
                Err((id, refused)) => {
                    self.not_yet::<B, WAIT>(&config, id.as_str(), refused, request, budget, until)
                }
            },
        }
    }

    /// A call refused for tenant `id`: with `WAIT`, told to wait for the
    /// answer due on that tenant's lease, if one is (then judged again,
    /// whole: a federated call's other tenants too); otherwise the
    /// refusal, reported to the observer.
    #[cold]
    #[inline(never)]
    fn not_yet<B, const WAIT: bool>(
        &self,
        config: &Snapshot,
        id: &str,
        refused: Refused<'_>,
        request: &http::Request<B>,
        budget: &mut Option<TenantBudget>,
        until: Option<std::time::Instant>,
    ) -> Result<Option<Slot>, NotYet> {
        if WAIT && let (Some(state), Keeper::Shared(shared)) = (&refused.answer_due, &config.keeper)
        {
            return match shared.wait_for_answer(state, until) {
                Some(wait) => Err(NotYet::AnswerDue(wait)),
                // It landed already: judge the call again now.
                None => self.admit_with::<B, false>(request, budget, None),
            };
        }
        Err(NotYet::Refused(
            self.refused(config, refusal(config, id, refused)),
        ))
    }

    /// Reports a refusal to the observer.
    #[cold]
    #[inline(never)]
    fn refused(&self, config: &Snapshot, refused: LimitError) -> LimitError {
        if let Some(observer) = &config.observer {
            observer.on_refused(&refused);
        }
        refused
    }

    /// The budget of a single tenant's call.
    #[cold]
    #[inline(never)]
    fn budget_of(&self, config: &Snapshot, id: &str, charged: &Charged<'_>) -> TenantBudget {
        let account = self.account(config, OrgId::from_checked(id.as_bytes()), charged);
        TenantBudget::one(account, self.tenants.clock().clone())
    }

    /// The work account of `tenant`, charged for a call (its limits have a
    /// work rate).
    fn account(&self, config: &Snapshot, tenant: OrgId, charged: &Charged<'_>) -> Account {
        let work = charged
            .limits
            .work
            .unwrap_or_else(|| unreachable!("a work rate"));
        let account = Account::new(tenant, Arc::clone(&charged.state), work);
        match (&config.keeper, charged.limits.configured.work_rate) {
            (Keeper::Shared(shared), Some(fleet)) => account.shared(Arc::clone(shared), fleet),
            _ => account,
        }
    }

    /// Charges one call to tenant `id`: `Ok(None)` if the tenant has no
    /// limit.
    #[inline]
    fn charge<'c>(
        &self,
        config: &'c Snapshot,
        id: &str,
    ) -> Result<Option<Charged<'c>>, Refused<'c>> {
        let key = Hashed::new(&self.hasher, id);
        let limits = config.limits_for(key);
        if limits.is_unlimited() {
            return Ok(None);
        }
        let now = self.tenants.now();
        if let (Keeper::Shared(shared), Some((_, local)), Some(fleet)) =
            (&config.keeper, limits.rate, limits.configured.rate)
        {
            return self.charge_shared(config, &**shared, key, limits, (fleet, local), now);
        }
        let rate = limits.rate.map(|(_, gcra)| (gcra, now));
        let guard = self.tenants.guard();
        loop {
            let state = self
                .tenants
                .get_or_insert(key, limits.overridden, config, &guard);
            return match state.admit(limits.max_in_flight, rate, || self.tenants.now()) {
                Ok(()) => Ok(Some(Charged {
                    state: Arc::clone(state),
                    limits,
                    token: rate.map_or(Token::None, |(gcra, _)| Token::Local(gcra)),
                    now,
                })),
                Err(NotAdmitted::Evicted) => {
                    self.tenants.remove_dead(key, state, &guard);
                    continue;
                }
                Err(why) => Err(Refused::new(limits, why)),
            };
        }
    }

    /// [`charge`](Self::charge) of a tenant with a rate, kept by a shared
    /// keeper: a unit of the fleet-wide rate `fleet` from it while it is
    /// up, then an in-flight place; while it is down, the local bucket at
    /// the keeper's fallback rate (`local`, the rate ÷ replicas, unless
    /// it knows better).
    #[inline(never)]
    fn charge_shared<'c>(
        &self,
        config: &'c Snapshot,
        shared: &dyn SharedRates,
        key: Hashed<'_>,
        limits: &'c Effective,
        (fleet, local): (Rate, Gcra),
        now: u64,
    ) -> Result<Option<Charged<'c>>, Refused<'c>> {
        let clock = || self.tenants.now();
        let guard = self.tenants.guard();
        loop {
            let state = self
                .tenants
                .get_or_insert(key, limits.overridden, config, &guard);
            let admitted = if shared.is_up() {
                match shared.take(state, key.id, Bucket::Calls, fleet, local, 1, now, &clock) {
                    Ok(unit) => {
                        let occupied = state.occupy(limits.max_in_flight);
                        if occupied == Err(NotAdmitted::InFlight) {
                            shared.give_back(state, Bucket::Calls, unit, 1, now);
                        }
                        occupied.map(|()| Token::Shared(unit))
                    }
                    Err(Dry { wait, answer_due }) => {
                        let why =
                            state.unless_evicted(NotAdmitted::SharedRate { wait, answer_due });
                        if let NotAdmitted::SharedRate {
                            answer_due: true, ..
                        } = why
                        {
                            let mut refused = Refused::new(limits, why);
                            refused.answer_due = Some(Arc::clone(state));
                            return Err(refused);
                        }
                        Err(why)
                    }
                }
            } else {
                let gcra = shared
                    .fallback(state, Bucket::Calls, fleet, now)
                    .map_or(local, |(_, gcra)| gcra);
                state
                    .admit(limits.max_in_flight, Some((gcra, now)), clock)
                    .map(|()| Token::Local(gcra))
            };
            return match admitted {
                Ok(token) => Ok(Some(Charged {
                    state: Arc::clone(state),
                    limits,
                    token,
                    now,
                })),
                Err(NotAdmitted::Evicted) => {
                    self.tenants.remove_dead(key, state, &guard);
                    continue;
                }
                Err(why) => Err(Refused::new(limits, why)),
            };
        }
    }

    /// Charges a federated call to each of its tenants (sorted, distinct):
    /// admitted only if every one of them is under its limits; on the
    /// first one over, the tenants already charged get their place and
    /// token back, and that tenant and why are the error. Admitted, the
    /// tenants with a work rate make `budget`.
    #[cold]
    fn charge_all<'c>(
        &self,
        config: &'c Snapshot,
        ids: &[OrgId],
        budget: &mut Option<TenantBudget>,
    ) -> Result<Option<Slot>, (OrgId, Refused<'c>)> {
        let mut charged: Vec<Charged<'_>> = Vec::with_capacity(ids.len());
        let mut accounts = Vec::new();
        for id in ids {
            match self.charge(config, id.as_str()) {
                Ok(Some(one)) => {
                    if one.limits.work.is_some() {
                        accounts.push(self.account(config, id.clone(), &one));
                    }
                    charged.push(one);
                }
                Ok(None) => {}
                Err(refused) => {
                    charged.iter().for_each(|one| one.refund(&config.keeper));
                    // Dropping the slot gives the in-flight places back.
                    drop(Slot::many(
                        charged.into_iter().map(|one| one.state).collect(),
                    ));
                    return Err((id.clone(), refused));
                }
            }
        }
        if !accounts.is_empty() {
            *budget = Some(TenantBudget::many(accounts, self.tenants.clock().clone()));
        }
        Ok((!charged.is_empty())
            .then(|| Slot::many(charged.into_iter().map(|one| one.state).collect())))
    }
}

/// The refusal of a call of tenant `id`, with its pushback: for the rate,
/// the time until the tenant's bucket admits the call; for calls in
/// flight, the configured one, if any.
#[cold]
#[inline(never)]
fn refusal(config: &Snapshot, id: &str, refused: Refused<'_>) -> LimitError {
    let limits = refused.limits;
    let (limit, retry_after) = match (refused.why, limits.rate) {
        (NotAdmitted::Rate { wait }, Some((rate, _))) => {
            (LimitKind::Rate(rate), Some(Duration::from_nanos(wait)))
        }
        // The fleet-wide rate, as configured (not divided).
        (NotAdmitted::SharedRate { wait, .. }, Some((rate, _))) => (
            LimitKind::Rate(limits.configured.rate.unwrap_or(rate)),
            Some(Duration::from_nanos(wait)),
        ),
        _ => (
            LimitKind::InFlight {
                max: limits.max_in_flight.unwrap_or(0),
            },
            config.in_flight_pushback,
        ),
    };
    let refused = LimitError::new(OrgId::from_checked(id.as_bytes()), limit);
    match retry_after {
        Some(after) => refused.with_retry_after(after),
        None => refused,
    }
}
