//! Whether a failed attempt is tried again, and after how long: grpc-go's
//! `shouldRetry`, step for step.

use std::error::Error;
use std::time::Duration;

use h2::Reason;
use tonic::Code;

use super::policy::RetryPolicy;
use super::throttle::Throttle;
use crate::stats::layer::error_chain::{Cause, causes};
use crate::wire::status::Pushback;

/// What follows a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// The failure is the call's answer.
    Answer,
    /// Try again at once, transparently (the server never saw the
    /// attempt): no policy needed, no token taken, not counted as a retry.
    Transparent,
    /// Try again after this long (a retry under the policy).
    RetryAfter(Duration),
}

/// A call's retry counts.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Retries {
    /// Retries so far, transparent ones not counted (grpc-go's
    /// `numRetries`, sent as `grpc-previous-rpc-attempts`).
    pub(crate) made: u32,
    /// Retries since the server's last pushback (the backoff's exponent).
    pub(crate) since_pushback: u32,
    /// Whether any attempt was retried yet (transparent ones included):
    /// only the first attempt may be retried transparently when the
    /// server never saw it.
    pub(crate) retried: bool,
}

/// How an attempt failed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Failure {
    pub(crate) code: Code,
    pub(crate) pushback: Pushback,
    /// The server never saw the attempt (refused stream, graceful GOAWAY
    /// above it, or never sent).
    pub(crate) unprocessed: bool,
}

impl Retries {
    /// grpc-go's `shouldRetry` for an attempt that failed before the call
    /// committed: transparent retry of an unprocessed first attempt; the
    /// pushback read first (a refused one counts as a failure for the
    /// throttle and ends the call); then the policy's codes, the throttle,
    /// the attempts left, and the delay: the pushback's, or the jittered
    /// backoff.
    pub(crate) fn next(
        &mut self,
        failure: Failure,
        policy: Option<&RetryPolicy>,
        max_attempts: u32,
        throttle: Option<&Throttle>,
    ) -> Next {
        if failure.unprocessed && !self.retried {
            self.retried = true;
            return Next::Transparent;
        }
        let pushback = match failure.pushback {
            Pushback::None => None,
            Pushback::After(delay) => Some(delay),
            Pushback::Stop => {
                if let Some(throttle) = throttle {
                    throttle.failed();
                }
                return Next::Answer;
            }
        };
        let Some(policy) = policy.filter(|policy| policy.is_retryable(failure.code)) else {
            return Next::Answer;
        };
        if throttle.is_some_and(Throttle::failed) {
            return Next::Answer;
        }
        if self.made + 1 >= policy.max_attempts().min(max_attempts) {
            return Next::Answer;
        }
        let delay = match pushback {
            Some(delay) => {
                self.since_pushback = 0;
                delay
            }
            None => {
                let delay = policy.jittered_backoff(self.since_pushback);
                self.since_pushback += 1;
                delay
            }
        };
        self.made += 1;
        self.retried = true;
        Next::RetryAfter(delay)
    }
}

