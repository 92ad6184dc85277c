//! `retry` benches: what `RetryLayer` costs a call that needs no retry
//! (issue #47's goal: ≤ 1.05× the call without it), beside the bare call.
//!
//! - `retry/in_process`: the layer over an inner service that reads the
//!   request body to its end (as the channel's h2 stream does) and
//!   answers `grpc-status: 0` in trailers, against that service bare;
//!   with no policy (transparent retries only) and with a policy and a
//!   retry budget for the method.
//! - `retry/loopback`: unary echo calls over 127.0.0.1 (one runtime
//!   thread, one call at a time), the tonic client on a bare `Channel`
//!   and through the layer.
//!
//! Each group is also run interleaved first (a paired difference, steadier
//! than two criterion rows on a shared machine).
//!
//! `cargo bench --bench retry`
#[path = "interleaved/mod.rs"]
mod interleaved;

use std::convert::Infallible;
use std::future::Future;
use std::hint::black_box;
use std::pin::{Pin, pin};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{Criterion, criterion_group};
use http::{HeaderMap, HeaderValue, Request, Response};
use http_body::{Body as _, Frame};
use interleaved::Round;
use support::{EchoClient, EchoRequest};
use tonic::Code;
use tonic::body::Body;
use tonic_hotpath::retry::{RetryConfig, RetryLayer, RetryPolicy, RetryThrottling};
use tower::{BoxError, Layer, Service};

const METHOD: &str = "/hotpath.echo.Echo/UnaryEcho";

/// Reads the request body to its end, then answers OK in trailers.
#[derive(Debug, Clone, Copy)]
struct ReadThenOk;

impl Service<Request<Body>> for ReadThenOk {
    type Response = Response<Trailers>;
    type Error = Infallible;
    type Future = ReadBody;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> ReadBody {
        ReadBody(Some(request.into_body()))
    }
}

/// The inner service's future: the request body, read to its end.
struct ReadBody(Option<Body>);

impl Future for ReadBody {
    type Output = Result<Response<Trailers>, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Some(body) = &mut self.0 {
            while let Some(frame) = std::task::ready!(Pin::new(&mut *body).poll_frame(cx)) {
                black_box(frame.ok());
            }
        }
        let mut status = HeaderMap::with_capacity(1);
        status.insert("grpc-status", HeaderValue::from_static("0"));
        Poll::Ready(Ok(Response::new(Trailers(Some(status)))))
    }
}

/// A body of one trailers frame.
#[derive(Debug)]
struct Trailers(Option<HeaderMap>);

impl http_body::Body for Trailers {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.0.take().map(|trailers| Ok(Frame::trailers(trailers))))
    }
}

/// A unary request as tonic's client makes it: one encoded message.
fn request() -> Request<Body> {
    let message = Bytes::from_static(&[0, 0, 0, 0, 7, 10, 5, b'h', b'e', b'l', b'l', b'o']);
    let mut request = Request::new(Body::new(http_body_util::Full::new(message)));
    *request.uri_mut() = http::Uri::from_static(METHOD);
    request
}

/// One call: the response, its body read to the end.
fn full_call<S, B>(service: &mut S) -> usize
where
    S: Service<Request<Body>, Response = Response<B>>,
    S::Error: Into<BoxError>,
    B: http_body::Body + Unpin,
{
    let mut cx = Context::from_waker(Waker::noop());
    let Poll::Ready(Ok(response)) = pin!(service.call(request())).poll(&mut cx) else {
        panic!("answered at once");
    };
    let mut body = response.into_body();
    let mut frames = 0;
    while let Poll::Ready(Some(_)) = Pin::new(&mut body).poll_frame(&mut cx) {
        frames += 1;
    }
    frames
}

fn with_policy() -> RetryLayer {
    let policy = RetryPolicy::builder()
        .max_attempts(4)
        .initial_backoff(Duration::from_millis(100))
        .max_backoff(Duration::from_secs(1))
        .backoff_multiplier(2.0)
        .retryable_code(Code::Unavailable)
        .build()
        .expect("a valid policy");
    RetryLayer::new(
        RetryConfig::new()
            .service("hotpath.echo.Echo", policy)
            .throttling(RetryThrottling::new(10.0, 0.1).expect("valid throttling")),
    )
}

