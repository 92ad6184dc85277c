//! The seam between the limiter and where a tenant's rates are kept:
//! [`Keeper`], chosen once when the layer is built (its configuration
//! holds it). `Local` keeps them in each tenant's state (the GCRA
//! buckets, inline on the admission path: no call through this seam);
//! `Shared` keeps them in a bucket shared by a fleet ([`SharedRates`]:
//! the Redis backend), with the local buckets as its fallback.
//!
//! A shared keeper keeps what it needs per tenant in the tenant's state
//! ([`TenantState::extra`]), takes units for calls and work charges,
//! gives them back, and may ask a call to wait for its answer in flight.
//! It knows nothing of the limiter, the layer or the request.

#![allow(
    dead_code,
    reason = "the shared half of the seam: used once a shared keeper is built in"
)]

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use super::config::Rate;
use super::gcra::Gcra;
use super::state::{Bucket, TenantState};

/// Where the tenants' rates are kept.
#[derive(Debug, Clone, Default)]
pub(crate) enum Keeper {
    /// In this replica's own buckets (each tenant's state).
    #[default]
    Local,
    /// In buckets shared by a fleet, spent locally.
    Shared(Arc<dyn SharedRates>),
}

/// Told the fleet's replica count by a shared keeper (at once, then on
/// each change): `false` once its limiter is gone (then forgotten).
pub(crate) type ReplicaCount = Box<dyn Fn(u32) -> bool + Send + Sync>;

/// A unit a shared keeper gave, to give back if its call or charge is
/// refused after all (a federated call refused for another tenant).
#[derive(Debug, Clone, Copy)]
pub(crate) enum SharedUnit {
    /// From what the fleet granted this replica (a lease).
    Leased,
    /// On credit, judged by the local bucket with these parameters (which
    /// gave a unit too).
    Credit(Gcra),
}

/// A shared keeper's refusal: no unit for this replica now.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Dry {
    /// Nanoseconds until a retry may pass (above 0).
    pub(crate) wait: u64,
    /// An answer in flight may change the verdict: a call may wait for it
    /// ([`SharedRates::wait_for_answer`]).
    pub(crate) answer_due: bool,
}

/// A call waiting for its tenant's answer from a shared keeper: ready
/// when it lands or at `deadline`, whichever comes first.
pub(crate) struct AnswerDue {
    /// Ready when the call can be judged again.
    pub(crate) answered: Pin<Box<dyn Future<Output = ()> + Send + Sync>>,
    /// The latest the wait ends: a call judged again that must wait for
    /// another answer (a federated call's next tenant) waits no later.
    pub(crate) deadline: Instant,
}

impl fmt::Debug for AnswerDue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnswerDue")
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

/// Rates kept in buckets shared by a fleet, each spent by this replica
/// from what the fleet grants it (times are ns since the limiter's
/// epoch; `clock` reads it again).
pub(crate) trait SharedRates: Any + Send + Sync + fmt::Debug {
    /// Reports the fleet's replica count to `to`, now and on every change
    /// (the limiter divides its local buckets' rates by it).
    fn report_replicas(&self, to: ReplicaCount);

    /// Whether the shared buckets are in use now (otherwise each tenant's
    /// local bucket judges, at [`fallback`](Self::fallback)'s rate).
    fn is_up(&self) -> bool;

    /// Takes `units` from `tenant`'s shared `bucket` (the fleet-wide
    /// `rate`; `local`, the local bucket's parameters, judges units on
    /// credit).
    #[allow(clippy::too_many_arguments)]
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
    ) -> Result<SharedUnit, Dry>;

    /// Gives back `units` that [`take`](Self::take) gave as `unit` at
    /// `now`.
    fn give_back(
        &self,
        state: &TenantState,
        bucket: Bucket,
        unit: SharedUnit,
        units: u64,
        now: u64,
    );

    /// While the shared buckets are not in use: the local bucket for
    /// `tenant`'s `bucket` (fleet-wide `rate`), if the keeper knows a
    /// better one than the rate ÷ replicas.
    fn fallback(
        &self,
        state: &TenantState,
        bucket: Bucket,
        rate: Rate,
        now: u64,
    ) -> Option<(Rate, Gcra)>;

    /// A wait for the answer due on the tenant's call bucket, ending no
    /// later than `until` (or the keeper's own longest wait from now);
    /// `None` if it landed already (judge the call again now).
    fn wait_for_answer(&self, state: &TenantState, until: Option<Instant>) -> Option<AnswerDue>;
}
