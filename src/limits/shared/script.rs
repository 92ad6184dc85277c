//! The server-side scripts: a lease from a tenant's fleet-wide GCRA, and
//! the replicas' heartbeat. Each touches one key, so both run on Redis
//! Cluster; each reads the time from Redis (`TIME`), so the replicas'
//! clocks never meet in one bucket.

use std::time::Duration;

use redis::Script;

/// The time constant with which the fleet's traffic on a bucket, and each
/// replica's part of it, decay: a replica's share is its part of the
/// last few seconds' traffic.
pub(crate) const TRAFFIC_TIME: Duration = Duration::from_secs(5);

/// Takes a lease from one fleet-wide GCRA bucket.
///
/// `KEYS[1]`: the bucket (its theoretical arrival time, whole microseconds
/// of Redis's clock; absent when full). `KEYS[2]`: the fleet's recent
/// traffic on it (`<units>,<µs>`: the units charged, decayed with time
/// constant `ARGV[7]`, and when; absent when idle). `ARGV`: the interval
/// between two units at the fleet's rate (µs, may be fractional), the
/// tolerance (`interval × (burst − 1)`, µs), the units wanted, the units
/// already admitted on credit (charged whatever the bucket holds: they
/// were admitted), the share (how many replicas the units left are split
/// among), the batch (the units one replica's lease should hold near the
/// limit, may be fractional), and the traffic's time constant (µs).
///
/// A lease takes at most `1 / share` of what is left, but at least a
/// batch (or what is left, if less): near the limit, leases do not shrink
/// to single units, each asking for about a batch. When fewer than
/// `share × batch` units (at least one) are left after the lease, the
/// wait is the time until the bucket holds that many again: the time a
/// replica that got less than it wanted lets pass before it asks again
/// (with `share` replicas asking in turn, each then finds about a batch).
///
/// Returns `{granted, wait_us, left, traffic}`: the units leased (0 to
/// `want`), that wait (0 if the bucket holds enough now), the whole units
/// left after this lease, and the fleet's decayed traffic after it (in
/// thousandths of a unit). The keys expire when the bucket would be full
/// again, and when the traffic has decayed away: an idle tenant costs no
/// memory.
const LEASE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local debt = tonumber(ARGV[4])
local share = tonumber(ARGV[5])
local batch = tonumber(ARGV[6])
local tau = tonumber(ARGV[7])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
tat = tat + debt * interval
local limit = now + tolerance + interval
local left = math.floor((limit - tat) / interval)
local granted = 0
if left >= 1 and want >= 1 then
  local portion = math.floor(left / share)
  local least = math.max(1, math.floor(batch))
  if portion < least then portion = math.min(left, least) end
  granted = math.min(want, portion)
end
tat = tat + granted * interval
left = math.max(0, left - granted)
local round = math.max(1, math.floor(batch * share))
local wait = 0
if left < round then wait = math.max(0, math.ceil(tat + (round - 1) * interval - tolerance - now)) end
local ttl = math.ceil((tat - now) / 1000) + 1000
redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', ttl)
local traffic = 0
local seen = redis.call('GET', KEYS[2])
if seen then
  local comma = string.find(seen, ',', 1, true)
  if comma then
    local units = tonumber(string.sub(seen, 1, comma - 1)) or 0
    local at = tonumber(string.sub(seen, comma + 1)) or now
    if at < now then traffic = units * math.exp((at - now) / tau) else traffic = units end
  end
end
traffic = traffic + granted + debt
redis.call('SET', KEYS[2], string.format('%.3f,%.0f', traffic, now), 'PX', math.ceil(tau / 200))
return {granted, wait, left, math.floor(traffic * 1000)}
";

/// Marks this replica alive and counts the replicas alive.
///
/// `KEYS[1]`: a sorted set of replica ids scored by their last heartbeat
/// (milliseconds of Redis's clock). `ARGV`: this replica's id, how long a
/// replica counts as alive after its last heartbeat (ms), and `1` to add
/// this replica or `0` to remove it (a replica leaving). Returns the
/// replicas alive.
const HEARTBEAT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local alive = tonumber(ARGV[2])
if ARGV[3] == '1' then
  redis.call('ZADD', KEYS[1], now, ARGV[1])
else
  redis.call('ZREM', KEYS[1], ARGV[1])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - alive)
redis.call('PEXPIRE', KEYS[1], alive * 2)
return redis.call('ZCARD', KEYS[1])
";

