//! The throttle's settings ([`ThrottleConfig`]), the codes it counts as
//! refusals ([`RefusalCodes`]), and the error for settings out of range
//! ([`InvalidThrottleError`]).

use std::fmt;
use std::time::Duration;

use tonic::Code;

/// The lookback and formula of one throttle; grpc-go's defaults
/// (`balancer/rls/internal/adaptive`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ThrottleConfig {
    pub(crate) lookback: Duration,
    pub(crate) bins: u32,
    pub(crate) ratio_for_accepts: f64,
    pub(crate) requests_padding: f64,
}

impl ThrottleConfig {
    /// grpc-go's `defaultDuration`: 30 s of history.
    pub(crate) const LOOKBACK: Duration = Duration::from_secs(30);
    /// grpc-go's `defaultBins`.
    pub(crate) const BINS: u32 = 100;
    /// grpc-go's `defaultRatioForAccepts`, the SRE book's K.
    pub(crate) const RATIO_FOR_ACCEPTS: f64 = 2.0;
    /// grpc-go's `defaultRequestsPadding`.
    pub(crate) const REQUESTS_PADDING: f64 = 8.0;
    /// The most bins a window may have (16 bytes each).
    pub(crate) const MAX_BINS: u32 = 100_000;

    /// Checks each setting.
    pub(crate) fn new(
        lookback: Duration,
        bins: u32,
        ratio_for_accepts: f64,
        requests_padding: f64,
    ) -> Result<Self, InvalidThrottleError> {
        let invalid = |setting| Err(InvalidThrottleError { setting });
        if !(ratio_for_accepts.is_finite() && ratio_for_accepts >= 1.0) {
            return invalid(Setting::RatioForAccepts(ratio_for_accepts));
        }
        if !(requests_padding.is_finite() && requests_padding > 0.0) {
            return invalid(Setting::RequestsPadding(requests_padding));
        }
        if bins == 0 || bins > Self::MAX_BINS {
            return invalid(Setting::Bins(bins));
        }
        if lookback.as_nanos() < u128::from(bins) {
            return invalid(Setting::Lookback(lookback, bins));
        }
        Ok(Self {
            lookback,
            bins,
            ratio_for_accepts,
            requests_padding,
        })
    }

    /// A bin's width in nanoseconds (at least 1).
    pub(crate) fn bin_nanos(&self) -> u64 {
        let nanos = self.lookback.as_nanos() / u128::from(self.bins);
        u64::try_from(nanos).unwrap_or(u64::MAX).max(1)
    }
}

impl Default for ThrottleConfig {
    fn default() -> Self {
        Self {
            lookback: Self::LOOKBACK,
            bins: Self::BINS,
            ratio_for_accepts: Self::RATIO_FOR_ACCEPTS,
            requests_padding: Self::REQUESTS_PADDING,
        }
    }
}

/// The status codes counted as the backend refusing a call: a set of
/// [`Code`]s, `UNAVAILABLE` and `RESOURCE_EXHAUSTED` by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RefusalCodes(u32);

impl RefusalCodes {
    pub(crate) fn new(codes: impl IntoIterator<Item = Code>) -> Self {
        Self(codes.into_iter().fold(0, |set, code| set | bit(code)))
    }

    #[inline]
    pub(crate) fn contains(self, code: Code) -> bool {
        self.0 & bit(code) != 0
    }
}

impl Default for RefusalCodes {
    fn default() -> Self {
        Self::new([Code::Unavailable, Code::ResourceExhausted])
    }
}

/// `code`'s bit: codes are 0 to 16.
#[inline]
fn bit(code: Code) -> u32 {
    1u32.checked_shl(code as u32).unwrap_or(0)
}

/// A throttle setting out of range, from the
/// [`AdaptiveThrottleLayer`](super::AdaptiveThrottleLayer) method that was
/// given it; its text names the setting, the value and the range.
///
/// ```
/// use tonic_hotpath::limits::AdaptiveThrottleLayer;
///
/// let error = AdaptiveThrottleLayer::new().with_ratio_for_accepts(0.5).unwrap_err();
/// assert_eq!(
///     error.to_string(),
///     "adaptive throttle: the ratio for accepts (K) must be a finite number of at least 1, not 0.5"
/// );
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct InvalidThrottleError {
    setting: Setting,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Setting {
    RatioForAccepts(f64),
    RequestsPadding(f64),
    Bins(u32),
    Lookback(Duration, u32),
}

impl fmt::Display for InvalidThrottleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("adaptive throttle: ")?;
        match self.setting {
            Setting::RatioForAccepts(k) => write!(
                f,
                "the ratio for accepts (K) must be a finite number of at least 1, not {k}"
            ),
            Setting::RequestsPadding(padding) => write!(
                f,
                "the requests padding must be a finite number above 0, not {padding}"
            ),
            Setting::Bins(bins) => write!(
                f,
                "the lookback must have 1 to {} bins, not {bins}",
                ThrottleConfig::MAX_BINS
            ),
            Setting::Lookback(lookback, bins) => write!(
                f,
                "the lookback ({lookback:?}) must be at least a nanosecond per bin ({bins} bins)"
            ),
        }
    }
}

impl std::error::Error for InvalidThrottleError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_out_of_range_are_refused() {
        let ok = ThrottleConfig::default();
        let new = |lookback, bins, k, padding| ThrottleConfig::new(lookback, bins, k, padding);
        assert_eq!(
            new(
                ok.lookback,
                ok.bins,
                ok.ratio_for_accepts,
                ok.requests_padding
            ),
            Ok(ok)
        );
        assert!(new(ok.lookback, ok.bins, 1.0, 1.0).is_ok());
        for k in [0.0, 0.999, -2.0, f64::NAN, f64::INFINITY] {
            assert!(new(ok.lookback, 10, k, 8.0).is_err(), "{k}");
        }
        for padding in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(new(ok.lookback, 10, 2.0, padding).is_err(), "{padding}");
        }
        for bins in [0, ThrottleConfig::MAX_BINS + 1] {
            assert!(new(ok.lookback, bins, 2.0, 8.0).is_err(), "{bins}");
        }
        assert!(new(Duration::from_nanos(9), 10, 2.0, 8.0).is_err());
        assert_eq!(
            new(Duration::from_nanos(10), 10, 2.0, 8.0).map(|c| c.bin_nanos()),
            Ok(1)
        );
        assert_eq!(ok.bin_nanos(), 300_000_000);
        assert_eq!(
            new(Duration::MAX, 1, 2.0, 8.0).map(|c| c.bin_nanos()),
            Ok(u64::MAX)
        );
    }

    #[test]
    fn refusal_codes_are_a_set() {
        let default = RefusalCodes::default();
        assert!(default.contains(Code::Unavailable));
        assert!(default.contains(Code::ResourceExhausted));
        assert!(!default.contains(Code::Ok));
        assert!(!default.contains(Code::InvalidArgument));
        let custom = RefusalCodes::new([Code::Aborted, Code::Unauthenticated]);
        assert!(custom.contains(Code::Unauthenticated));
        assert!(custom.contains(Code::Aborted));
        assert!(!custom.contains(Code::Unavailable));
        assert!(!RefusalCodes::new([]).contains(Code::Ok));
    }
}
