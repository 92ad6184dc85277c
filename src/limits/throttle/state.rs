//! One throttle, shared by the clones of its layer and services: the
//! window, its clock and the refusal codes; [`Pending`], the outcome a
//! sent call owes the window; and [`ThrottleCounts`], what the window
//! holds, for tests and metrics.

use std::sync::Arc;

use http::{HeaderMap, StatusCode};
use tonic::Code;

use super::config::{RefusalCodes, ThrottleConfig};
use super::local;
use super::window::{Outcome, Window};
use crate::wire::status::{http_status_code, status_code};

/// The state of one throttle. Aligned so that the `Arc`'s reference count,
/// touched by every call, does not share a cache line with the fields
/// every call reads.
#[derive(Debug)]
#[repr(align(128))]
pub(crate) struct Throttle {
    window: Window,
    clock: quanta::Clock,
    start: u64,
    codes: RefusalCodes,
}

impl Throttle {
    pub(crate) fn new(config: &ThrottleConfig, codes: RefusalCodes, clock: quanta::Clock) -> Self {
        let start = clock.raw();
        Self {
            window: Window::new(config, 0),
            clock,
            start,
            codes,
        }
    }

    /// Nanoseconds since the throttle was made.
    #[inline]
    fn now(&self) -> u64 {
        self.clock.delta_as_nanos(self.start, self.clock.raw())
    }

    /// Whether to send the next call: `false` with the window's throttle
    /// probability, the rejection then counted as a throttle.
    #[inline]
    pub(crate) fn admits(&self) -> bool {
        let probability = self.window.probability(self.now());
        if probability == 0.0 {
            return true;
        }
        let (draw, stripe) = local::draw();
        if draw < probability {
            self.window.register(Outcome::Throttled, stripe);
            return false;
        }
        true
    }

    /// What the window holds now.
    pub(crate) fn counts(&self) -> ThrottleCounts {
        let throttle_probability = self.window.probability(self.now());
        let sums = self.window.sums();
        ThrottleCounts {
            requests: sums.accepts.wrapping_add(sums.throttles),
            accepts: sums.accepts,
            throttle_probability,
        }
    }

    #[inline]
    fn register(&self, code: Code) {
        let outcome = if self.codes.contains(code) {
            Outcome::Throttled
        } else {
            Outcome::Accepted
        };
        self.window.register(outcome, local::stripe());
    }
}

/// What an [`AdaptiveThrottleLayer`](super::AdaptiveThrottleLayer)'s
/// window holds: the calls of its closed bins, and the probability with
/// which it rejects the next call. Counts reach it when their bin closes
/// (at most one bin, `lookback / bins`, after the call ended).
///
/// ```
/// use tonic_hotpath::limits::AdaptiveThrottleLayer;
///
/// let counts = AdaptiveThrottleLayer::new().counts();
/// assert_eq!((counts.requests, counts.accepts), (0, 0));
/// assert_eq!(counts.throttle_probability, 0.0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct ThrottleCounts {
    /// The calls made through the layer: sent and answered, or rejected by
    /// the throttle itself.
    pub requests: u64,
    /// The calls the backend answered with anything but a refusal.
    pub accepts: u64,
    /// `max(0, (requests − K·accepts) / (requests + padding))`.
    pub throttle_probability: f64,
}

/// The outcome a sent call owes its throttle, registered once: by the
/// first of its response's final status ([`settle`](Self::settle)), or,
/// dropped without one (the caller gave up: a cancel, a deadline), as
/// `CANCELLED`: an accept, unless the layer counts that code as a
/// refusal.
#[derive(Debug)]
pub(crate) struct Pending {
    throttle: Option<Arc<Throttle>>,
}

impl Pending {
    #[inline]
    pub(crate) fn new(throttle: Arc<Throttle>) -> Self {
        Self {
            throttle: Some(throttle),
        }
    }

    /// Registers the call as ended with `code` (once: later calls do
    /// nothing).
    #[inline]
    pub(crate) fn settle(&mut self, code: Code) {
        if let Some(throttle) = self.throttle.take() {
            throttle.register(code);
        }
    }

    /// Whether the call's outcome is still unknown.
    #[inline]
    pub(crate) fn is_pending(&self) -> bool {
        self.throttle.is_some()
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.settle(Code::Cancelled);
    }
}

/// The final code a response's head carries, if it carries one: its
/// `grpc-status` (a trailers-only response), or, without one, its HTTP
/// status when that is not `200` (a proxy's bare `503`), mapped as tonic
/// maps it. `None`: the status comes in the trailers.
#[inline]
pub(crate) fn head_code(status: StatusCode, headers: &HeaderMap) -> Option<Code> {
    status_code(headers).or_else(|| (status != StatusCode::OK).then(|| http_status_code(status)))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http::HeaderValue;

    use super::*;

    #[test]
    fn a_head_has_a_final_code_when_trailers_only_or_not_200() {
        let mut headers = HeaderMap::new();
        assert_eq!(head_code(StatusCode::OK, &headers), None);
        assert_eq!(
            head_code(StatusCode::SERVICE_UNAVAILABLE, &headers),
            Some(Code::Unavailable)
        );
        assert_eq!(
            head_code(StatusCode::TOO_MANY_REQUESTS, &headers),
            Some(Code::Unavailable)
        );
        assert_eq!(
            head_code(StatusCode::NOT_FOUND, &headers),
            Some(Code::Unimplemented)
        );
        headers.insert("grpc-status", HeaderValue::from_static("8"));
        assert_eq!(
            head_code(StatusCode::OK, &headers),
            Some(Code::ResourceExhausted)
        );
    }

    #[test]
    fn a_pending_call_registers_once_and_a_dropped_one_as_an_accept() {
        let (clock, mock) = quanta::Clock::mock();
        let config = ThrottleConfig::new(Duration::from_secs(1), 10, 2.0, 8.0).unwrap();
        let throttle = Arc::new(Throttle::new(&config, RefusalCodes::default(), clock));
        let mut refused = Pending::new(throttle.clone());
        refused.settle(Code::Unavailable);
        refused.settle(Code::Ok);
        drop(refused);
        Pending::new(throttle.clone()).settle(Code::ResourceExhausted);
        Pending::new(throttle.clone()).settle(Code::InvalidArgument);
        drop(Pending::new(throttle.clone()));
        mock.increment(Duration::from_millis(100));
        let counts = throttle.counts();
        assert_eq!((counts.requests, counts.accepts), (4, 2));
        assert_eq!(counts.throttle_probability, 0.0);
    }

    #[test]
    fn rejections_are_drawn_with_the_probability_and_counted() {
        let (clock, mock) = quanta::Clock::mock();
        let config = ThrottleConfig::new(Duration::from_secs(1), 10, 2.0, 8.0).unwrap();
        let throttle = Arc::new(Throttle::new(&config, RefusalCodes::default(), clock));
        // Zero requests: every call is sent.
        assert!((0..1000).all(|_| throttle.admits()));
        for _ in 0..92 {
            Pending::new(throttle.clone()).settle(Code::Unavailable);
        }
        mock.increment(Duration::from_millis(100));
        assert_eq!(throttle.counts().throttle_probability, 0.92);
        let n = 10_000;
        let rejected = (0..n).filter(|_| !throttle.admits()).count();
        // 9 200 expected, standard deviation 27.
        assert!((9_000..9_400).contains(&rejected), "{rejected}");
        mock.increment(Duration::from_millis(100));
        assert_eq!(throttle.counts().requests, 92 + rejected as u64);
    }
}
