//! What one tenant may do: [`Limits`] (an in-flight limit, a call
//! [`Rate`] and a work-unit `Rate`).

use std::fmt;

/// A rate limit: calls (or, as a [work rate](Limits::with_work_rate),
/// work units) per second, with a burst.
///
/// A tenant idle long enough may make `burst` calls at once, then one per
/// `1 / per_second` seconds (GCRA, the generic cell rate algorithm: a
/// token bucket of `burst` tokens refilled at `per_second`, kept as one
/// timestamp per tenant).
///
/// ```
/// use tonic_hotpath::limits::Rate;
///
/// let rate = Rate::new(100.0, 200)?;
/// assert_eq!((rate.per_second, rate.burst), (100.0, 200));
/// assert!(Rate::new(0.0, 10).is_err());
/// assert!(Rate::new(1.0, 0).is_err());
/// # Ok::<(), tonic_hotpath::limits::InvalidRateError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Rate {
    /// Calls per second at the steady rate (finite, above 0; may be
    /// fractional: `0.5` is one call every 2 s).
    pub per_second: f64,
    /// Calls allowed at once after an idle period (at least 1).
    pub burst: u32,
}

impl Rate {
    /// `per_second` calls per second with a burst of `burst`.
    ///
    /// # Errors
    ///
    /// [`InvalidRateError`] unless `per_second` is finite and above 0 and
    /// `burst` is at least 1. (To refuse a tenant every call, give it
    /// [`Limits::with_max_in_flight(0)`](Limits::with_max_in_flight).)
    pub fn new(per_second: f64, burst: u32) -> Result<Self, InvalidRateError> {
        if per_second.is_finite() && per_second > 0.0 && burst >= 1 {
            Ok(Self { per_second, burst })
        } else {
            Err(InvalidRateError { per_second, burst })
        }
    }
}

impl fmt::Display for Rate {
    /// `10 per second, burst 20`; fractional rates with up to 3 decimals.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} per second, burst {}",
            Decimal(self.per_second),
            self.burst
        )
    }
}

/// A rate written with up to 3 decimals, without trailing zeros: `10`,
/// `0.5`, `33.333`; rates below 0.001 in full (`0.0001`).
struct Decimal(f64);

impl fmt::Display for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 < 0.001 {
            return write!(f, "{}", self.0);
        }
        let text = format!("{:.3}", self.0);
        f.write_str(text.trim_end_matches('0').trim_end_matches('.'))
    }
}

/// A rate that [`Rate::new`] refused: not a finite number above 0 per
/// second, or a burst of 0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InvalidRateError {
    per_second: f64,
    burst: u32,
}

impl fmt::Display for InvalidRateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a rate needs a finite number of calls per second above 0 and a burst of at \
             least 1 (got {} per second, burst {})",
            self.per_second, self.burst
        )
    }
}

impl std::error::Error for InvalidRateError {}

/// What one tenant may do: at most `max_in_flight` calls at once, calls
/// at most at `rate`, and work units at most at `work_rate`. `None` is no
/// limit of that kind; the default is no limit at all.
///
/// The work rate limits what the calls carry rather than the calls (as
/// Cortex's ingestion rate limits samples, not push requests): the
/// service charges each call for its work once it has decoded it, with
/// [`TenantBudget::charge`](super::TenantBudget::charge).
///
/// ```
/// use tonic_hotpath::limits::{Limits, Rate};
///
/// let limits = Limits::unlimited()
///     .with_max_in_flight(8)
///     .with_rate(Rate::new(100.0, 200)?)
///     .with_work_rate(Rate::new(10_000.0, 50_000)?); // e.g. samples
/// assert_eq!(limits.max_in_flight, Some(8));
/// assert_eq!(limits.rate.map(|rate| rate.burst), Some(200));
/// assert_eq!(limits.work_rate.map(|rate| rate.burst), Some(50_000));
/// assert!(Limits::default().is_unlimited());
/// # Ok::<(), tonic_hotpath::limits::InvalidRateError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[non_exhaustive]
pub struct Limits {
    /// Calls in flight at once (admitted and not yet ended). `Some(0)`
    /// refuses every call: a blocked tenant.
    pub max_in_flight: Option<u32>,
    /// The rate limit on calls.
    pub rate: Option<Rate>,
    /// The rate limit on work units (samples, rows, bytes: whatever the
    /// service charges), per second with a burst.
    pub work_rate: Option<Rate>,
}

impl Limits {
    /// No limit: the tenant's calls are not counted at all.
    pub const fn unlimited() -> Self {
        Self {
            max_in_flight: None,
            rate: None,
            work_rate: None,
        }
    }

    /// These limits with at most `max` calls in flight.
    #[must_use]
    pub const fn with_max_in_flight(mut self, max: u32) -> Self {
        self.max_in_flight = Some(max);
        self
    }

    /// These limits without an in-flight limit.
    #[must_use]
    pub const fn without_max_in_flight(mut self) -> Self {
        self.max_in_flight = None;
        self
    }

    /// These limits with the rate limit `rate`.
    #[must_use]
    pub const fn with_rate(mut self, rate: Rate) -> Self {
        self.rate = Some(rate);
        self
    }

    /// These limits without a rate limit.
    #[must_use]
    pub const fn without_rate(mut self) -> Self {
        self.rate = None;
        self
    }

    /// These limits with the work-unit rate limit `rate`: the units the
    /// service charges per second ([`TenantBudget::charge`](super::TenantBudget::charge)),
    /// with a burst that is also the largest charge ever admitted.
    #[must_use]
    pub const fn with_work_rate(mut self, rate: Rate) -> Self {
        self.work_rate = Some(rate);
        self
    }

    /// These limits without a work-unit rate limit (every charge
    /// succeeds).
    #[must_use]
    pub const fn without_work_rate(mut self) -> Self {
        self.work_rate = None;
        self
    }

    /// Whether no limit is set (such a tenant costs no state).
    pub const fn is_unlimited(&self) -> bool {
        self.max_in_flight.is_none() && self.rate.is_none() && self.work_rate.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_print_with_up_to_three_decimals() {
        let shown = |per_second| Rate::new(per_second, 3).unwrap().to_string();
        assert_eq!(shown(10.0), "10 per second, burst 3");
        assert_eq!(shown(0.5), "0.5 per second, burst 3");
        assert_eq!(shown(100.0 / 3.0), "33.333 per second, burst 3");
        assert_eq!(shown(1e-4), "0.0001 per second, burst 3");
        assert_eq!(shown(2.0004), "2 per second, burst 3");
    }

    #[test]
    fn invalid_rates_are_refused_with_what_was_given() {
        for (per_second, burst) in [
            (0.0, 1),
            (-1.0, 1),
            (f64::NAN, 1),
            (f64::INFINITY, 1),
            (1.0, 0),
        ] {
            let error = Rate::new(per_second, burst).unwrap_err();
            assert!(error.to_string().contains("burst"), "{error}");
        }
    }

    #[test]
    fn builder_methods_set_and_clear_each_limit() {
        let rate = Rate::new(1.0, 1).unwrap();
        let limits = Limits::unlimited().with_max_in_flight(0).with_rate(rate);
        assert_eq!(limits.max_in_flight, Some(0));
        assert!(!limits.is_unlimited());
        assert!(limits.without_max_in_flight().without_rate().is_unlimited());
        let work = Limits::unlimited().with_work_rate(rate);
        assert!(!work.is_unlimited());
        assert!(work.without_work_rate().is_unlimited());
    }
}
