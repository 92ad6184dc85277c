//! The response body of [`CallMetrics`](super::CallMetrics).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use super::ReportConfig;
use crate::orca::recorder::scope::CallScope;

pin_project! {
    /// The response body of [`CallMetrics`](super::CallMetrics): the inner
    /// body, polled with its call current (a response stream's items may
    /// record), and the report added to its trailers when the handler took
    /// the call's recorder. Frames, size hints and errors pass unchanged;
    /// no allocation unless a report is written.
    pub struct ResponseBody<B> {
        #[pin]
        inner: B,
        call: Option<(CallScope, Arc<ReportConfig>)>,
    }
}

impl<B> ResponseBody<B> {
    pub(super) fn new(inner: B, scope: CallScope, config: Arc<ReportConfig>) -> Self {
        Self {
            inner,
            call: Some((scope, config)),
        }
    }

    /// The body of a response that is complete without it (trailers-only).
    pub(super) fn passthrough(inner: B) -> Self {
        Self { inner, call: None }
    }
}

impl<B: Body> Body for ResponseBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        let Some((scope, _)) = this.call.as_mut() else {
            return this.inner.poll_frame(cx);
        };
        let inner = this.inner;
        let frame = match scope.enter(|| inner.poll_frame(cx)) {
            Poll::Ready(Some(Ok(frame))) => frame,
            Poll::Ready(other) => {
                // The end without trailers, or an error: nothing to write
                // the report into.
                *this.call = None;
                return Poll::Ready(other);
            }
            Poll::Pending => return Poll::Pending,
        };
        let frame = match frame.into_trailers() {
            Ok(mut trailers) => {
                let (scope, config) = this.call.take().expect("checked above");
                if let Some(recorder) = scope.recorder() {
                    config.write_report(recorder, &mut trailers);
                }
                Frame::trailers(trailers)
            }
            Err(frame) => frame,
        };
        Poll::Ready(Some(Ok(frame)))
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

impl<B> std::fmt::Debug for ResponseBody<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseBody")
            .field("call", &self.call)
            .finish_non_exhaustive()
    }
}