fn in_process(c: &mut Criterion) {
    let mut group = c.benchmark_group("retry/in_process");
    let mut bare = ReadThenOk;
    group.bench_function("bare call (no layer)", |b| {
        b.iter(|| black_box(full_call(&mut bare)));
    });
    let mut transparent = RetryLayer::new(RetryConfig::new()).layer(ReadThenOk);
    group.bench_function("RetryLayer, no policy", |b| {
        b.iter(|| black_box(full_call(&mut transparent)));
    });
    let mut policy = with_policy().layer(ReadThenOk);
    group.bench_function("RetryLayer, policy and budget", |b| {
        b.iter(|| black_box(full_call(&mut policy)));
    });
    group.finish();
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

/// A client of an echo server on this runtime, on `layer` over a channel.
fn loopback_client<L>(runtime: &tokio::runtime::Runtime, layer: L) -> EchoClient<L::Service>
where
    L: Layer<tonic::transport::Channel>,
    L::Service: tonic::client::GrpcService<Body>,
    <L::Service as tonic::client::GrpcService<Body>>::Error: Into<BoxError>,
    <L::Service as tonic::client::GrpcService<Body>>::ResponseBody:
        http_body::Body<Data = Bytes> + Send + 'static,
    <<L::Service as tonic::client::GrpcService<Body>>::ResponseBody as http_body::Body>::Error:
        Into<BoxError> + Send,
{
    runtime.block_on(async {
        let addr = support::spawn_echo().await;
        EchoClient::new(layer.layer(support::connect(addr).await))
    })
}

async fn echo<S>(client: &mut EchoClient<S>)
where
    S: tonic::client::GrpcService<Body>,
    S::Error: Into<BoxError>,
    S::ResponseBody: http_body::Body<Data = Bytes> + Send + 'static,
    <S::ResponseBody as http_body::Body>::Error: Into<BoxError> + Send,
{
    let request = EchoRequest {
        message: "hello".into(),
    };
    black_box(client.unary_echo(request).await.expect("echo"));
}

fn loopback(c: &mut Criterion) {
    let runtime = runtime();
    let mut group = c.benchmark_group("retry/loopback");
    let mut bare = loopback_client(&runtime, tower::layer::util::Identity::new());
    group.bench_function("bare Channel", |b| {
        b.iter(|| runtime.block_on(echo(&mut bare)));
    });
    let mut retried = loopback_client(&runtime, with_policy());
    group.bench_function("RetryLayer, policy and budget", |b| {
        b.iter(|| runtime.block_on(echo(&mut retried)));
    });
    group.finish();
}

fn interleaved_overhead() {
    const CALLS: u32 = 20_000;
    fn round<S, B>(mut service: S) -> Round<'static>
    where
        S: Service<Request<Body>, Response = Response<B>> + 'static,
        S::Error: Into<BoxError>,
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
        "retry/in_process",
        &mut [
            ("bare call", round(ReadThenOk)),
            (
                "RetryLayer, no policy",
                round(RetryLayer::new(RetryConfig::new()).layer(ReadThenOk)),
            ),
            (
                "RetryLayer, policy and budget",
                round(with_policy().layer(ReadThenOk)),
            ),
        ],
        31,
        CALLS,
    );

    const LOOPBACK_CALLS: u32 = 500;
    let runtime = runtime();
    let mut bare = loopback_client(&runtime, tower::layer::util::Identity::new());
    // The floor: the same bare call on a server and connection of its own
    // (each variant has its own), which differ by themselves.
    let mut bare_again = loopback_client(&runtime, tower::layer::util::Identity::new());
    let mut retried = loopback_client(&runtime, with_policy());
    let runtime = &runtime;
    interleaved::print_overhead(
        "retry/loopback",
        &mut [
            (
                "bare Channel",
                Box::new(move || {
                    let start = Instant::now();
                    runtime.block_on(async {
                        for _ in 0..LOOPBACK_CALLS {
                            echo(&mut bare).await;
                        }
                    });
                    start.elapsed()
                }),
            ),
            (
                "bare Channel, another server (floor)",
                Box::new(move || {
                    let start = Instant::now();
                    runtime.block_on(async {
                        for _ in 0..LOOPBACK_CALLS {
                            echo(&mut bare_again).await;
                        }
                    });
                    start.elapsed()
                }),
            ),
            (
                "RetryLayer, policy and budget",
                Box::new(move || {
                    let start = Instant::now();
                    runtime.block_on(async {
                        for _ in 0..LOOPBACK_CALLS {
                            echo(&mut retried).await;
                        }
                    });
                    start.elapsed()
                }),
            ),
        ],
        21,
        LOOPBACK_CALLS,
    );
}

criterion_group!(benches, in_process, loopback);

fn main() {
    interleaved_overhead();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
