//! [`RetryPolicy`]: a method's `retryPolicy` (gRFC A6), validated as
//! grpc-go validates it, and the backoff it gives.

use std::fmt;
use std::time::Duration;

use tonic::Code;

use super::error::{RetryConfigError, RetryConfigErrorKind};

/// A set of gRPC status codes (the 17 codes, one bit each).
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Codes(u32);

impl Codes {
    pub(crate) fn insert(&mut self, code: Code) {
        self.0 |= 1 << (code as i32 as u32);
    }

    pub(crate) fn contains(self, code: Code) -> bool {
        self.0 & (1 << (code as i32 as u32)) != 0
    }

    pub(crate) fn is_empty(self) -> bool {
        self.0 == 0
    }

    fn iter(self) -> impl Iterator<Item = Code> {
        (0..17)
            .filter(move |bit| self.0 & (1 << bit) != 0)
            .map(Code::from_i32)
    }
}

impl fmt::Debug for Codes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

/// When and how often a failed call is tried again: gRFC A6's
/// `retryPolicy`, as grpc-go reads and applies it.
///
/// An attempt that fails with one of the retryable codes, before the
/// server sent response headers, is tried again after a backoff, up to
/// `max_attempts` attempts in all (capped at
/// [`RetryConfig::max_call_attempts`](super::RetryConfig::max_call_attempts),
/// 5 by default, as grpc-go's `WithMaxCallAttempts`). The backoff before
/// retry *n* (from 0, counted since the server's last pushback) is
/// `min(initial_backoff × multiplier^n, max_backoff)` times a random
/// factor in [0.8, 1.2), grpc-go's jitter.
///
/// ```
/// use std::time::Duration;
/// use tonic::Code;
/// use tonic_hotpath::retry::RetryPolicy;
///
/// let policy = RetryPolicy::builder()
///     .max_attempts(4)
///     .initial_backoff(Duration::from_millis(100))
///     .max_backoff(Duration::from_secs(1))
///     .backoff_multiplier(2.0)
///     .retryable_code(Code::Unavailable)
///     .build()
///     .unwrap();
/// assert!(policy.is_retryable(Code::Unavailable));
/// assert!(!policy.is_retryable(Code::Internal));
///
/// // Without a retryable code, grpc-go refuses the policy.
/// assert!(RetryPolicy::builder().max_attempts(3).build().is_err());
/// ```
#[derive(Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    max_attempts: u32,
    initial_backoff: Duration,
    max_backoff: Duration,
    backoff_multiplier: f64,
    retryable: Codes,
}

impl fmt::Debug for RetryPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryPolicy")
            .field("max_attempts", &self.max_attempts)
            .field("initial_backoff", &self.initial_backoff)
            .field("max_backoff", &self.max_backoff)
            .field("backoff_multiplier", &self.backoff_multiplier)
            .field("retryable_status_codes", &self.retryable)
            .finish()
    }
}

impl RetryPolicy {
    /// A builder with no field set: every field must be set before
    /// [`build`](RetryPolicyBuilder::build), as in the service config.
    pub fn builder() -> RetryPolicyBuilder {
        RetryPolicyBuilder::default()
    }

    /// The attempts a call may make, the first included (before the cap).
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The backoff before the first retry, before jitter.
    pub fn initial_backoff(&self) -> Duration {
        self.initial_backoff
    }

    /// The most any backoff grows to, before jitter.
    pub fn max_backoff(&self) -> Duration {
        self.max_backoff
    }

    /// The factor each backoff grows by.
    pub fn backoff_multiplier(&self) -> f64 {
        self.backoff_multiplier
    }

    /// Whether a call that failed with `code` may be retried.
    pub fn is_retryable(&self, code: Code) -> bool {
        self.retryable.contains(code)
    }

    /// The backoff before a retry, `since_pushback` retries after the
    /// server's last pushback (or the call's start), before jitter: as
    /// grpc-go, `min(initial × multiplier^n, max)`.
    pub(crate) fn backoff(&self, since_pushback: u32) -> Duration {
        let exponent = i32::try_from(since_pushback).unwrap_or(i32::MAX);
        let grown = self.initial_backoff.as_secs_f64() * self.backoff_multiplier.powi(exponent);
        let capped = grown.min(self.max_backoff.as_secs_f64());
        Duration::try_from_secs_f64(capped).unwrap_or(self.max_backoff)
    }

    /// [`backoff`](Self::backoff) with grpc-go's jitter: times a factor in
    /// [0.8, 1.2).
    pub(crate) fn jittered_backoff(&self, since_pushback: u32) -> Duration {
        self.backoff(since_pushback)
            .mul_f64(0.8 + 0.4 * fastrand::f64())
    }
}

/// Builds a [`RetryPolicy`]; [`build`](Self::build) validates it as
/// grpc-go validates a `retryPolicy`.
#[derive(Debug, Clone, Default)]
pub struct RetryPolicyBuilder {
    max_attempts: Option<i64>,
    initial_backoff: Option<Duration>,
    max_backoff: Option<Duration>,
    backoff_multiplier: Option<f64>,
    retryable: Codes,
}

