//! The response future of [`AdaptiveLimit`](super::AdaptiveLimit).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

use super::admission::Place;
use super::body::ResponseBody;
use crate::limits::future::polled_after_completion;
use crate::limits::overload::Refusal;

pin_project! {
    /// The response future of [`AdaptiveLimit`](super::AdaptiveLimit):
    /// the inner service's future holding the call's place (handed to the
    /// response body, or given back if the future fails or is dropped),
    /// or an immediate refusal.
    pub struct ResponseFuture<F> {
        #[pin]
        kind: Kind<F>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F> {
        Inner { #[pin] future: F, place: Option<Place> },
        Refused { refusal: Option<Refusal> },
    }
}

impl<F> ResponseFuture<F> {
    #[inline]
    pub(crate) fn inner(future: F, place: Option<Place>) -> Self {
        Self {
            kind: Kind::Inner { future, place },
        }
    }

    #[cold]
    pub(crate) fn refused(refusal: Refusal) -> Self {
        Self {
            kind: Kind::Refused {
                refusal: Some(refusal),
            },
        }
    }
}

impl<F, ResBody, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<http::Response<ResBody>, E>>,
{
    type Output = Result<http::Response<ResponseBody<ResBody>>, E>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Inner { future, place } => future.poll(cx).map(|output| {
                // On an error the place is given back here (no sample);
                // on a response it rides in the body until the body ends.
                let place = place.take();
                output.map(|response| response.map(|body| ResponseBody::with_place(body, place)))
            }),
            KindProj::Refused { refusal } => Poll::Ready(Ok(Refusal::into_response(
                refusal.take().ok_or_else(polled_after_completion),
            ))),
        }
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.kind {
            Kind::Inner { .. } => "calling the inner service",
            Kind::Refused { .. } => "refused",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish_non_exhaustive()
    }
}
