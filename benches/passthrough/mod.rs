//! A reference layer for the stats bench: the shape every layer that
//! observes gRPC bodies has, and nothing else. It wraps the request body,
//! the response future and the response body, and shares one `Arc` among
//! them (as `CombinedLayer` shares its per-RPC record); it builds no event
//! and keeps no record. Optionally it reads the clock twice per RPC, when
//! the call begins and when the response trailers arrive (as `Begin` and
//! `End` do).
//!
//! Its cost over no layer is the floor under `CombinedLayer`'s: what is
//! left above it is the stats machinery itself.
#![allow(dead_code)]

use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body, Frame};
use pin_project_lite::pin_project;
use tower::{Layer, Service};

/// The reference layer (`default()`); `with_clock` adds the two clock
/// reads.
#[derive(Debug, Clone, Default)]
pub struct PassthroughLayer {
    shared: Arc<()>,
    clock: bool,
}

impl PassthroughLayer {
    pub fn with_clock() -> Self {
        Self {
            clock: true,
            ..Self::default()
        }
    }
}

impl<S> Layer<S> for PassthroughLayer {
    type Service = Passthrough<S>;

    fn layer(&self, inner: S) -> Passthrough<S> {
        Passthrough {
            inner,
            layer: self.clone(),
        }
    }
}

/// The reference service.
#[derive(Debug, Clone)]
pub struct Passthrough<S> {
    inner: S,
    layer: PassthroughLayer,
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for Passthrough<S>
where
    S: Service<Request<PassthroughBody<ReqBody>>, Response = Response<ResBody>>,
{
    type Response = Response<PassthroughBody<ResBody>>;
    type Error = S::Error;
    type Future = PassthroughFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let clock = self.layer.clock;
        if clock {
            black_box(Instant::now());
        }
        let shared = &self.layer.shared;
        let request = request.map(|inner| PassthroughBody {
            inner,
            shared: Arc::clone(shared),
            clock: false,
        });
        PassthroughFuture {
            inner: self.inner.call(request),
            shared: Some(Arc::clone(shared)),
            clock,
        }
    }
}

pin_project! {
    /// The reference response future: wraps the response body.
    pub struct PassthroughFuture<F> {
        #[pin]
        inner: F,
        shared: Option<Arc<()>>,
        clock: bool,
    }
}

impl<F, B, E> Future for PassthroughFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<PassthroughBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = ready!(this.inner.poll(cx));
        let shared = this.shared.take().expect("polled after completion");
        let clock = *this.clock;
        Poll::Ready(result.map(|response| {
            response.map(|inner| PassthroughBody {
                inner,
                shared,
                clock,
            })
        }))
    }
}

pin_project! {
    /// The reference body: frames pass through; with `clock`, the
    /// trailers frame reads the clock.
    pub struct PassthroughBody<B> {
        #[pin]
        inner: B,
        shared: Arc<()>,
        clock: bool,
    }
}

impl<B: Body<Data = Bytes>> Body for PassthroughBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.project();
        let poll = this.inner.poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &poll
            && *this.clock
            && frame.is_trailers()
        {
            black_box(Instant::now());
        }
        poll
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }
}
