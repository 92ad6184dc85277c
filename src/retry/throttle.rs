//! [`RetryThrottling`]: gRFC A6's `retryThrottling`, the token bucket a
//! channel's calls share, so that retries stop while most calls fail.

use std::sync::atomic::{AtomicU32, Ordering};

use super::error::{RetryConfigError, RetryConfigErrorKind};

/// A channel's retry budget (gRFC A6 `retryThrottling`): the bucket holds
/// `max_tokens` at first; each failed attempt whose code is retryable
/// takes one token, each call that ends `OK` gives back `token_ratio`;
/// while the tokens are at or below half of `max_tokens`, no call is
/// retried. The arithmetic is grpc-go's (`retryThrottler`), in thousandths
/// of a token (A6 allows three decimals).
///
/// ```
/// use tonic_hotpath::retry::RetryThrottling;
///
/// let throttling = RetryThrottling::new(10.0, 0.5).unwrap();
/// assert_eq!(throttling.max_tokens(), 10.0);
/// // grpc-go's bounds: maxTokens in (0, 1000], tokenRatio above 0.
/// assert!(RetryThrottling::new(1001.0, 0.5).is_err());
/// assert!(RetryThrottling::new(10.0, 0.0).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryThrottling {
    max_milli: u32,
    ratio_milli: u32,
}

impl RetryThrottling {
    /// A budget of `max_tokens` (in (0, 1000]) refilled by `token_ratio`
    /// (above 0; three decimals kept) per successful call.
    pub fn new(max_tokens: f64, token_ratio: f64) -> Result<Self, RetryConfigError> {
        if max_tokens.is_nan() || max_tokens <= 0.0 || max_tokens > 1000.0 {
            return Err(RetryConfigError::new(
                RetryConfigErrorKind::Throttling,
                format!("maxTokens ({max_tokens}) out of range (0, 1000]"),
            ));
        }
        if token_ratio.is_nan() || token_ratio <= 0.0 {
            return Err(RetryConfigError::new(
                RetryConfigErrorKind::Throttling,
                format!("tokenRatio ({token_ratio}) must be greater than zero"),
            ));
        }
        // Both in range for u32 thousandths (a ratio above the maximum
        // refills the bucket in one call, as it would in grpc-go).
        let max_milli = (max_tokens * 1000.0).round() as u32;
        let ratio_milli = (token_ratio.min(1000.0) * 1000.0).round().max(1.0) as u32;
        Ok(Self {
            max_milli: max_milli.max(1),
            ratio_milli,
        })
    }

    /// The tokens the bucket holds when full.
    pub fn max_tokens(&self) -> f64 {
        f64::from(self.max_milli) / 1000.0
    }

    /// The tokens a successful call gives back.
    pub fn token_ratio(&self) -> f64 {
        f64::from(self.ratio_milli) / 1000.0
    }
}

/// The bucket itself, shared by a channel's calls (every clone of one
/// [`RetryLayer`](super::RetryLayer)).
#[derive(Debug)]
pub(crate) struct Throttle {
    settings: RetryThrottling,
    /// Thousandths of a token.
    tokens: AtomicU32,
}

impl Throttle {
    pub(crate) fn new(settings: RetryThrottling) -> Self {
        Self {
            settings,
            tokens: AtomicU32::new(settings.max_milli),
        }
    }

    /// A failed attempt with a retryable code (or a refused pushback):
    /// takes a token, and says whether retries are throttled now (the
    /// tokens at or below half the maximum), as grpc-go's `throttle`.
    pub(crate) fn failed(&self) -> bool {
        let after = match self
            .tokens
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |tokens| {
                Some(tokens.saturating_sub(1000))
            }) {
            Ok(before) | Err(before) => before.saturating_sub(1000),
        };
        // tokens ≤ max / 2, without rounding the half.
        u64::from(after) * 2 <= u64::from(self.settings.max_milli)
    }

    /// A call that ended `OK`: gives back `token_ratio`, up to the
    /// maximum. A full bucket (the steady state of a healthy channel) is
    /// only read, not written.
    pub(crate) fn succeeded(&self) {
        let max = self.settings.max_milli;
        if self.tokens.load(Ordering::Relaxed) >= max {
            return;
        }
        let ratio = self.settings.ratio_milli;
        let _ = self
            .tokens
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |tokens| {
                (tokens < max).then(|| tokens.saturating_add(ratio).min(max))
            });
    }

    /// The tokens now, in tokens.
    pub(crate) fn tokens(&self) -> f64 {
        f64::from(self.tokens.load(Ordering::Relaxed)) / 1000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// grpc-go's `TestRetryThrottling` token arithmetic (maxTokens 10,
    /// tokenRatio 0.5): the token counts its comments give.
    #[test]
    fn the_bucket_follows_grpc_go_token_for_token() {
        let throttle = Throttle::new(RetryThrottling::new(10.0, 0.5).unwrap());
        throttle.succeeded();
        assert_eq!(throttle.tokens(), 10.0);
        // Two failures, retried; then a success: 8.5.
        assert!(!throttle.failed());
        assert!(!throttle.failed());
        throttle.succeeded();
        assert_eq!(throttle.tokens(), 8.5);
        assert!(!throttle.failed());
        assert!(!throttle.failed());
        throttle.succeeded();
        assert_eq!(throttle.tokens(), 7.0);
        // A failure to 6 is still retried, the next to 5 is throttled.
        assert!(!throttle.failed());
        assert!(throttle.failed());
        assert_eq!(throttle.tokens(), 5.0);
        assert!(throttle.failed());
        assert_eq!(throttle.tokens(), 4.0);
        for _ in 0..20 {
            throttle.succeeded();
        }
        assert_eq!(throttle.tokens(), 10.0);
        for _ in 0..30 {
            throttle.failed();
        }
        assert_eq!(throttle.tokens(), 0.0, "never below zero");
    }

    #[test]
    fn ratios_keep_three_decimals_and_odd_maxima_halve_exactly() {
        let settings = RetryThrottling::new(3.0, 0.0015).unwrap();
        assert_eq!(settings.token_ratio(), 0.002);
        let throttle = Throttle::new(settings);
        // 3 → 2 (above 1.5) → 1 (at or below 1.5).
        assert!(!throttle.failed());
        assert!(throttle.failed());
        assert!(RetryThrottling::new(f64::NAN, 1.0).is_err());
        assert!(RetryThrottling::new(0.0, 1.0).is_err());
        assert!(RetryThrottling::new(1.0, f64::NAN).is_err());
        assert!(RetryThrottling::new(1000.0, 1e9).is_ok());
    }
}
