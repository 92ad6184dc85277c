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
use super::map::TenantMap;
use super::refusal::{ExceededLimit, LimitExceeded};
use super::snapshot::Snapshot;
use super::state::{Hashed, NotAdmitted, Slot, TenantState};
use crate::tenant::error::InvalidOrgId;
use crate::tenant::extract::single_value;
use crate::tenant::validate::{TENANT_SEPARATOR, ascii_str, check_org_id};
use crate::tenant::{OrgId, TenantIds};

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

/// A tenant charged for a call: its state, the rate it took a token of
/// (to give back if the call is refused for another tenant), and its work
/// rate (for the call's budget).
struct Charged {
    state: Arc<TenantState>,
    gcra: Option<Gcra>,
    work: Option<(Rate, Gcra)>,
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

    /// Admits or refuses a call: `Ok(None)` when it is not limited (out of
    /// scope, no valid org id, or no limit for its tenants), `Ok(Some)`
    /// with its in-flight places when admitted, `Err` when refused (and
    /// reported to the observer). An admitted call whose tenants have a
    /// work rate gets their [`TenantBudget`] in its extensions.
    #[inline]
    pub(crate) fn admit<B>(
        &self,
        request: &mut http::Request<B>,
    ) -> Result<Option<Slot>, LimitExceeded> {
        let config = self.config.load();
        if !config.in_scope(request.uri().path()) {
            return Ok(None);
        }
        let mut budget = None;
        let admitted = match tenants_of(request) {
            None => return Ok(None),
            Some(Tenants::One(id)) => self.charge(&config, id).map(|charged| {
                charged.map(|charged| {
                    if let Some(work) = charged.work {
                        budget = Some(self.budget_of(id, &charged.state, work));
                    }
                    Slot::one(charged.state)
                })
            }),
            Some(Tenants::Many(ids)) => self.charge_all(&config, ids, &mut budget),
            Some(Tenants::Parsed(ids)) => self.charge_all(&config, ids.as_slice(), &mut budget),
        };
        if let Some(budget) = budget {
            request.extensions_mut().insert(budget);
        }
        if let (Err(refused), Some(observer)) = (&admitted, &config.observer) {
            observer.on_refused(refused);
        }
        admitted
    }

    /// The budget of a single tenant's call.
    #[cold]
    #[inline(never)]
    fn budget_of(&self, id: &str, state: &Arc<TenantState>, work: (Rate, Gcra)) -> TenantBudget {
        let account = Account::new(OrgId::from_checked(id.as_bytes()), Arc::clone(state), work);
        TenantBudget::one(account, self.tenants.clock().clone())
    }

    /// Charges one call to tenant `id`: `Ok(None)` if the tenant has no
    /// limit.
    #[inline]
    fn charge(&self, config: &Snapshot, id: &str) -> Result<Option<Charged>, LimitExceeded> {
        let key = Hashed::new(&self.hasher, id);
        let limits = config.limits_for(key);
        if limits.is_unlimited() {
            return Ok(None);
        }
        let rate = limits.rate.map(|(_, gcra)| (gcra, self.tenants.now()));
        let guard = self.tenants.guard();
        loop {
            let state = self
                .tenants
                .get_or_insert(key, limits.overridden, config, &guard);
            let (refused, retry_after) = match state.admit(limits.max_in_flight, rate) {
                Ok(()) => {
                    return Ok(Some(Charged {
                        state: Arc::clone(state),
                        gcra: rate.map(|(gcra, _)| gcra),
                        work: limits.work,
                    }));
                }
                Err(NotAdmitted::Evicted) => {
                    self.tenants.remove_dead(key, state, &guard);
                    continue;
                }
                Err(NotAdmitted::InFlight) => (
                    ExceededLimit::InFlight {
                        max: limits.max_in_flight.unwrap_or(0),
                    },
                    config.in_flight_pushback,
                ),
                Err(NotAdmitted::Rate { wait }) => match limits.rate {
                    Some((rate, _)) => {
                        (ExceededLimit::Rate(rate), Some(Duration::from_nanos(wait)))
                    }
                    None => (ExceededLimit::InFlight { max: 0 }, None),
                },
            };
            return Err(refusal(id, refused, retry_after));
        }
    }

    /// Charges a federated call to each of its tenants (sorted, distinct):
    /// admitted only if every one of them is under its limits; on the
    /// first one over, the tenants already charged get their place and
    /// token back. Admitted, the tenants with a work rate make `budget`.
    #[cold]
    fn charge_all(
        &self,
        config: &Snapshot,
        ids: &[OrgId],
        budget: &mut Option<TenantBudget>,
    ) -> Result<Option<Slot>, LimitExceeded> {
        let mut charged: Vec<Charged> = Vec::with_capacity(ids.len());
        let mut accounts = Vec::new();
        for id in ids {
            match self.charge(config, id.as_str()) {
                Ok(Some(one)) => {
                    if let Some(work) = one.work {
                        accounts.push(Account::new(id.clone(), Arc::clone(&one.state), work));
                    }
                    charged.push(one);
                }
                Ok(None) => {}
                Err(refused) => {
                    for one in &charged {
                        if let Some(gcra) = one.gcra {
                            one.state.refund(gcra);
                        }
                    }
                    // Dropping the slot gives the in-flight places back.
                    drop(Slot::many(
                        charged.into_iter().map(|one| one.state).collect(),
                    ));
                    return Err(refused);
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

/// The refusal of a call of tenant `id` over `limit`.
#[cold]
fn refusal(id: &str, limit: ExceededLimit, retry_after: Option<Duration>) -> LimitExceeded {
    let refused = LimitExceeded::new(OrgId::from_checked(id.as_bytes()), limit);
    match retry_after {
        Some(after) => refused.with_retry_after(after),
        None => refused,
    }
}

/// The tenants of a call.
enum Tenants<'a> {
    /// One tenant, borrowed from the request.
    One(&'a str),
    /// Several, validated by `RequireOrgIdLayer` (its extension).
    Many(&'a [OrgId]),
    /// Several, parsed here from a federated `a|b` header.
    Parsed(TenantIds),
}

/// The tenants of `request`: those `RequireOrgIdLayer` put into its
/// extensions when that layer is outside this one; otherwise read from
/// its `x-scope-orgid` header by the same rules (borrowed, no allocation
/// for one tenant). `None` without a valid org id.
#[inline]
fn tenants_of<B>(request: &http::Request<B>) -> Option<Tenants<'_>> {
    if let Some(ids) = request.extensions().get::<TenantIds>() {
        return Some(match ids.single() {
            Some(id) => Tenants::One(id.as_str()),
            None => Tenants::Many(ids.as_slice()),
        });
    }
    let value = single_value(request.headers()).ok()?.as_bytes();
    match check_org_id(value, 0) {
        Ok(()) => ascii_str(value, 0).ok().map(Tenants::One),
        Err(InvalidOrgId::Character {
            byte: TENANT_SEPARATOR,
            ..
        }) => TenantIds::parse_bytes(value).ok().map(Tenants::Parsed),
        Err(_) => None,
    }
}
