//! [`AdaptiveThrottleLayer`] and its service, [`AdaptiveThrottle`].

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tonic::Code;
use tower::{Layer, Service};

use super::body::ResponseBody;
use super::config::{InvalidThrottleError, RefusalCodes, ThrottleConfig};
use super::future::ResponseFuture;
use super::state::{Pending, Throttle, ThrottleCounts};

/// Client-side adaptive throttling (the Google SRE book's, as grpc-go's
/// RLS balancer has it): a client layer that stops sending calls the
/// backend would refuse.
///
/// Over its lookback (30 s by default) it counts the calls made through it
/// (`requests`: sent, or rejected by itself) and those the backend
/// accepted (`accepts`: answered with any status but a refusal,
/// `UNAVAILABLE` or `RESOURCE_EXHAUSTED` by default), and rejects each new
/// call, without sending it, with probability
/// `max(0, (requests − K·accepts) / (requests + 8))`, K being 2 by default.
/// A rejected call fails at once with `UNAVAILABLE` and the message
/// [`REJECTED_MESSAGE`](Self::REJECTED_MESSAGE), as a trailers-only
/// response: a tonic client sees a plain [`Status`](tonic::Status). See
/// the [module docs](super) for where the status is read and how this
/// differs from grpc-go.
///
/// Clones of the layer and of its services share one window: build one
/// layer per backend (per `Channel`). Each builder method starts a fresh
/// window.
///
/// ```
/// use std::convert::Infallible;
/// use std::time::Duration;
/// use tonic_hotpath::limits::AdaptiveThrottleLayer;
/// use tower::{Service, ServiceBuilder, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let throttle = AdaptiveThrottleLayer::new()
///     .with_ratio_for_accepts(2.0)?
///     .with_lookback(Duration::from_secs(1), 10)?;
/// // A backend that refuses everything (a tonic `Channel` in real use).
/// let backend = service_fn(|_: http::Request<String>| async {
///     Ok::<_, Infallible>(tonic::Status::unavailable("overloaded").into_http::<String>())
/// });
/// let mut client = ServiceBuilder::new().layer(throttle.clone()).service(backend);
/// for _ in 0..100 {
///     let response = client.ready().await?.call(http::Request::new(String::new())).await?;
///     let status = tonic::Status::from_header_map(response.headers()).unwrap();
///     assert_eq!(status.code(), tonic::Code::Unavailable);
/// }
/// // The refusals count once their bin (here 100 ms) closes.
/// tokio::time::sleep(Duration::from_millis(100)).await;
/// let counts = throttle.counts();
/// assert_eq!((counts.requests, counts.accepts), (100, 0));
/// assert!(counts.throttle_probability > 0.9);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct AdaptiveThrottleLayer {
    throttle: Arc<Throttle>,
    config: ThrottleConfig,
    codes: RefusalCodes,
    clock: quanta::Clock,
}

impl AdaptiveThrottleLayer {
    /// The message of a call the throttle rejected (with `UNAVAILABLE`).
    pub const REJECTED_MESSAGE: &str =
        "throttled by the client: adaptive throttling rejected the call without sending it";

    /// A throttle with grpc-go's defaults: a lookback of 30 s in 100 bins,
    /// K = 2, a padding of 8, and `UNAVAILABLE` and `RESOURCE_EXHAUSTED`
    /// as refusals.
    pub fn new() -> Self {
        Self::with_clock(quanta::Clock::new())
    }

    /// A throttle reading time from `clock` (tests: `Clock::mock()`).
    pub(crate) fn with_clock(clock: quanta::Clock) -> Self {
        Self::build(ThrottleConfig::default(), RefusalCodes::default(), clock)
    }

    fn build(config: ThrottleConfig, codes: RefusalCodes, clock: quanta::Clock) -> Self {
        Self {
            throttle: Arc::new(Throttle::new(&config, codes, clock.clone())),
            config,
            codes,
            clock,
        }
    }