impl RetryPolicyBuilder {
    /// The attempts a call may make, the first included: at least 2.
    /// Values above [`RetryConfig::max_call_attempts`](super::RetryConfig::max_call_attempts)
    /// are capped to it.
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = Some(i64::from(attempts));
        self
    }

    pub(crate) fn max_attempts_signed(mut self, attempts: i64) -> Self {
        self.max_attempts = Some(attempts);
        self
    }

    /// The backoff before the first retry: more than zero.
    pub fn initial_backoff(mut self, backoff: Duration) -> Self {
        self.initial_backoff = Some(backoff);
        self
    }

    /// The most a backoff grows to: more than zero.
    pub fn max_backoff(mut self, backoff: Duration) -> Self {
        self.max_backoff = Some(backoff);
        self
    }

    /// The factor each backoff grows by: more than zero.
    pub fn backoff_multiplier(mut self, multiplier: f64) -> Self {
        self.backoff_multiplier = Some(multiplier);
        self
    }

    /// Adds a status code whose failures are retried.
    pub fn retryable_code(mut self, code: Code) -> Self {
        self.retryable.insert(code);
        self
    }

    /// Adds status codes whose failures are retried.
    pub fn retryable_codes(mut self, codes: impl IntoIterator<Item = Code>) -> Self {
        for code in codes {
            self.retryable.insert(code);
        }
        self
    }

    /// The policy, or why grpc-go would refuse it: `maxAttempts` ≤ 1, a
    /// backoff or multiplier missing or ≤ 0, or no retryable code.
    pub fn build(self) -> Result<RetryPolicy, RetryConfigError> {
        let invalid = |what: &str| RetryConfigError::new(RetryConfigErrorKind::RetryPolicy, what);
        let max_attempts = match self.max_attempts {
            Some(attempts) if attempts > 1 => u32::try_from(attempts).unwrap_or(u32::MAX),
            Some(attempts) => {
                return Err(invalid(&format!(
                    "maxAttempts must be greater than 1, not {attempts}"
                )));
            }
            None => return Err(invalid("maxAttempts is required")),
        };
        let initial_backoff = match self.initial_backoff {
            Some(backoff) if !backoff.is_zero() => backoff,
            _ => return Err(invalid("initialBackoff must be greater than zero")),
        };
        let max_backoff = match self.max_backoff {
            Some(backoff) if !backoff.is_zero() => backoff,
            _ => return Err(invalid("maxBackoff must be greater than zero")),
        };
        let backoff_multiplier = match self.backoff_multiplier {
            Some(multiplier) if multiplier > 0.0 => multiplier,
            _ => return Err(invalid("backoffMultiplier must be greater than zero")),
        };
        if self.retryable.is_empty() {
            return Err(invalid("retryableStatusCodes must name at least one code"));
        }
        Ok(RetryPolicy {
            max_attempts,
            initial_backoff,
            max_backoff,
            backoff_multiplier,
            retryable: self.retryable,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy_with(multiplier: f64) -> RetryPolicy {
        RetryPolicy::builder()
            .max_attempts(5)
            .initial_backoff(Duration::from_millis(100))
            .max_backoff(Duration::from_millis(350))
            .backoff_multiplier(multiplier)
            .retryable_code(Code::Unavailable)
            .build()
            .unwrap()
    }

    #[test]
    fn the_backoff_grows_by_the_multiplier_up_to_the_cap() {
        let policy = policy_with(2.0);
        assert_eq!(policy.backoff(0), Duration::from_millis(100));
        assert_eq!(policy.backoff(1), Duration::from_millis(200));
        assert_eq!(policy.backoff(2), Duration::from_millis(350));
        assert_eq!(policy.backoff(u32::MAX), Duration::from_millis(350));
        // An infinite multiplier (grpc-go accepts any positive one).
        assert_eq!(
            policy_with(f64::INFINITY).backoff(3),
            Duration::from_millis(350)
        );
        for _ in 0..1000 {
            let jittered = policy.jittered_backoff(1);
            assert!(jittered >= Duration::from_millis(160), "{jittered:?}");
            assert!(jittered < Duration::from_millis(240), "{jittered:?}");
        }
    }

    #[test]
    fn invalid_policies_are_refused_as_grpc_go_refuses_them() {
        let valid = || {
            RetryPolicy::builder()
                .max_attempts(2)
                .initial_backoff(Duration::from_millis(1))
                .max_backoff(Duration::from_millis(1))
                .backoff_multiplier(1.0)
                .retryable_code(Code::Unavailable)
        };
        assert!(valid().build().is_ok());
        for (builder, what) in [
            (valid().max_attempts(1), "maxAttempts"),
            (valid().max_attempts_signed(-3), "maxAttempts"),
            (valid().initial_backoff(Duration::ZERO), "initialBackoff"),
            (valid().max_backoff(Duration::ZERO), "maxBackoff"),
            (valid().backoff_multiplier(0.0), "backoffMultiplier"),
            (valid().backoff_multiplier(f64::NAN), "backoffMultiplier"),
            (
                RetryPolicy::builder()
                    .max_attempts(2)
                    .initial_backoff(Duration::from_millis(1))
                    .max_backoff(Duration::from_millis(1))
                    .backoff_multiplier(1.0),
                "retryableStatusCodes",
            ),
        ] {
            let error = builder.build().unwrap_err();
            assert_eq!(error.kind(), RetryConfigErrorKind::RetryPolicy);
            assert!(error.to_string().contains(what), "{error}");
        }
    }

    #[test]
    fn a_code_set_holds_each_of_the_17_codes() {
        let mut codes = Codes::default();
        assert!(codes.is_empty());
        codes.insert(Code::Ok);
        codes.insert(Code::Unauthenticated);
        assert!(codes.contains(Code::Ok) && codes.contains(Code::Unauthenticated));
        assert!(!codes.contains(Code::Unavailable));
        assert_eq!(format!("{codes:?}"), "{Ok, Unauthenticated}");
    }
}
