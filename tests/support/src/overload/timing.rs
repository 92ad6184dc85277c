//! [`RefusalTimingLayer`]: the server-side time of each refusal, from the
//! request reaching the layer to its response headers, for "a refusal
//! answered in under 1 ms at the server". Served outermost (the first
//! layer of `Server::builder()`), so it times every contender whole.
//!
//! A refusal is a response whose headers carry a `grpc-status` other
//! than `0` (trailers-only, as tonic answers an error and as
//! `TenantLimitLayer` refuses), or an error from the inner service (as
//! tower's `LoadShed` refuses: tonic turns that error into a status just
//! outside this layer). An admitted call's response headers carry no
//! `grpc-status` (its status comes in the trailers): it is not timed.
//! A call whose future is dropped (its deadline) is not timed either.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use pin_project_lite::pin_project;
use tower::{Layer, Service};

/// The refusals' server-side times, shared by clones.
#[derive(Debug, Clone, Default)]
pub struct RefusalTimes {
    times: Arc<Mutex<Vec<Duration>>>,
}

impl RefusalTimes {
    /// Takes the times recorded so far (leaving none).
    pub fn take(&self) -> Vec<Duration> {
        std::mem::take(&mut *self.times.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn record(&self, time: Duration) {
        self.times
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(time);
    }
}

/// Times each refusal of the services it wraps into [`RefusalTimes`].
#[derive(Debug, Clone)]
pub struct RefusalTimingLayer {
    times: RefusalTimes,
}

impl RefusalTimingLayer {
    /// Records into `times`.
    pub fn new(times: RefusalTimes) -> Self {
        Self { times }
    }
}

impl<S> Layer<S> for RefusalTimingLayer {
    type Service = RefusalTiming<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RefusalTiming {
            inner,
            times: self.times.clone(),
        }
    }
}

/// The service of [`RefusalTimingLayer`].
#[derive(Debug, Clone)]
pub struct RefusalTiming<S> {
    inner: S,
    times: RefusalTimes,
}

impl<S, ReqBody, ResBody> Service<http::Request<ReqBody>> for RefusalTiming<S>
where
    S: Service<http::Request<ReqBody>, Response = http::Response<ResBody>>,
{
    type Response = http::Response<ResBody>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<ReqBody>) -> Self::Future {
        ResponseFuture {
            started: Instant::now(),
            times: self.times.clone(),
            inner: self.inner.call(request),
        }
    }
}

pin_project! {
    /// The response future of [`RefusalTiming`]: the inner one, timed.
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
        started: Instant,
        times: RefusalTimes,
    }
}

impl<F, ResBody, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<http::Response<ResBody>, E>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = ready!(this.inner.poll(cx));
        let refused = match &result {
            Ok(response) => response
                .headers()
                .get("grpc-status")
                .is_some_and(|status| status != "0"),
            Err(_) => true,
        };
        if refused {
            this.times.record(this.started.elapsed());
        }
        Poll::Ready(result)
    }
}