/// Whether `error` says the server never saw the attempt, so that trying
/// it again cannot run it twice: a `REFUSED_STREAM` reset from the peer, a
/// graceful GOAWAY (`NO_ERROR`) from the peer that left the stream out, or
/// hyper's cancellation of a request it never sent.
pub(crate) fn unprocessed(error: &(dyn Error + 'static)) -> bool {
    causes(error).any(|cause| match cause {
        Cause::H2(h2) | Cause::HyperH2(_, h2) => {
            h2.is_remote()
                && ((h2.is_reset() && h2.reason() == Some(Reason::REFUSED_STREAM))
                    || (h2.is_go_away() && h2.reason() == Some(Reason::NO_ERROR)))
        }
        Cause::HyperCanceled(_) => true,
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retry::RetryThrottling;

    fn policy(attempts: u32) -> RetryPolicy {
        RetryPolicy::builder()
            .max_attempts(attempts)
            .initial_backoff(Duration::from_millis(10))
            .max_backoff(Duration::from_millis(10))
            .backoff_multiplier(1.0)
            .retryable_code(Code::Unavailable)
            .build()
            .unwrap()
    }

    fn failure(code: Code, pushback: Pushback) -> Failure {
        Failure {
            code,
            pushback,
            unprocessed: false,
        }
    }

    #[test]
    fn attempts_stop_at_the_policy_s_maximum_or_the_cap() {
        let policy = policy(4);
        let mut retries = Retries::default();
        for _ in 0..3 {
            let next = retries.next(
                failure(Code::Unavailable, Pushback::None),
                Some(&policy),
                5,
                None,
            );
            assert!(matches!(next, Next::RetryAfter(_)), "{next:?}");
        }
        assert_eq!(retries.made, 3);
        let next = retries.next(
            failure(Code::Unavailable, Pushback::None),
            Some(&policy),
            5,
            None,
        );
        assert_eq!(next, Next::Answer, "4 attempts made");
        // The channel's cap below the policy's.
        let mut retries = Retries::default();
        assert!(matches!(
            retries.next(
                failure(Code::Unavailable, Pushback::None),
                Some(&policy),
                2,
                None
            ),
            Next::RetryAfter(_)
        ));
        assert_eq!(
            retries.next(
                failure(Code::Unavailable, Pushback::None),
                Some(&policy),
                2,
                None
            ),
            Next::Answer
        );
    }

    #[test]
    fn pushback_sets_the_delay_and_resets_the_backoff_or_stops() {
        let policy = RetryPolicy::builder()
            .max_attempts(5)
            .initial_backoff(Duration::from_millis(100))
            .max_backoff(Duration::from_secs(10))
            .backoff_multiplier(10.0)
            .retryable_code(Code::Unavailable)
            .build()
            .unwrap();
        let mut retries = Retries::default();
        let _ = retries.next(
            failure(Code::Unavailable, Pushback::None),
            Some(&policy),
            5,
            None,
        );
        assert_eq!(retries.since_pushback, 1);
        let next = retries.next(
            failure(Code::Unavailable, Pushback::After(Duration::from_millis(3))),
            Some(&policy),
            5,
            None,
        );
        assert_eq!(next, Next::RetryAfter(Duration::from_millis(3)));
        assert_eq!(retries.since_pushback, 0, "the backoff starts over");
        match retries.next(
            failure(Code::Unavailable, Pushback::None),
            Some(&policy),
            5,
            None,
        ) {
            Next::RetryAfter(delay) => assert!(delay < Duration::from_millis(121), "{delay:?}"),
            other => panic!("{other:?}"),
        }
        // A refused pushback stops retries and costs a token, whatever the
        // code (grpc-go reads it before the codes).
        let throttle = Throttle::new(RetryThrottling::new(10.0, 1.0).unwrap());
        let next = retries.next(
            failure(Code::Internal, Pushback::Stop),
            Some(&policy),
            5,
            Some(&throttle),
        );
        assert_eq!(next, Next::Answer);
        assert_eq!(throttle.tokens(), 9.0);
    }

    #[test]
    fn only_retryable_codes_take_tokens_and_a_low_bucket_stops_retries() {
        let policy = policy(5);
        let throttle = Throttle::new(RetryThrottling::new(4.0, 1.0).unwrap());
        let mut retries = Retries::default();
        assert_eq!(
            retries.next(
                failure(Code::Internal, Pushback::None),
                Some(&policy),
                5,
                Some(&throttle)
            ),
            Next::Answer
        );
        assert_eq!(throttle.tokens(), 4.0, "a code not retryable costs nothing");
        assert!(matches!(
            retries.next(
                failure(Code::Unavailable, Pushback::None),
                Some(&policy),
                5,
                Some(&throttle)
            ),
            Next::RetryAfter(_)
        ));
        assert_eq!(
            retries.next(
                failure(Code::Unavailable, Pushback::None),
                Some(&policy),
                5,
                Some(&throttle)
            ),
            Next::Answer,
            "2 tokens left: at half"
        );
    }

    #[test]
    fn an_unprocessed_first_attempt_is_retried_transparently_once() {
        let unprocessed = Failure {
            code: Code::Unavailable,
            pushback: Pushback::None,
            unprocessed: true,
        };
        let mut retries = Retries::default();
        assert_eq!(retries.next(unprocessed, None, 5, None), Next::Transparent);
        assert_eq!(retries.made, 0, "not a retry of the policy");
        assert_eq!(retries.next(unprocessed, None, 5, None), Next::Answer);
    }

    #[test]
    fn refused_streams_and_graceful_goaways_are_unprocessed_other_errors_not() {
        let refused = h2::Error::from(Reason::REFUSED_STREAM);
        // A reason built locally is not the peer's.
        assert!(!unprocessed(&refused));
        assert!(!unprocessed(&std::io::Error::other("broken pipe")));
    }
}
