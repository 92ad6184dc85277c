//! What a peer can make the admission layers read: a request (its path,
//! `grpc-timeout`, org ids, content type, body) through
//! `AdaptiveLimitLayer` on the server, and an answer (HTTP status,
//! `grpc-status` in headers or trailers, body frames) through it and
//! through the client's `AdaptiveThrottleLayer`. Never a panic, and no
//! place lost or kept: once every call ended (its body read to the end,
//! or dropped half way), the adaptive layer holds no call in flight; the
//! throttle counts each call it let through once, and accepts no more
//! than it counted.
//!
//! Input: a byte per call (up to 8 calls) choosing its path, how its
//! answer comes, and where the caller stops reading; then the call's
//! request headers, its answer's status bytes and body frames.

use std::convert::Infallible;
use std::future::{Ready, ready};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body::Body;
use tonic_hotpath::limits::{AdaptiveLimitLayer, AdaptiveThrottleLayer, Gradient};
use tower::{Layer, Service};

use super::body::{Chunks, now};
use super::input::{Input, headers};

const PATHS: [&str; 4] = [
    "/hotpath.echo.Echo/UnaryEcho",
    "/grpc.health.v1.Health/Check",
    "/batch.Jobs/Run",
    "/",
];

/// The answer the inner service gives every call.
#[derive(Clone)]
struct Answer {
    status: u16,
    /// `grpc-status` in the headers (trailers-only).
    header_code: Option<Vec<u8>>,
    frames: Vec<Bytes>,
    /// `grpc-status` in the trailers.
    trailer_code: Option<Vec<u8>>,
}

impl Service<Request<tonic::body::Body>> for Answer {
    type Response = Response<Chunks>;
    type Error = Infallible;
    type Future = Ready<Result<Response<Chunks>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<tonic::body::Body>) -> Self::Future {
        let mut body = Chunks::new(self.frames.iter().map(|frame| &frame[..]));
        if let Some(code) = &self.trailer_code
            && let Ok(value) = HeaderValue::from_bytes(code)
        {
            let mut trailers = HeaderMap::new();
            trailers.insert("grpc-status", value);
            body = body.with_trailers(trailers);
        }
        let mut response = Response::new(body);
        *response.status_mut() = StatusCode::from_u16(self.status).unwrap_or(StatusCode::OK);
        response
            .headers_mut()
            .insert("content-type", HeaderValue::from_static("application/grpc"));
        if let Some(code) = &self.header_code
            && let Ok(value) = HeaderValue::from_bytes(code)
        {
            response.headers_mut().insert("grpc-status", value);
        }
        ready(Ok(response))
    }
}

/// Reads up to `frames` frames of `body` (all of them past its end).
fn read<B: Body + Unpin>(mut body: B, frames: u8) {
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..frames {
        match Pin::new(&mut body).poll_frame(&mut cx) {
            Poll::Ready(Some(_)) => {}
            Poll::Ready(None) | Poll::Pending => break,
        }
    }
}

pub fn check(data: &[u8]) {
    let mut input = Input::new(data);
    let calls = usize::from(input.byte() % 8) + 1;
    let choices: Vec<u8> = (0..calls).map(|_| input.byte()).collect();
    let answer = Answer {
        status: input.u16(),
        header_code: input
            .byte()
            .is_multiple_of(2)
            .then(|| input.until(0).to_vec()),
        frames: (0..input.byte() % 4)
            .map(|_| Bytes::copy_from_slice(input.until(0)))
            .collect(),
        trailer_code: input
            .byte()
            .is_multiple_of(2)
            .then(|| input.until(0).to_vec()),
    };
    let request_headers = headers(
        &mut input,
        &["grpc-timeout", "x-scope-orgid", "content-type", "te"],
        8,
    );

    // A small limit, so that some calls are refused.
    let adaptive = AdaptiveLimitLayer::new()
        .gradient(Gradient::default().initial_limit(2).limits(1, 4))
        .shed_first_services(["batch.Jobs"]);
    let handle = adaptive.handle();
    let mut server = adaptive.layer(answer.clone());
    let throttle = AdaptiveThrottleLayer::new();
    let mut client = throttle.layer(answer);
    let mut open = Vec::new();
    for (index, choice) in choices.iter().enumerate() {
        let path = PATHS[usize::from(choice % 4)];
        let request = || {
            let mut request = Request::new(tonic::body::Body::empty());
            *request.uri_mut() = http::Uri::from_static(path);
            *request.headers_mut() = request_headers.clone();
            request
        };
        // Read 0 to 6 frames of the answer; the body is dropped, or kept
        // open until the end (every other call), half read.
        let frames = (choice >> 2) % 7;
        // Both layers answer every call (a refusal is a response).
        let Ok(response) = now(server.call(request()));
        if index % 2 == 0 {
            open.push(response);
        } else {
            read(response.into_body(), frames);
        }
        let Ok(response) = now(client.call(request()));
        read(response.into_body(), frames);
    }
    for response in open {
        read(response.into_body(), 8);
    }
    let status = handle.status();
    assert_eq!(status.in_flight, 0, "every call ended: {status:?}");
    let counts = throttle.counts();
    assert!(counts.requests <= calls as u64, "{counts:?}");
    assert!(counts.accepts <= counts.requests, "{counts:?}");
}
