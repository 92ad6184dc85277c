//! Channelz timestamps: the stats layer's `Instant`s as wall-clock times.
//!
//! The layer reads a monotonic clock; channelz reports Unix times. One pair
//! of readings (taken once per process) maps the first onto the second, so
//! recording a timestamp costs a subtraction, not a system clock read.

use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

struct Anchor {
    instant: Instant,
    unix_nanos: i64,
}

fn anchor() -> &'static Anchor {
    static ANCHOR: OnceLock<Anchor> = OnceLock::new();
    ANCHOR.get_or_init(|| Anchor {
        instant: Instant::now(),
        unix_nanos: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, nanos),
    })
}

fn nanos(duration: Duration) -> i64 {
    i64::try_from(duration.as_nanos()).unwrap_or(i64::MAX)
}

/// `instant` in nanoseconds since the Unix epoch; never 0, which the
/// counters use for "never".
pub(crate) fn unix_nanos(instant: Instant) -> i64 {
    let anchor = anchor();
    let unix = match instant.checked_duration_since(anchor.instant) {
        Some(after) => anchor.unix_nanos.saturating_add(nanos(after)),
        None => anchor
            .unix_nanos
            .saturating_sub(nanos(anchor.instant - instant)),
    };
    unix.max(1)
}

/// Now, as [`unix_nanos`].
pub(crate) fn now() -> i64 {
    unix_nanos(Instant::now())
}

/// The protobuf timestamp of `unix_nanos`. 0 ("never") is the Unix
/// epoch, as grpc-go reports an event that never happened: the field is
/// always set.
pub(crate) fn timestamp(unix_nanos: i64) -> Option<prost_types::Timestamp> {
    Some(prost_types::Timestamp {
        seconds: unix_nanos.div_euclid(1_000_000_000),
        // In 0..1e9: fits.
        nanos: unix_nanos.rem_euclid(1_000_000_000) as i32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_map_onto_the_system_clock() {
        let before = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let mapped = unix_nanos(Instant::now());
        let after = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        // The anchor may have been taken a moment before `before`.
        assert!(mapped <= nanos(after) + 1_000_000);
        assert!(mapped >= nanos(before) - 1_000_000_000);
    }

    #[test]
    fn an_instant_before_the_anchor_is_earlier() {
        let early = Instant::now();
        let _ = now();
        assert!(unix_nanos(early) <= now());
    }

    #[test]
    fn never_is_the_epoch_and_negative_times_are_normalised() {
        let epoch = timestamp(0).unwrap();
        assert_eq!((epoch.seconds, epoch.nanos), (0, 0));
        let stamp = timestamp(-1).unwrap();
        assert_eq!((stamp.seconds, stamp.nanos), (-1, 999_999_999));
        let stamp = timestamp(1_500_000_000).unwrap();
        assert_eq!((stamp.seconds, stamp.nanos), (1, 500_000_000));
    }
}
