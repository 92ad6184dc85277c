//! `limits` benches that are not per tenant: a call through the client's
//! `AdaptiveThrottleLayer` against the bare call, over an inner service
//! that answers at once with `grpc-status: 0` in the trailers (tonic's
//! unary OK); and a call the throttle rejects (a window full of
//! refusals). Criterion rows, then the same pair interleaved (a paired
//! difference, steadier than two rows on a shared machine). Many threads:
//! `benches/scale.rs`, mode `throttle`.
//!
//! `cargo bench --bench limits`
#[path = "interleaved/mod.rs"]
mod interleaved;

use std::convert::Infallible;
use std::future::{Ready, ready};
use std::hint::black_box;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};
use http::{HeaderMap, HeaderValue, Request, Response};
use http_body::Frame;
use interleaved::Round;
use support::tenant::call;
use tonic::body::Body;
use tonic_hotpath::limits::AdaptiveThrottleLayer;
use tower::{Layer, Service};

/// An inner service answering every call with `grpc-status` `code`: in
/// the trailers for 0 (OK), trailers-only otherwise.
#[derive(Debug, Clone, Copy)]
struct Answer(&'static str);

impl Service<Request<Body>> for Answer {
    type Response = Response<Trailers>;
    type Error = Infallible;
    type Future = Ready<Result<Response<Trailers>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<Body>) -> Self::Future {
        let mut status = HeaderMap::with_capacity(1);
        status.insert("grpc-status", HeaderValue::from_static(self.0));
        let response = if self.0 == "0" {
            Response::new(Trailers(Some(status)))
        } else {
            let mut response = Response::new(Trailers(None));
            *response.headers_mut() = status;
            response
        };
        ready(Ok(response))
    }
}

/// A body of one trailers frame (or none).
#[derive(Debug)]
struct Trailers(Option<HeaderMap>);

impl http_body::Body for Trailers {
    type Data = bytes::Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<bytes::Bytes>, Infallible>>> {
        Poll::Ready(self.0.take().map(|trailers| Ok(Frame::trailers(trailers))))
    }
}

/// One call: the response and its body read to the end.
fn full_call<S, B>(service: &mut S) -> usize
where
    S: Service<Request<Body>, Response = Response<B>, Error = Infallible>,
    B: http_body::Body + Unpin,
{
    let response = call(service, Request::new(Body::empty())).expect("ready at once");
    let mut body = response.into_body();
    let mut cx = Context::from_waker(Waker::noop());
    let mut frames = 0;
    while let Poll::Ready(Some(_)) = Pin::new(&mut body).poll_frame(&mut cx) {
        frames += 1;
    }
    frames
}

/// A throttle whose window is full of refusals (1 ms bins over 100 s, so
/// it stays full for the run): it rejects about 99.9 % of calls.
fn rejecting() -> AdaptiveThrottleLayer {
    let throttle = AdaptiveThrottleLayer::new()
        .with_lookback(Duration::from_secs(100), 100_000)
        .expect("valid lookback");
    let mut refused = throttle.layer(Answer("14"));
    for _ in 0..10_000 {
        full_call(&mut refused);
    }
    std::thread::sleep(Duration::from_millis(5));
    assert!(throttle.counts().throttle_probability > 0.99);
    throttle
}

fn throttle(c: &mut Criterion) {
    let mut group = c.benchmark_group("limits/throttle");
    let mut bare = Answer("0");
    group.bench_function("bare call (no layer)", |b| {
        b.iter(|| black_box(full_call(&mut bare)));
    });
    let mut through = AdaptiveThrottleLayer::new().layer(Answer("0"));
    group.bench_function("AdaptiveThrottle, accepted", |b| {
        b.iter(|| black_box(full_call(&mut through)));
    });
    let mut rejected = rejecting().layer(Answer("14"));
    group.bench_function("AdaptiveThrottle, window full of refusals", |b| {
        b.iter(|| black_box(full_call(&mut rejected)));
    });
    group.finish();
}

/// The layer's cost as a paired difference against the bare call.
fn interleaved_overhead() {
    const CALLS: u32 = 20_000;
    fn round<S, B>(mut service: S) -> Round<'static>
    where
        S: Service<Request<Body>, Response = Response<B>, Error = Infallible> + 'static,
        B: http_body::Body + Unpin,
    {
        Box::new(move || {
            let start = Instant::now();
            for _ in 0..CALLS {
                black_box(full_call(&mut service));
            }
            start.elapsed()
        })
    }
    interleaved::print_overhead(
        "limits/throttle, interleaved",
        &mut [
            ("bare call", round(Answer("0"))),
            (
                "AdaptiveThrottle, accepted",
                round(AdaptiveThrottleLayer::new().layer(Answer("0"))),
            ),
        ],
        31,
        CALLS,
    );
}

criterion_group!(benches, throttle);

fn main() {
    interleaved_overhead();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