/// The two scripts, hashed once (redis-rs sends `EVALSHA`, and the source
/// only when the server does not have it, e.g. after a restart).
#[derive(Debug)]
pub(crate) struct Scripts {
    pub(crate) lease: Script,
    pub(crate) heartbeat: Script,
}

impl Scripts {
    pub(crate) fn new() -> Self {
        Self {
            lease: Script::new(LEASE),
            heartbeat: Script::new(HEARTBEAT),
        }
    }

    /// The lease script's call on the bucket at `key` (its traffic at
    /// `<key>:traffic`, in the same hash slot).
    pub(crate) fn lease_call(&self, key: &str, ask: LeaseAsk) -> redis::ScriptInvocation<'_> {
        let mut call = self.lease.prepare_invoke();
        call.key(key)
            .key(format!("{key}:traffic"))
            .arg(ask.interval_us)
            .arg(ask.tolerance_us)
            .arg(ask.want)
            .arg(ask.debt)
            .arg(ask.share)
            .arg(ask.batch)
            .arg(TRAFFIC_TIME.as_micros() as u64);
        call
    }
}

/// What one lease request asks for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LeaseAsk {
    /// Microseconds between two units at the fleet's rate.
    pub(crate) interval_us: f64,
    /// How far ahead of now the bucket's time may run (µs).
    pub(crate) tolerance_us: f64,
    /// Units wanted.
    pub(crate) want: u64,
    /// Units admitted on credit, charged whatever the bucket holds.
    pub(crate) debt: u64,
    /// Replicas the units left are shared among.
    pub(crate) share: u32,
    /// The units a lease should hold near the limit (may be fractional).
    pub(crate) batch: f64,
}

impl LeaseAsk {
    /// The request for a bucket of `per_second` units a second with a
    /// burst of `burst`, whose leases near the limit hold `batch` of the
    /// fleet's rate (at most the burst).
    pub(crate) fn new(
        per_second: f64,
        burst: u32,
        want: u64,
        debt: u64,
        share: u32,
        batch: Duration,
    ) -> Self {
        let interval_us = 1e6 / per_second;
        Self {
            interval_us,
            tolerance_us: interval_us * f64::from(burst.max(1) - 1),
            want,
            debt,
            share: share.max(1),
            batch: (per_second * batch.as_secs_f64()).min(f64::from(burst.max(1))),
        }
    }
}

/// What a lease request got.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LeaseAnswer {
    /// Units leased (at most the units wanted).
    pub(crate) granted: u64,
    /// Microseconds until the bucket holds one more unit (0: it does now).
    pub(crate) wait_us: u64,
    /// Whole units left in the bucket after this lease.
    pub(crate) left: u64,
    /// The fleet's traffic on the bucket: units charged by every replica,
    /// decayed with [`TRAFFIC_TIME`].
    pub(crate) traffic: f64,
}

impl LeaseAnswer {
    /// Reads the script's reply: four non-negative integers.
    pub(crate) fn from_reply(reply: &[i64]) -> Option<Self> {
        match *reply {
            [granted, wait_us, left, traffic] => Some(Self {
                granted: u64::try_from(granted).ok()?,
                wait_us: u64::try_from(wait_us).ok()?,
                left: u64::try_from(left).ok()?,
                traffic: u64::try_from(traffic).ok()? as f64 / 1000.0,
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ask_carries_the_fleet_gcra_in_microseconds() {
        let ask = LeaseAsk::new(1000.0, 2000, 50, 3, 0, Duration::from_millis(50));
        assert_eq!(ask.interval_us, 1000.0);
        assert_eq!(ask.tolerance_us, 1000.0 * 1999.0);
        assert_eq!(ask.share, 1, "0 replicas count as 1");
        assert_eq!(ask.batch, 50.0, "50 ms at 1 000/s");
        let ask = LeaseAsk::new(1000.0, 20, 50, 3, 3, Duration::from_millis(50));
        assert_eq!(ask.batch, 20.0, "at most the burst");
    }

    #[test]
    fn only_four_non_negative_integers_are_an_answer() {
        assert_eq!(
            LeaseAnswer::from_reply(&[5, 0, 12, 2500]),
            Some(LeaseAnswer {
                granted: 5,
                wait_us: 0,
                left: 12,
                traffic: 2.5,
            })
        );
        assert_eq!(LeaseAnswer::from_reply(&[5, -1, 12, 0]), None);
        assert_eq!(LeaseAnswer::from_reply(&[5, 0, 12]), None);
    }
}
