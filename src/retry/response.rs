//! [`ResponseBody`]: the committed attempt's response body, read through
//! so that a call that ends `OK` refills the channel's retry budget.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use tonic::Code;

use super::throttle::Throttle;
use crate::wire::status::status_code;

pin_project! {
    /// The response body of [`Retry`](super::Retry): the answering
    /// attempt's own, unchanged. Where the channel has a retry budget, its
    /// trailers are read for `grpc-status: 0`, a call that succeeded.
    #[derive(Debug)]
    pub struct ResponseBody<B> {
        #[pin]
        inner: B,
        throttle: Option<Arc<Throttle>>,
    }
}

impl<B> ResponseBody<B> {
    pub(crate) fn new(inner: B, throttle: Option<Arc<Throttle>>) -> Self {
        Self { inner, throttle }
    }
}

impl<B: Body> Body for ResponseBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    #[inline]
    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let this = self.project();
        let frame = ready!(this.inner.poll_frame(cx));
        if let Some(Ok(frame)) = &frame
            && let Some(trailers) = frame.trailers_ref()
            && let Some(throttle) = this.throttle.take()
            && status_code(trailers) == Some(Code::Ok)
        {
            throttle.succeeded();
        }
        Poll::Ready(frame)
    }

    #[inline]
    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    #[inline]
    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
