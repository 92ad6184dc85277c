//! The server-side scripts: a lease from a tenant's fleet-wide GCRA, and
//! the replicas' heartbeat. Each touches one key, so both run on Redis
//! Cluster; each reads the time from Redis (`TIME`), so the replicas'
//! clocks never meet in one bucket.

use redis::Script;

/// Takes a lease from one fleet-wide GCRA bucket.
///
/// `KEYS[1]`: the bucket (its theoretical arrival time, whole microseconds
/// of Redis's clock; absent when full). `ARGV`: the interval between two
/// units at the fleet's rate (µs, may be fractional), the tolerance
/// (`interval × (burst − 1)`, µs), the units wanted, the units already
/// admitted on credit (charged whatever the bucket holds: they were
/// admitted), and the share: how many replicas the units left are split
/// among (a lease takes at most `1 / share` of what is left, at least one
/// unit, so that near the limit leases shrink to single units).
///
/// Returns `{granted, wait_us, left}`: the units leased (0 to `want`), the
/// time until the bucket holds one more unit (0 if it holds one now), and
/// the whole units left after this lease. The key expires when the bucket
/// would be full again: an idle tenant costs no memory.
const LEASE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local debt = tonumber(ARGV[4])
local share = tonumber(ARGV[5])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
tat = tat + debt * interval
local limit = now + tolerance + interval
local left = math.floor((limit - tat) / interval)
local granted = 0
if left >= 1 and want >= 1 then
  granted = math.min(want, math.max(1, math.floor(left / share)))
end
tat = tat + granted * interval
left = math.max(0, left - granted)
local wait = 0
if left < 1 then wait = math.max(0, math.ceil(tat - tolerance - now)) end
local ttl = math.ceil((tat - now) / 1000) + 1000
redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', ttl)
return {granted, wait, left}
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
}

impl LeaseAsk {
    /// The request for a bucket of `per_second` units a second with a
    /// burst of `burst`.
    pub(crate) fn new(per_second: f64, burst: u32, want: u64, debt: u64, share: u32) -> Self {
        let interval_us = 1e6 / per_second;
        Self {
            interval_us,
            tolerance_us: interval_us * f64::from(burst.max(1) - 1),
            want,
            debt,
            share: share.max(1),
        }
    }
}

/// What a lease request got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LeaseAnswer {
    /// Units leased (at most the units wanted).
    pub(crate) granted: u64,
    /// Microseconds until the bucket holds one more unit (0: it does now).
    pub(crate) wait_us: u64,
    /// Whole units left in the bucket after this lease.
    pub(crate) left: u64,
}

impl LeaseAnswer {
    /// Reads the script's reply: three non-negative integers.
    pub(crate) fn from_reply(reply: &[i64]) -> Option<Self> {
        match *reply {
            [granted, wait_us, left] => Some(Self {
                granted: u64::try_from(granted).ok()?,
                wait_us: u64::try_from(wait_us).ok()?,
                left: u64::try_from(left).ok()?,
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
        let ask = LeaseAsk::new(1000.0, 2000, 50, 3, 0);
        assert_eq!(ask.interval_us, 1000.0);
        assert_eq!(ask.tolerance_us, 1000.0 * 1999.0);
        assert_eq!(ask.share, 1, "0 replicas count as 1");
    }

    #[test]
    fn only_three_non_negative_integers_are_an_answer() {
        assert_eq!(
            LeaseAnswer::from_reply(&[5, 0, 12]),
            Some(LeaseAnswer {
                granted: 5,
                wait_us: 0,
                left: 12
            })
        );
        assert_eq!(LeaseAnswer::from_reply(&[5, -1, 12]), None);
        assert_eq!(LeaseAnswer::from_reply(&[5, 0]), None);
    }
}
