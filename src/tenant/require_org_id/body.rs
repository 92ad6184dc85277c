//! The response body of [`RequireOrgId`](super::RequireOrgId), and of
//! `TenantLimit` with the call's in-flight slot: the inner service's body,
//! or the body of a refusal.

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
    /// # What the body carries: `G`
    ///
    /// The inner body travels with a guard `G`, dropped as soon as the body
    /// ends (its last frame or an error was read) or is dropped, whichever
    /// comes first; `G::default()` holds nothing. `RequireOrgId` carries
    /// nothing (`()`, the default, which costs nothing). The per-tenant
    /// limits layer's body (`limits::ResponseBody<B>`, feature
    /// `limits`) is this type carrying the call's in-flight slot
    /// (`limits::InFlightSlot`), so that the slot is given back
    /// when the call ends however it ends.
    ///
    /// ```
    /// use http_body::Body as _;
    /// use tonic_hotpath::tenant::require_org_id::ResponseBody;
    ///
    /// let refused = ResponseBody::<String>::default();
    /// assert!(refused.is_end_stream());
    /// let inner: ResponseBody<String> = ResponseBody::inner(String::from("payload"));
    /// assert_eq!(inner.size_hint().exact(), Some(7));
    /// assert_eq!(inner.into_inner().as_deref(), Some("payload"));
    /// ```
    #[derive(Debug)]
    pub struct ResponseBody<B, G = ()> {
        #[pin]
        kind: Kind<B, G>,
    }
}

pin_project! {
    #[project = KindProj]
    #[derive(Debug)]
    enum Kind<B, G> {
        Inner { #[pin] body: B, guard: G },
        // A refusal's text until sent, then (or for a gRPC refusal, whose
        // status is in the headers) nothing.
        Refused { text: Option<Bytes> },
    }
}

impl<B, G> Default for ResponseBody<B, G> {
    /// The body of a gRPC refusal: empty.
    fn default() -> Self {
        Self {
            kind: Kind::Refused { text: None },
        }
    }
}

impl<B, G: Default> ResponseBody<B, G> {
    /// Wraps the inner service's response body, carrying `G::default()`:
    /// nothing (for `TenantLimit`, no slot: a call the layer did not
    /// count).
    ///
    /// Where nothing else fixes `G`, name the type: `ResponseBody::<B>::inner`
    /// (or annotate the binding), which takes `G`'s default, `()`.
    pub fn inner(body: B) -> Self {
        Self::guarded(body, G::default())
    }
}

impl<B, G> ResponseBody<B, G> {
    /// Wraps the inner body with `guard`, dropped when the body ends or is
    /// dropped.
    #[inline]
    pub(crate) fn guarded(body: B, guard: G) -> Self {
        Self {
            kind: Kind::Inner { body, guard },
        }
    }

    /// The body of a plain HTTP refusal: `text`, in one frame.
    pub(crate) fn refusal_text(text: Bytes) -> Self {
        Self {
            kind: Kind::Refused { text: Some(text) },
        }
    }

    /// The inner service's body (what it carried dropped now); `None` for
    /// a refusal.
    pub fn into_inner(self) -> Option<B> {
        match self.kind {
            Kind::Inner { body, .. } => Some(body),
            Kind::Refused { .. } => None,
        }
    }
}

impl<B, G> Body for ResponseBody<B, G>
where
    B: Body,
    B::Data: From<Bytes>,
    G: Default,
{
    type Data = B::Data;
    type Error = B::Error;

    #[inline]
    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        match self.project().kind.project() {
            KindProj::Inner { body, guard } => {
                let polled = body.poll_frame(cx);
                if let Poll::Ready(None | Some(Err(_))) = polled {
                    // The call is over: what the body carries is dropped
                    // now (a slot is free), before the server gets round
                    // to dropping the body. Nothing at all for `()`.
                    drop(std::mem::take(guard));
                }
                polled
            }
            KindProj::Refused { text } => {
                Poll::Ready(text.take().map(|text| Ok(Frame::data(text.into()))))
            }
        }
    }

    #[inline]
    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner { body, .. } => body.is_end_stream(),
            Kind::Refused { text } => text.is_none(),
        }
    }

    #[inline]
    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner { body, .. } => body.size_hint(),
            Kind::Refused { text } => {
                SizeHint::with_exact(text.as_ref().map_or(0, |text| text.len() as u64))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

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

    /// Counts its drops (`None`, a default, counts nothing).
    #[derive(Debug, Default)]
    struct Guard(Option<Arc<AtomicUsize>>);

    impl Drop for Guard {
        fn drop(&mut self) {
            if let Some(drops) = &self.0 {
                drops.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn guarded<B>(body: B) -> (ResponseBody<B, Guard>, Arc<AtomicUsize>) {
        let drops = Arc::new(AtomicUsize::new(0));
        let body = ResponseBody::guarded(body, Guard(Some(Arc::clone(&drops))));
        (body, drops)
    }

    #[tokio::test]
    async fn the_guard_is_dropped_once_when_the_last_frame_is_read() {
        let (mut body, drops) = guarded(http_body_util::Full::new(Bytes::from_static(b"ab")));
        let frame = body.frame().await.unwrap().unwrap();
        assert_eq!(frame.into_data().unwrap(), "ab");
        assert_eq!(drops.load(Ordering::Relaxed), 0, "held until the end");
        assert!(body.frame().await.is_none());
        assert_eq!(drops.load(Ordering::Relaxed), 1, "dropped at the end");
        drop(body);
        assert_eq!(drops.load(Ordering::Relaxed), 1, "and only once");
    }

    #[tokio::test]
    async fn the_guard_is_dropped_on_an_error_or_with_the_body() {
        let reset: Result<Frame<Bytes>, &str> = Err("reset");
        let failing = http_body_util::StreamBody::new(tokio_stream::iter([reset]));
        let (mut body, drops) = guarded(failing);
        assert!(body.frame().await.unwrap().is_err());
        assert_eq!(drops.load(Ordering::Relaxed), 1, "dropped on the error");

        let (body, drops) = guarded(String::from("never read"));
        drop(body);
        assert_eq!(drops.load(Ordering::Relaxed), 1, "dropped with the body");
        let (body, drops) = guarded(String::from("unwrapped"));
        assert_eq!(body.into_inner().as_deref(), Some("unwrapped"));
        assert_eq!(drops.load(Ordering::Relaxed), 1, "dropped by into_inner");
    }
}
