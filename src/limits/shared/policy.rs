//! [`LeasePolicy`]: how a replica sizes its leases on the fleet's buckets.

use std::time::Duration;

use super::lease::MAX_LEASE;

/// How a replica sizes its leases on a tenant's fleet-wide bucket, and
/// how long they last ([`RedisBackendBuilder::lease_policy`](super::RedisBackendBuilder::lease_policy)).
///
/// A lease covers the tenant's calls on this replica for about
/// [`horizon`](Self::horizon) at the rate they came at lately (at least
/// [`min_lease`](Self::min_lease) units, at most the burst); the next
/// request starts when a quarter of it is left, so a steady tenant makes
/// one request per about ¾ horizon per replica, whatever its rate. Redis
/// gives at most `1 / replicas` of what its bucket holds to one lease,
/// but at least a [`near_limit_batch`](Self::near_limit_batch) of the
/// fleet's rate (or what is left, if less). A replica whose lease got
/// less than it asked for learns when the fleet's bucket will hold a
/// batch for each replica again, asks Redis nothing for that tenant
/// before then, and refuses its calls locally meanwhile, with that time
/// as their pushback: near and over the limit, each request leases about
/// a batch, so Redis sees about one request per batch of admitted calls
/// (at most 20 a second per tenant, with the default 50 ms), however
/// hard the tenant floods. Units not spent within
/// [`lifetime`](Self::lifetime) of their lease expire (they were taken
/// from the fleet's bucket: spending them much later would admit above
/// the rate).
///
/// Before its first lease, and when its lease runs dry while the fleet's
/// bucket was not nearly empty, a replica admits on credit, by the local
/// fallback bucket, up to [`credit`](Self::credit) of the burst; the next
/// request charges that debt to the fleet's bucket whatever it holds.
///
/// A call the replica cannot judge without Redis (its credit is used up,
/// or the local bucket would refuse it, or the fleet's bucket was nearly
/// empty at an answer whose wait is over) waits for the lease's answer,
/// at most [`answer_wait`](Self::answer_wait), and is judged by it:
/// admitted from the lease, or refused with the fleet's pushback. So a
/// replica that has not seen the tenant before refuses with the fleet's
/// wait too, never a guess of its own. Only past that wait (Redis slower
/// than `answer_wait`) is a call refused with a pushback of
/// `min_interval`.
///
/// ```
/// use std::time::Duration;
/// use tonic_hotpath::limits::LeasePolicy;
///
/// let policy = LeasePolicy::default()
///     .horizon(Duration::from_millis(250))
///     .min_lease(16);
/// assert_eq!(policy.lifetime_of(), Duration::from_secs(2));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LeasePolicy {
    horizon: Duration,
    lifetime: Duration,
    min_lease: u64,
    min_interval: Duration,
    credit: f64,
    answer_wait: Duration,
    near_limit_batch: Duration,
}

impl Default for LeasePolicy {
    fn default() -> Self {
        Self {
            horizon: Duration::from_millis(500),
            lifetime: Duration::from_secs(2),
            min_lease: 4,
            min_interval: Duration::from_millis(10),
            credit: 0.05,
            answer_wait: Duration::from_millis(20),
            near_limit_batch: Duration::from_millis(50),
        }
    }
}

impl LeasePolicy {
    /// How much of a tenant's recent rate on this replica one lease covers
    /// (default 500 ms): longer makes fewer requests and strands more
    /// units in leases when the load moves.
    pub fn horizon(mut self, horizon: Duration) -> Self {
        self.horizon = horizon.max(Duration::from_millis(1));
        self
    }

    /// How long leased units may be spent (default 2 s).
    pub fn lifetime(mut self, lifetime: Duration) -> Self {
        self.lifetime = lifetime.max(Duration::from_millis(2));
        self
    }

    /// The least units a lease asks for (default 4).
    pub fn min_lease(mut self, units: u64) -> Self {
        self.min_lease = units.clamp(1, MAX_LEASE);
        self
    }

    /// The least time between two requests for one tenant's lease on this
    /// replica (default 10 ms): near the limit, a replica asks Redis at
    /// most this often per tenant.
    pub fn min_interval(mut self, interval: Duration) -> Self {
        self.min_interval = interval;
        self
    }

    /// The fraction of the burst a replica may admit on credit while it
    /// waits for a lease (default 0.05; at least one call or charge).
    /// Over-admission while Redis is up is at most `replicas × credit ×
    /// burst`, for one round trip, and is charged back to the fleet's
    /// bucket.
    pub fn credit(mut self, fraction: f64) -> Self {
        self.credit = if fraction.is_finite() {
            fraction.clamp(0.0, 1.0)
        } else {
            0.0
        };
        self
    }

    /// The longest a call waits for its lease's answer when the replica
    /// cannot judge it alone (default 20 ms; see above). It bounds the
    /// wait a slow or paused Redis adds to such a call, whatever the
    /// backend's timeout.
    pub fn answer_wait(mut self, wait: Duration) -> Self {
        self.answer_wait = wait;
        self
    }

    /// How much of the fleet's rate one lease holds near the limit
    /// (default 50 ms: 50 units for a tenant at 1 000/s; at most the
    /// burst, at least one unit). Larger makes fewer requests over the
    /// limit, and longer pushbacks there (up to `replicas ×` this); the
    /// units a fleet leaves in its bucket when a flood stops are at most
    /// `replicas ×` this of its rate (they stay in the bucket, not lost).
    pub fn near_limit_batch(mut self, batch: Duration) -> Self {
        self.near_limit_batch = batch;
        self
    }

    /// The lifetime of a lease.
    pub fn lifetime_of(&self) -> Duration {
        self.lifetime
    }

    pub(crate) fn min_interval_of(&self) -> Duration {
        self.min_interval
    }

    pub(crate) fn answer_wait_of(&self) -> Duration {
        self.answer_wait
    }

    pub(crate) fn near_limit_batch_of(&self) -> Duration {
        self.near_limit_batch
    }

    /// The most units admitted on credit for a bucket of `burst`.
    pub(crate) fn max_debt(&self, burst: u32) -> u64 {
        ((f64::from(burst) * self.credit) as u64).max(1)
    }

    /// The units to ask for, having spent `spent` units over `elapsed`
    /// (clamped below to a quarter horizon, so one quick request does not
    /// look like a flood), for a bucket of `burst`.
    pub(crate) fn want(&self, spent: u64, elapsed: Duration, burst: u32) -> u64 {
        let over = elapsed.max(self.horizon / 4).as_secs_f64();
        let per_second = spent as f64 / over;
        let want = (per_second * self.horizon.as_secs_f64()).ceil() as u64;
        let most = u64::from(burst).clamp(1, MAX_LEASE);
        want.max(self.min_lease).min(most)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_covers_the_horizon_at_the_recent_rate_within_bounds() {
        let policy = LeasePolicy::default();
        let second = Duration::from_secs(1);
        assert_eq!(policy.want(800, second, 2000), 400, "800/s × 500 ms");
        assert_eq!(policy.want(0, second, 2000), 4, "at least min_lease");
        assert_eq!(
            policy.want(1_000_000, second, 2000),
            2000,
            "at most the burst"
        );
        // 2 units in 1 ms count over 125 ms, not as 2000/s.
        assert_eq!(policy.want(2, Duration::from_millis(1), 2000), 8);
        assert_eq!(policy.max_debt(2000), 100);
        assert_eq!(policy.max_debt(3), 1);
    }
}
