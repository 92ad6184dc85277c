//! The response body of [`TenantLimit`](super::TenantLimit): the inner
//! body carrying the call's in-flight slot, or the body of a refusal.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use super::state::Slot;
use crate::tenant::body::RefusalText;
use crate::tenant::refusal::RefusalBody;

impl<B> RefusalBody for ResponseBody<B> {
    fn refusal_text(text: Bytes) -> Self {
        ResponseBody::refusal_text(text)
    }
}

pin_project! {
    /// The response body of [`TenantLimit`](super::TenantLimit): the inner
    /// service's body when the call was admitted, or the body of a refusal
    /// (none for gRPC, whose status travels in the response headers as a
    /// trailers-only response; the refusal's text for plain HTTP).
    ///
    /// An admitted call's in-flight slot rides in this body: it is given
    /// back when the body ends (its last frame or an error was read) or
    /// is dropped, however the call ended: OK, an error status, a client
    /// cancel, a deadline, a reset stream. The inner body needs no
    /// `Default`, so the layer sits above or below any other layer; every
    /// frame, size hint and error is forwarded unchanged, and no
    /// allocation is added.
    ///
    /// ```
    /// use http_body::Body as _;
    /// use tonic_hotpath::limits::ResponseBody;
    ///
    /// let refused = ResponseBody::<String>::default();
    /// assert!(refused.is_end_stream());
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
        Inner { #[pin] body: B, slot: Option<Slot> },
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
    /// Wraps the inner service's response body (no slot: a call the layer
    /// did not count).
    pub fn inner(body: B) -> Self {
        Self::with_slot(body, None)
    }

    /// Wraps the inner body with the call's slot, given back when the body
    /// ends or is dropped.
    pub(crate) fn with_slot(body: B, slot: Option<Slot>) -> Self {
        Self {
            kind: Kind::Inner { body, slot },
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

    /// The inner service's body (its slot given back now); `None` for a
    /// refusal.
    pub fn into_inner(self) -> Option<B> {
        match self.kind {
            Kind::Inner { body, .. } => Some(body),
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
            KindProj::Inner { body, slot } => {
                let polled = body.poll_frame(cx);
                if let Poll::Ready(None | Some(Err(_))) = polled {
                    // The call is over: its slot is free now, before the
                    // server gets round to dropping the body.
                    drop(slot.take());
                }
                polled
            }
            KindProj::Refused { text } => text.poll_frame(),
        }
    }

    #[inline]
    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner { body, .. } => body.is_end_stream(),
            Kind::Refused { text } => text.is_end_stream(),
        }
    }

    #[inline]
    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner { body, .. } => body.size_hint(),
            Kind::Refused { text } => text.size_hint(),
        }
    }
}
