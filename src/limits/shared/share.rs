//! [`TrafficShare`]: a replica's share of a tenant's fleet traffic on one
//! bucket, learned from its lease answers, and the fallback bucket it
//! gives while Redis is down.

use std::sync::atomic::{AtomicU64, Ordering};

use super::script::TRAFFIC_TIME;
use super::tick::{nanos, ticks};
use crate::limits::config::Rate;
use crate::limits::gcra::Gcra;

/// The part of its share of the fleet's traffic a replica admits while
/// Redis is down. Shares are read at each replica's last answer, not at
/// one instant: while the split moves, or the fleet's decayed traffic is
/// still growing (seconds after a tenant's first call), those of
/// different answers may sum to a little over 1. 5 % below the share
/// keeps the sum of the replicas' fallback rates under the fleet's.
pub(crate) const FALLBACK_SHARE: f64 = 0.95;

/// This replica's part of the fleet's traffic on a bucket (the units it
/// charged, decayed as Redis decays the fleet's: an `f32`, low 32 bits)
/// and that part's share of the fleet's (in 2^-32ths, high 32 bits; 0
/// before the first answer). One word, written by the lease's requests
/// only (one at a time), read by calls only while Redis is down.
#[derive(Debug, Default)]
pub(crate) struct TrafficShare(AtomicU64);

impl TrafficShare {
    /// An answer at tick `now`, the previous one at tick `before` (0:
    /// none): this replica charged `charged` units, and the fleet's
    /// traffic is now `fleet` (units, decayed, these included). Updates
    /// this replica's part (decayed alike) and its share.
    ///
    /// The share is of the traffic before this answer: a lease is charged
    /// whole when it is granted, and a replica that counted its own fresh
    /// lease (up to half a second of its calls, a sixth of the fleet's
    /// decayed traffic for the busiest replica under 80/15/5) beside the
    /// others' older ones would overstate its share. Left out, its own
    /// lease counts from its next answer on, and the shares of the fleet
    /// sum to at most about 1.
    pub(crate) fn record(&self, charged: u64, fleet: f64, now: u64, before: u64) {
        let word = self.0.load(Ordering::Acquire);
        let mine = f64::from(f32::from_bits(word as u32));
        let elapsed = nanos(now.saturating_sub(before)) as f64 / 1e9;
        let decayed = if before == 0 {
            0.0
        } else {
            mine * (-elapsed / TRAFFIC_TIME.as_secs_f64()).exp()
        };
        let others_and_mine = fleet - charged as f64;
        let share = if others_and_mine > 0.0 {
            (decayed / others_and_mine).clamp(0.0, 1.0)
        } else {
            0.0
        };
        let mine = decayed + charged as f64;
        let share_bits = (share * f64::from(u32::MAX)) as u64;
        self.0.store(
            (share_bits << 32) | u64::from((mine as f32).to_bits()),
            Ordering::Release,
        );
    }

    /// The share at the last answer (at tick `answered_at`, 0: none), if
    /// that answer is at most two traffic time constants old at tick
    /// `now` and this replica charged any of the traffic.
    pub(crate) fn at(&self, answered_at: u64, now: u64) -> Option<f64> {
        let recent = ticks(u64::try_from((TRAFFIC_TIME * 2).as_nanos()).unwrap_or(u64::MAX));
        if answered_at == 0 || now > answered_at.saturating_add(recent) {
            return None;
        }
        let share = (self.0.load(Ordering::Acquire) >> 32) as f64 / f64::from(u32::MAX);
        (share > 0.0).then_some(share)
    }

    /// The fallback bucket while Redis is down, at tick `now`: `rate` times
    /// this replica's recent share (less a margin, [`FALLBACK_SHARE`]),
    /// with a burst cut alike (at least 1); `None` without a recent share
    /// (the caller keeps `rate ÷ replicas`).
    pub(crate) fn fallback(&self, rate: Rate, answered_at: u64, now: u64) -> Option<(Rate, Gcra)> {
        let share = (self.at(answered_at, now)? * FALLBACK_SHARE).clamp(0.0, 1.0);
        let local = Rate {
            per_second: (rate.per_second * share).max(f64::MIN_POSITIVE),
            burst: ((f64::from(rate.burst) * share) as u32).max(1),
        };
        Some((local, Gcra::of(local, 1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_is_this_replicas_decayed_part_of_the_fleets_traffic_before_its_lease() {
        let traffic = TrafficShare::default();
        assert_eq!(traffic.at(0, 0), None, "no answer yet");
        traffic.record(40, 100.0, 100, 0);
        assert_eq!(
            traffic.at(100, 100),
            None,
            "its first lease counts from the next answer on"
        );
        // One time constant later: this replica's 40 decayed by 1/e; the
        // fleet's traffic (decayed alike by Redis) is 50 with this
        // answer's 10, 40 without.
        let later = 100 + ticks(TRAFFIC_TIME.as_nanos() as u64);
        traffic.record(10, 50.0, later, 100);
        let expected = 40.0 * (-1.0f64).exp() / 40.0;
        let share = traffic.at(later, later).expect("a share");
        assert!((share - expected).abs() < 1e-3, "{share} vs {expected}");
        // The next answer at once: (14.7 + 10) of 60 − 5.
        traffic.record(5, 60.0, later, later);
        let expected = (40.0 * (-1.0f64).exp() + 10.0) / 55.0;
        let share = traffic.at(later, later).expect("a share");
        assert!((share - expected).abs() < 1e-3, "{share} vs {expected}");
        // Two time constants after the last answer, no share.
        let stale = later + 2 * ticks(TRAFFIC_TIME.as_nanos() as u64) + 1;
        assert_eq!(traffic.at(later, stale), None);
        // While Redis is down: 95 % of the share, of the rate and of the
        // burst (at least one call).
        let rate = Rate::new(1000.0, 400).unwrap();
        let share = share * FALLBACK_SHARE;
        let local = Rate {
            per_second: 1000.0 * share,
            burst: (400.0 * share) as u32,
        };
        assert_eq!(
            traffic.fallback(rate, later, later),
            Some((local, Gcra::of(local, 1)))
        );
        assert_eq!(
            traffic.fallback(rate, later, stale),
            None,
            "rate ÷ replicas then"
        );
        // A replica that charged nothing has no share.
        let idle = TrafficShare::default();
        idle.record(0, 80.0, 5, 0);
        idle.record(0, 90.0, 6, 5);
        assert_eq!(idle.at(6, 6), None);
    }
}
