//! Time in the leases: *ticks* of 2^20 ns (about 1.05 ms), read off the
//! limiter's clock with a shift.

/// Nanoseconds to ticks.
pub(crate) const fn ticks(nanos: u64) -> u64 {
    nanos >> 20
}

/// Ticks to nanoseconds (saturating).
pub(crate) const fn nanos(ticks: u64) -> u64 {
    ticks.saturating_mul(1 << 20)
}
