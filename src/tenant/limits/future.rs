//! The response future of [`TenantLimit`](super::TenantLimit).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tonic::Status;

use super::body::TenantLimitBody;
use super::refusal::Refusal;
use super::state::Slot;

pin_project! {
    /// The response future of [`TenantLimit`](super::TenantLimit): the
    /// inner service's future holding the call's in-flight slot (handed to
    /// the response body, or given back if the future fails or is
    /// dropped), or an immediate refusal.
    #[derive(Debug)]
    pub struct TenantLimitFuture<F> {
        #[pin]
        kind: Kind<F>,
    }
}

pin_project! {
    #[project = KindProj]
    #[derive(Debug)]
    enum Kind<F> {
        Inner { #[pin] future: F, slot: Option<Slot> },
        Refused { refusal: Option<Refusal> },
    }
}

impl<F> TenantLimitFuture<F> {
    #[inline]
    pub(crate) fn inner(future: F, slot: Option<Slot>) -> Self {
        Self {
            kind: Kind::Inner { future, slot },
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

impl<F, ResBody, E> Future for TenantLimitFuture<F>
where
    F: Future<Output = Result<http::Response<ResBody>, E>>,
{
    type Output = Result<http::Response<TenantLimitBody<ResBody>>, E>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Inner { future, slot } => future.poll(cx).map(|output| {
                // On an error the slot is given back here; on a response
                // it rides in the body until the body ends.
                let slot = slot.take();
                output.map(|response| response.map(|body| TenantLimitBody::with_slot(body, slot)))
            }),
            KindProj::Refused { refusal } => Poll::Ready(Ok(Refusal::into_response(
                refusal.take().ok_or_else(polled_after_completion),
            ))),
        }
    }
}

/// The status of a future polled again after it answered its refusal.
#[cold]
fn polled_after_completion() -> Status {
    Status::internal("tonic_hotpath::tenant::limits future polled after completion")
}
