//! [`SharedLimits`]: a limiter's link to its [`RedisBackend`]: the lease
//! requests its calls start, and the task that serves them off the call
//! path.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::backend::RedisBackend;
use super::lease::{Answered, CreditLimits};
use super::script::LeaseAsk;
use super::tenant::fleet;
use super::tick::{nanos, ticks};
use crate::limits::config::Rate;
use crate::limits::map::Clock;
use crate::limits::state::{Bucket, TenantState};
use crate::tenant::OrgId;

/// The key suffix of a tenant's fleet-wide bucket.
fn key_suffix(bucket: Bucket) -> &'static str {
    match bucket {
        Bucket::Calls => "calls",
        Bucket::Work => "work",
    }
}

/// A lease to top up: the tenant, its state, which bucket, and the
/// fleet-wide rate in force. Dropped (served, or never served because the
/// runtime shut down), it ends the request in flight and wakes the calls
/// waiting on its answer: a waiting call never outlives its request.
struct LeaseRequest {
    state: Arc<TenantState>,
    tenant: OrgId,
    bucket: Bucket,
    rate: Rate,
    /// A top-up at the lease's low-water mark, which no call waits for.
    ahead: bool,
}

impl Drop for LeaseRequest {
    fn drop(&mut self) {
        if let Some(fleet) = fleet(&self.state) {
            fleet.lease(self.bucket).finish();
            fleet.answered.notify(usize::MAX);
        }
    }
}

/// A limiter's shared backend: in its configuration, read per call.
#[derive(Debug)]
pub(crate) struct SharedLimits {
    backend: RedisBackend,
    requests: mpsc::UnboundedSender<LeaseRequest>,
}

impl std::fmt::Debug for LeaseRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseRequest")
            .field("tenant", &self.tenant)
            .field("bucket", &self.bucket)
            .finish()
    }
}

impl SharedLimits {
    /// Links a limiter (its clock) to `backend`, and starts serving its
    /// lease requests on the backend's runtime.
    pub(crate) fn new(backend: RedisBackend, clock: Clock) -> Arc<Self> {
        let (requests, incoming) = mpsc::unbounded_channel();
        backend
            .inner
            .runtime
            .spawn(serve(backend.clone(), clock, incoming));
        Arc::new(Self { backend, requests })
    }

    /// Whether the fleet's buckets are in use now.
    #[inline]
    pub(crate) fn is_up(&self) -> bool {
        self.backend.inner.breaker.is_up()
    }

    /// The backend.
    pub(crate) fn backend(&self) -> &RedisBackend {
        &self.backend
    }

    /// The bounds of credit for a bucket with a burst of `burst`: the most
    /// units one replica admits on credit, and the least pushback of a
    /// fleet refusal (the least time between two requests, at least 1 ms).
    pub(crate) fn credit_limits(&self, burst: u32) -> CreditLimits {
        let policy = &self.backend.inner.policy;
        let interval = u64::try_from(policy.min_interval_of().as_nanos()).unwrap_or(u64::MAX);
        CreditLimits {
            max_debt: policy.max_debt(burst),
            min_wait: interval.max(1_000_000),
        }
    }

    /// The longest a call waits for its lease's answer.
    pub(crate) fn answer_wait(&self) -> Duration {
        self.backend.inner.policy.answer_wait_of()
    }

    /// Sends a request for `tenant`'s lease on `bucket` (the caller won the
    /// right to: its lease is marked requesting); `ahead`: a top-up at the
    /// lease's low-water mark, which no call waits for. If the task is gone
    /// (the runtime shut down), the request is dropped, which clears the
    /// mark.
    #[cold]
    #[inline(never)]
    pub(crate) fn request(
        &self,
        state: &Arc<TenantState>,
        tenant: &str,
        bucket: Bucket,
        rate: Rate,
        ahead: bool,
    ) {
        let request = LeaseRequest {
            state: Arc::clone(state),
            tenant: OrgId::from_checked(tenant.as_bytes()),
            bucket,
            rate,
            ahead,
        };
        // A request the task is gone for is dropped here.
        let _ = self.requests.send(request);
    }
}

