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
    pub(crate) fn inner(future: F) -> Self {
        Self::Inner { future }
    }

    pub(crate) fn rejected(error: E) -> Self {
        Self::Rejected { error: Some(error) }
    }

    /// Polls the inner future, or yields the rejection as a `Status`.
    pub(crate) fn poll_or_status(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<F::Output, Status>> {
        match self.project() {
            InnerOrRejectedProj::Inner { future } => future.poll(cx).map(Ok),
            InnerOrRejectedProj::Rejected { error } => Poll::Ready(Err(error.take().map_or_else(
                || Status::internal("tonic_hotpath::tenant future polled after completion"),
                Into::into,
            ))),
        }
    }
}
