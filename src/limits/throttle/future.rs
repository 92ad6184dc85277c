//! The response future of [`AdaptiveThrottle`](super::AdaptiveThrottle).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tonic::{Code, Status};

use super::body::ResponseBody;
use super::layer::AdaptiveThrottleLayer;
use super::state::{Pending, head_code};

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
            KindProj::Rejected => Poll::Ready(Ok(Status::unavailable(
                AdaptiveThrottleLayer::REJECTED_MESSAGE,
            )
            .into_http())),
        }
    }
}
