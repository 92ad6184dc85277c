//! The state shared by both layers' response futures: the inner service's
//! future, or a rejection decided before calling it.

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

impl<F: Future, E: Into<Status>> InnerOrRejected<F, E> {
    #[inline]
    pub(crate) fn inner(future: F) -> Self {
        Self::Inner { future }
    }

    #[inline]
    pub(crate) fn rejected(error: E) -> Self {
        Self::Rejected { error: Some(error) }
    }

    /// Polls the inner future and maps its output with `inner`, or answers
    /// the rejection with `rejected` (the `Status` is built only then).
    #[inline]
    pub(crate) fn poll_with<O>(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        inner: impl FnOnce(F::Output) -> O,
        rejected: impl FnOnce(Status) -> O,
    ) -> Poll<O> {
        match self.project() {
            InnerOrRejectedProj::Inner { future } => future.poll(cx).map(inner),
            InnerOrRejectedProj::Rejected { error } => Poll::Ready(rejected(status(error.take()))),
        }
    }
}

/// The status answering a rejection; `None` means polled after completion.
#[cold]
fn status<E: Into<Status>>(error: Option<E>) -> Status {
    error.map_or_else(
        || Status::internal("tonic_hotpath::tenant future polled after completion"),
        Into::into,
    )
}
