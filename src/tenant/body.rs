//! The response body of [`RequireOrgId`](super::RequireOrgId): the inner
//! service's body, or none for a refusal.

use std::pin::Pin;
use std::task::{Context, Poll};

use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

pin_project! {
    /// The response body of [`RequireOrgId`](super::RequireOrgId): the
    /// inner service's body when the request reached it, or no body at all
    /// for a refusal (whose status travels in the response headers, as a
    /// trailers-only gRPC response).
    ///
    /// The inner body needs no `Default`, so the layer can sit above any
    /// other layer (tonic's `InterceptorLayer`, a stats layer, ...). It adds
    /// no allocation and forwards every frame, size hint and error
    /// unchanged.
    ///
    /// ```
    /// use http_body::Body as _;
    /// use tonic_hotpath::tenant::RequireOrgIdBody;
    ///
    /// let refused = RequireOrgIdBody::<String>::default();
    /// assert!(refused.is_end_stream());
    /// let inner = RequireOrgIdBody::inner(String::from("payload"));
    /// assert_eq!(inner.size_hint().exact(), Some(7));
    /// ```
    #[derive(Debug)]
    pub struct RequireOrgIdBody<B> {
        // `None` for a refusal: no data, no trailers.
        #[pin]
        body: Option<B>,
    }
}

impl<B> Default for RequireOrgIdBody<B> {
    /// The body of a refusal.
    fn default() -> Self {
        Self { body: None }
    }
}

impl<B> RequireOrgIdBody<B> {
    /// Wraps the inner service's response body.
    pub fn inner(body: B) -> Self {
        Self { body: Some(body) }
    }

    /// The inner service's body; `None` for a refusal.
    pub fn into_inner(self) -> Option<B> {
        self.body
    }
}

impl<B: Body> Body for RequireOrgIdBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    #[inline]
    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        match self.project().body.as_pin_mut() {
            Some(body) => body.poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    #[inline]
    fn is_end_stream(&self) -> bool {
        self.body.as_ref().is_none_or(Body::is_end_stream)
    }

    #[inline]
    fn size_hint(&self) -> SizeHint {
        self.body
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Body::size_hint)
    }
}
