//! The response body of [`AdaptiveThrottle`](super::AdaptiveThrottle): the
//! inner body, read for the `grpc-status` of its trailers.

use std::pin::Pin;
use std::task::{Context, Poll};

use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use tonic::Code;

use super::state::Pending;
use crate::wire::status::status_code;

pin_project! {
    /// The response body of [`AdaptiveThrottle`](super::AdaptiveThrottle):
    /// the inner service's body, every frame, size hint and error forwarded
    /// unchanged, or none (its `Default`) for a call the throttle rejected
    /// (whose status travels in the response headers, trailers-only).
    ///
    /// When the call's status was not in the response headers, the body
    /// registers it with the throttle as it passes: the `grpc-status` of
    /// the trailers, `UNKNOWN` for a body that ends without one (tonic's
    /// missing status), `UNAVAILABLE` for a body that fails (a reset
    /// stream, a lost connection); dropped before any of these, the call
    /// counts as an accept.
    ///
    /// ```
    /// use http_body::Body as _;
    /// use tonic_hotpath::limits::throttle::ResponseBody;
    ///
    /// let rejected = ResponseBody::<String>::default();
    /// assert!(rejected.is_end_stream());
    /// ```
    #[derive(Debug)]
    pub struct ResponseBody<B> {
        #[pin]
        inner: Option<B>,
        pending: Option<Pending>,
    }
}

impl<B> Default for ResponseBody<B> {
    fn default() -> Self {
        Self {
            inner: None,
            pending: None,
        }
    }
}

impl<B> ResponseBody<B> {
    /// `inner`, registering its status with `pending` (if the call's
    /// outcome is still unknown).
    #[inline]
    pub(crate) fn new(inner: B, pending: Option<Pending>) -> Self {
        Self {
            inner: Some(inner),
            pending: pending.filter(Pending::is_pending),
        }
    }
}

impl<B: Body> Body for ResponseBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    #[inline]
    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        let Some(inner) = this.inner.as_pin_mut() else {
            return Poll::Ready(None);
        };
        let frame = std::task::ready!(inner.poll_frame(cx));
        if let Some(pending) = this.pending {
            let code = match &frame {
                Some(Ok(frame)) => frame
                    .trailers_ref()
                    .map(|trailers| status_code(trailers).unwrap_or(Code::Unknown)),
                Some(Err(_)) => Some(Code::Unavailable),
                None => Some(Code::Unknown),
            };
            if let Some(code) = code {
                pending.settle(code);
                *this.pending = None;
            }
        }
        Poll::Ready(frame)
    }

    #[inline]
    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(B::is_end_stream)
    }

    #[inline]
    fn size_hint(&self) -> SizeHint {
        self.inner
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), B::size_hint)
    }
}
