//! The response future of [`AdaptiveThrottle`](super::AdaptiveThrottle).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::HeaderValue;
use http::header::CONTENT_TYPE;
use pin_project_lite::pin_project;
use tonic::Code;

use super::body::ResponseBody;
use super::state::{Pending, head_code};
use crate::wire::status::{GRPC_MESSAGE, GRPC_STATUS};

pin_project! {
    /// The response future of [`AdaptiveThrottle`](super::AdaptiveThrottle):
    /// the inner service's future, whose response (or error) tells the
    /// throttle whether the backend accepted the call, or the throttle's
    /// own rejection, answered at once.
    #[derive(Debug)]
    pub struct ResponseFuture<F> {
        #[pin]
        kind: Kind<F>,
    }
}

pin_project! {
    #[project = KindProj]
    #[derive(Debug)]
    enum Kind<F> {
        Sent { #[pin] future: F, pending: Option<Pending> },
        Rejected,
    }
}

impl<F> ResponseFuture<F> {
    #[inline]
    pub(crate) fn sent(future: F, pending: Pending) -> Self {
        Self {
            kind: Kind::Sent {
                future,
                pending: Some(pending),
            },
        }
    }

    #[cold]
    pub(crate) fn rejected() -> Self {
        Self {
            kind: Kind::Rejected,
        }
    }
}

impl<F, B, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<http::Response<B>, E>>,
{
    type Output = Result<http::Response<ResponseBody<B>>, E>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Sent { future, pending } => {
                let output = std::task::ready!(future.poll(cx));
                let mut pending = pending.take();
                Poll::Ready(match output {
                    Ok(response) => {
                        if let (Some(pending), Some(code)) = (
                            pending.as_mut(),
                            head_code(response.status(), response.headers()),
                        ) {
                            pending.settle(code);
                        }
                        Ok(response.map(|body| ResponseBody::new(body, pending)))
                    }
                    Err(error) => {
                        // A transport failure, as tonic's client reports it.
                        if let Some(pending) = pending.as_mut() {
                            pending.settle(Code::Unavailable);
                        }
                        Err(error)
                    }
                })
            }
            KindProj::Rejected => Poll::Ready(Ok(rejection())),
        }
    }
}

/// [`REJECTED_MESSAGE`](super::AdaptiveThrottleLayer::REJECTED_MESSAGE) as `grpc-message` carries
/// it (percent-encoded as tonic encodes it).
const REJECTED_MESSAGE_ENCODED: &str = "throttled%20by%20the%20client:%20adaptive%20throttling%20rejected%20the%20call%20without%20sending%20it";

/// The trailers-only `UNAVAILABLE` of a rejected call: what
/// `Status::unavailable(REJECTED_MESSAGE).into_http()` answers, from
/// static values (no allocation but the header map's, no encoding: the
/// path every call takes while a backend is down).
#[cold]
fn rejection<B: Default>() -> http::Response<B> {
    let mut response = http::Response::new(B::default());
    let headers = response.headers_mut();
    headers.reserve(3);
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    headers.insert(GRPC_STATUS, HeaderValue::from_static("14"));
    headers.insert(
        GRPC_MESSAGE,
        HeaderValue::from_static(REJECTED_MESSAGE_ENCODED),
    );
    response
}

#[cfg(test)]
mod tests {
    use tonic::Status;

    use super::super::AdaptiveThrottleLayer;
    use super::*;

    #[test]
    fn a_rejection_is_the_response_tonic_would_make_of_the_status() {
        let ours = rejection::<()>();
        let tonic = Status::unavailable(AdaptiveThrottleLayer::REJECTED_MESSAGE).into_http::<()>();
        assert_eq!(ours.status(), tonic.status());
        assert_eq!(ours.headers(), tonic.headers());
        let status = Status::from_header_map(ours.headers()).unwrap();
        assert_eq!(status.code(), Code::Unavailable);
        assert_eq!(status.message(), AdaptiveThrottleLayer::REJECTED_MESSAGE);
    }
}
