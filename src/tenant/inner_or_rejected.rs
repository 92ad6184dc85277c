//! The state shared by the response futures of
//! [`RequireOrgId`](super::RequireOrgId) and [`SetOrgId`](super::SetOrgId):
//! the inner service's future, or a rejection decided before calling it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tonic::Status;

pin_project! {
    /// Either the inner future or the error that kept the request from it.
    #[project = InnerOrRejectedProj]
    #[derive(Debug)]
    pub(crate) enum InnerOrRejected<F, E> {
        Inner { #[pin] future: F },
        Rejected { error: Option<E> },
    }
}

impl<F, E> InnerOrRejected<F, E> {
    #[inline]
    pub(crate) fn inner(future: F) -> Self {
        Self::Inner { future }
    }

    #[inline]
    pub(crate) fn rejected(error: E) -> Self {
        Self::Rejected { error: Some(error) }
    }
}

impl<F: Future, E> InnerOrRejected<F, E> {
    /// Polls the inner future and maps its output with `inner`, or answers
    /// the rejection with `rejected`: `Ok(error)`, or `Err(status)` when
    /// polled again after the rejection was answered.
    #[inline]
    pub(crate) fn poll_or_reject<O>(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        inner: impl FnOnce(F::Output) -> O,
        rejected: impl FnOnce(Result<E, Status>) -> O,
    ) -> Poll<O> {
        match self.project() {
            InnerOrRejectedProj::Inner { future } => future.poll(cx).map(inner),
            InnerOrRejectedProj::Rejected { error } => {
                Poll::Ready(rejected(error.take().ok_or_else(polled_after_completion)))
            }
        }
    }

    /// [`poll_or_reject`](Self::poll_or_reject) for a rejection answered
    /// with its `Status` (built only then).
    #[inline]
    pub(crate) fn poll_with<O>(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        inner: impl FnOnce(F::Output) -> O,
        rejected: impl FnOnce(Status) -> O,
    ) -> Poll<O>
    where
        E: Into<Status>,
    {
        self.poll_or_reject(cx, inner, |error| {
            rejected(error.map_or_else(|status| status, Into::into))
        })
    }
}

/// The status of a future polled again after it answered its rejection.
#[cold]
fn polled_after_completion() -> Status {
    Status::internal("tonic_hotpath::tenant future polled after completion")
}