/// Serves lease requests, each on a task of its own (many tenants at
/// once), until the limiter is dropped.
async fn serve(
    backend: RedisBackend,
    clock: Clock,
    mut incoming: mpsc::UnboundedReceiver<LeaseRequest>,
) {
    while let Some(request) = incoming.recv().await {
        tokio::spawn(top_up(backend.clone(), clock.clone(), request));
    }
}

/// Tops up one lease: paced to one request per `min_interval`, and near
/// the limit not before the fleet's bucket holds a batch for this replica
/// (the tick the last answer named); sized by what the replica spent
/// since its last answer, charging its debt. The request, dropped at the
/// end, ends it.
async fn top_up(backend: RedisBackend, clock: Clock, request: LeaseRequest) {
    let inner = &backend.inner;
    let policy = inner.policy;
    let Some(lease) = fleet(&request.state).map(|fleet| fleet.lease(request.bucket)) else {
        return;
    };
    let (stock_after, answered_at) = lease.history();
    let min_interval =
        ticks(u64::try_from(policy.min_interval_of().as_nanos()).unwrap_or(u64::MAX));
    let tick = ticks(clock.now());
    let round_ends = lease.near_limit_until();
    if request.ahead
        && lease.is_near_limit()
        && request.rate.per_second * policy.near_limit_batch_of().as_secs_f64() < 1.0
    {
        // A tenant too slow for batches (under one unit a batch) near its
        // limit fetches nothing ahead: a unit fetched ahead would wait
        // here while the caller another replica refused retries on a third
        // one, which would then find the bucket empty (whether or not the
        // last answer named a wait: it names none while the bucket holds a
        // unit more). Its next call here asks instead, and waits for the
        // answer.
        return;
    }
    let not_before = if answered_at == 0 {
        0
    } else {
        (answered_at + min_interval).max(round_ends)
    };
    if tick < not_before {
        tokio::time::sleep(Duration::from_nanos(nanos(not_before - tick))).await;
    }
    if !inner.breaker.is_up() {
        // The fallback applies; nothing to ask for.
        return;
    }
    let now = ticks(clock.now());
    let debt = lease.debt();
    let spent = stock_after.saturating_sub(lease.units(now)) + debt;
    let elapsed = Duration::from_nanos(nanos(now.saturating_sub(answered_at)));
    let want = if answered_at == 0 {
        policy.want(debt, Duration::ZERO, request.rate.burst)
    } else {
        policy.want(spent, elapsed, request.rate.burst)
    };
    let ask = LeaseAsk::new(
        request.rate.per_second,
        request.rate.burst,
        want,
        debt,
        inner.replicas(),
        policy.near_limit_batch_of(),
    );
    let key = inner.bucket_key(request.tenant.as_str(), key_suffix(request.bucket));
    // A failed request leaves the debt for the next one to charge.
    if let Ok(answer) = inner.lease(&key, ask).await {
        lease.paid(debt);
        let now_ns = clock.now();
        let now = ticks(now_ns);
        let lifetime = ticks(u64::try_from(policy.lifetime_of().as_nanos()).unwrap_or(u64::MAX));
        // Rounded up to the tick after the bucket holds a unit: a pushback
        // from it is never short.
        let dry_until = if answer.wait_us > 0 {
            ticks(
                now_ns
                    .saturating_add(answer.wait_us.saturating_mul(1000))
                    .saturating_add((1 << 20) - 1),
            )
            .max(now + 1)
        } else {
            0
        };
        lease.record_traffic(
            answer.granted + debt,
            answer.traffic,
            now.max(1),
            answered_at,
        );
        let short = answer.granted < want;
        // Near the limit the next request waits for the round anyway: ask
        // when a quarter of this grant is left, not of the units wanted,
        // so that a replica holds no more than it is about to spend.
        let low_water = if short { answer.granted } else { want } / 4;
        lease.fill(
            answer.granted,
            now.max(1),
            now + lifetime,
            Answered {
                short,
                dry_until,
                low_water: low_water.max(1),
            },
        );
    }
}
