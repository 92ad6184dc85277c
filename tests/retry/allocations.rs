//! What the layer allocates: per message, nothing but room for a
//! reference to its `Bytes` (amortised: the list of kept messages doubles
//! as it grows); per call, a few allocations, counted here so that a
//! change shows.

use std::convert::Infallible;
use std::future::Future;
use std::pin::{Pin, pin};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use support::alloc_count::allocations;
use tonic_hotpath::retry::{RetryConfig, RetryLayer};
use tower::{Layer, Service};

/// A request body of `n` messages, each a static `Bytes` (no allocation).
struct Messages(usize);

impl Body for Messages {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.0 == 0 {
            return Poll::Ready(None);
        }
        self.0 -= 1;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(&[
            0, 0, 0, 0, 1, 7,
        ])))))
    }
}

/// Reads the request body to its end, then answers OK in trailers.
#[derive(Clone, Copy)]
struct ReadThenOk;

impl Service<Request<tonic::body::Body>> for ReadThenOk {
    type Response = Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<tonic::body::Body>) -> Self::Future {
        Box::pin(async move {
            let mut body = request.into_body();
            while let Some(frame) =
                std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await
            {
                drop(frame);
            }
            let mut trailers = HeaderMap::new();
            trailers.insert("grpc-status", HeaderValue::from_static("0"));
            let body = http_body_util::Empty::<Bytes>::new()
                .with_trailers(std::future::ready(Some(Ok(trailers))));
            Ok(Response::new(tonic::body::Body::new(body)))
        })
    }
}

fn call_with(messages: usize) -> usize {
    let mut service = RetryLayer::new(RetryConfig::new()).layer(ReadThenOk);
    let mut request = Request::new(Messages(messages));
    *request.uri_mut() = http::Uri::from_static("/hotpath.echo.Echo/ClientStreamingEcho");
    let (count, ()) = allocations(|| {
        let mut cx = Context::from_waker(Waker::noop());
        let Poll::Ready(Ok(response)) = pin!(service.call(request)).poll(&mut cx) else {
            panic!("answered at once");
        };
        let mut body = response.into_body();
        while let Poll::Ready(Some(_)) = Pin::new(&mut body).poll_frame(&mut cx) {}
    });
    count
}

#[test]
fn messages_cost_no_allocation_beyond_room_for_their_references() {
    // Warm up (thread-locals, lazily made statics).
    call_with(1);
    let base = call_with(1);
    let per_doubling: Vec<_> = [64, 128, 256, 512]
        .iter()
        .map(|&n| call_with(n) as isize - base as isize)
        .collect();
    // Each doubling of the messages adds one growth of the kept list (a
    // reallocation), nothing per message.
    for pair in per_doubling.windows(2) {
        assert!(
            pair[1] - pair[0] <= 1,
            "allocations beyond a one-message call: {per_doubling:?}"
        );
    }
    println!(
        "allocations per call: {base} for one message; beyond it for 64..512: {per_doubling:?}"
    );
}