    fn with_config(self, config: ThrottleConfig) -> Self {
        Self::build(config, self.codes, self.clock)
    }

    /// K, the SRE book's multiplier of accepts (grpc-go's
    /// `ratioForAccepts`, 2 by default): the client sends up to about K
    /// times what the backend accepts. 1 throttles at the first refusal;
    /// higher values throttle later and let the client learn sooner that
    /// the backend recovered.
    ///
    /// # Errors
    ///
    /// `k` below 1 (it would throttle a backend that refuses nothing), or
    /// not finite.
    pub fn with_ratio_for_accepts(self, k: f64) -> Result<Self, InvalidThrottleError> {
        let c = self.config;
        let config = ThrottleConfig::new(c.lookback, c.bins, k, c.requests_padding)?;
        Ok(self.with_config(config))
    }

    /// How much history counts (`lookback`, 30 s by default), in how many
    /// bins (100 by default, at most 100 000): counts leave the window a
    /// bin at a time, and the throttle probability is recomputed once per
    /// bin.
    ///
    /// # Errors
    ///
    /// No bins, more than 100 000, or bins shorter than a nanosecond.
    pub fn with_lookback(
        self,
        lookback: Duration,
        bins: u32,
    ) -> Result<Self, InvalidThrottleError> {
        let c = self.config;
        let config = ThrottleConfig::new(lookback, bins, c.ratio_for_accepts, c.requests_padding)?;
        Ok(self.with_config(config))
    }

    /// The padding added to `requests` in the formula's denominator
    /// (grpc-go's `requestsPadding`, 8 by default; the SRE book's formula
    /// has 1): it lowers the throttle probability while few calls were
    /// made, and keeps it below 1.
    ///
    /// # Errors
    ///
    /// `padding` not above 0, or not finite.
    pub fn with_requests_padding(self, padding: f64) -> Result<Self, InvalidThrottleError> {
        let c = self.config;
        let config = ThrottleConfig::new(c.lookback, c.bins, c.ratio_for_accepts, padding)?;
        Ok(self.with_config(config))
    }

    /// The status codes counted as the backend refusing a call (instead
    /// of `UNAVAILABLE` and `RESOURCE_EXHAUSTED`). A transport failure
    /// counts as `UNAVAILABLE`.
    #[must_use]
    pub fn with_refusal_codes(self, codes: impl IntoIterator<Item = Code>) -> Self {
        Self::build(self.config, RefusalCodes::new(codes), self.clock)
    }

    /// What the window holds now (for metrics and tests).
    pub fn counts(&self) -> ThrottleCounts {
        self.throttle.counts()
    }
}

impl Default for AdaptiveThrottleLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl<S> Layer<S> for AdaptiveThrottleLayer {
    type Service = AdaptiveThrottle<S>;

    fn layer(&self, inner: S) -> Self::Service {
        AdaptiveThrottle {
            inner,
            throttle: self.throttle.clone(),
        }
    }
}

/// The service of [`AdaptiveThrottleLayer`]: sends a call to the inner
/// service, or rejects it locally with the window's throttle probability.
#[derive(Debug, Clone)]
pub struct AdaptiveThrottle<S> {
    inner: S,
    throttle: Arc<Throttle>,
}

impl<S> AdaptiveThrottle<S> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner service, consuming the throttle.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, ReqBody, ResBody> Service<http::Request<ReqBody>> for AdaptiveThrottle<S>
where
    S: Service<http::Request<ReqBody>, Response = http::Response<ResBody>>,
{
    type Response = http::Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    #[inline]
    fn call(&mut self, request: http::Request<ReqBody>) -> Self::Future {
        if self.throttle.admits() {
            let pending = Pending::new(self.throttle.clone());
            ResponseFuture::sent(self.inner.call(request), pending)
        } else {
            ResponseFuture::rejected()
        }
    }
}
