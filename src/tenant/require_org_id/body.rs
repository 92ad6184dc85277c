//! The response body of [`RequireOrgId`](super::RequireOrgId): the inner
//! service's body, or the body of a refusal.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

pin_project! {
    /// The response body of [`RequireOrgId`](super::RequireOrgId): the
    /// inner service's body when the request reached it, or the body of a
    /// refusal: none for a gRPC refusal (its status travels in the
    /// response headers, as a trailers-only response), the error's text for
    /// a plain HTTP one.
    ///
    /// The inner body needs no `Default`, so the layer can sit above any
    /// other layer (tonic's `InterceptorLayer`, a stats layer, ...). It adds
    /// no allocation and forwards every frame, size hint and error
    /// unchanged. Its data is the inner body's (anything a `Bytes` converts
    /// into, as `Bytes` itself), so that a refusal's text can be sent.
    ///
    /// ```
    /// use http_body::Body as _;
    /// use tonic_hotpath::tenant::require_org_id::ResponseBody;
    ///
    /// let refused = ResponseBody::<String>::default();
    /// assert!(refused.is_end_stream());
    /// let inner = ResponseBody::inner(String::from("payload"));
    /// assert_eq!(inner.size_hint().exact(), Some(7));
    /// ```
    #[derive(Debug)]
    pub struct ResponseBody<B> {
        #[pin]
        kind: Kind<B>,
    }
}

pin_project! {
    #[project = KindProj]
    #[derive(Debug)]
    enum Kind<B> {
        Inner { #[pin] body: B },
        Refused { text: RefusalText },
    }
}

impl<B> Default for ResponseBody<B> {
    /// The body of a gRPC refusal: empty.
    fn default() -> Self {
        Self {
            kind: Kind::Refused {
                text: RefusalText::default(),
            },
        }
    }
}

impl<B> ResponseBody<B> {
    /// Wraps the inner service's response body.
    pub fn inner(body: B) -> Self {
        Self {
            kind: Kind::Inner { body },
        }
    }

    /// The body of a plain HTTP refusal: `text`, in one frame.
    pub(crate) fn refusal_text(text: Bytes) -> Self {
        Self {
            kind: Kind::Refused {
                text: RefusalText(Some(text)),
            },
        }
    }

    /// The inner service's body; `None` for a refusal.
    pub fn into_inner(self) -> Option<B> {
        match self.kind {
            Kind::Inner { body } => Some(body),
            Kind::Refused { .. } => None,
        }
    }
}

impl<B> Body for ResponseBody<B>
where
    B: Body,
    B::Data: From<Bytes>,
{
    type Data = B::Data;
    type Error = B::Error;

    #[inline]
    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        match self.project().kind.project() {
            KindProj::Inner { body } => body.poll_frame(cx),
            KindProj::Refused { text } => text.poll_frame(),
        }
    }

    #[inline]
    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner { body } => body.is_end_stream(),
            Kind::Refused { text } => text.is_end_stream(),
        }
    }

    #[inline]
    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner { body } => body.size_hint(),
            Kind::Refused { text } => text.size_hint(),
        }
    }
}

/// The body of a tenant layer's refusal: its text until sent, then (or
/// for a gRPC refusal, whose status is in the headers) nothing.
#[derive(Debug, Default)]
pub(crate) struct RefusalText(pub(crate) Option<Bytes>);

impl RefusalText {
    #[inline]
    pub(crate) fn poll_frame<D: From<Bytes>, E>(&mut self) -> Poll<Option<Result<Frame<D>, E>>> {
        Poll::Ready(self.0.take().map(|text| Ok(Frame::data(text.into()))))
    }

    #[inline]
    pub(crate) fn is_end_stream(&self) -> bool {
        self.0.is_none()
    }

    #[inline]
    pub(crate) fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.0.as_ref().map_or(0, |text| text.len() as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt as _;

    #[tokio::test]
    async fn a_plain_http_refusal_sends_its_text_once() {
        let body = ResponseBody::<String>::refusal_text(Bytes::from_static(b"no org id\n"));
        assert!(!body.is_end_stream());
        assert_eq!(body.size_hint().exact(), Some(10));
        let collected = body.collect().await.unwrap().to_bytes();
        assert_eq!(collected, "no org id\n");
    }
}
