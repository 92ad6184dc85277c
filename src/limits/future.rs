//! The response future of [`TenantLimit`](super::TenantLimit).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tonic::Status;
use tower::Service;

use super::body::ResponseBody;
use super::budget::TenantBudget;
use super::keeper::AnswerDue;
use super::limiter::{Limiter, NotYet};
use super::refusal::Refusal;
use super::state::Slot;

pin_project! {
    /// The response future of [`TenantLimit`](super::TenantLimit): the
    /// inner service's future holding the call's in-flight slot (handed to
    /// the response body, or given back if the future fails or is
    /// dropped), or an immediate refusal. With a shared rate keeper
    /// (feature `limits-redis`), a call its tenant's lease cannot judge
    /// yet first waits here for the lease's answer (see the module docs, "Across a
    /// fleet"), holding the inner service, which it calls only if the
    /// call is admitted.
    pub struct ResponseFuture<S, B>
    where
        S: Service<http::Request<B>>,
    {
        #[pin]
        kind: Kind<S, B>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<S, B>
    where
        S: Service<http::Request<B>>,
    {
        Inner { #[pin] future: S::Future, slot: Option<Slot> },
        AnswerDue { waiting: Option<Box<Waiting<S, B>>> },
        Refused { refusal: Option<Refusal> },
    }
}

/// A call waiting for its tenant's answer from a shared rate keeper: the
/// inner service (ready: polled ready before the call), the request, and
/// the limiter that judges it again.
struct Waiting<S, B> {
    answer: AnswerDue,
    service: S,
    request: http::Request<B>,
    limiter: Arc<Limiter>,
}

impl<S, B> ResponseFuture<S, B>
where
    S: Service<http::Request<B>>,
{
    #[inline]
    pub(crate) fn inner(future: S::Future, slot: Option<Slot>) -> Self {
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

    /// Waits on `answer`, then judges `request` again with `limiter`
    /// and, admitted, calls `service` (ready) with it.
    #[cold]
    pub(crate) fn answer_due(
        answer: AnswerDue,
        service: S,
        request: http::Request<B>,
        limiter: Arc<Limiter>,
    ) -> Self {
        Self {
            kind: Kind::AnswerDue {
                waiting: Some(Box::new(Waiting {
                    answer,
                    service,
                    request,
                    limiter,
                })),
            },
        }
    }
}

/// Calls `service` with `request`, the call admitted with `slot` and, if
/// its tenants have a work rate, `budget` (put into its extensions).
#[inline]
pub(crate) fn call_admitted<S, B>(
    service: &mut S,
    mut request: http::Request<B>,
    slot: Option<Slot>,
    budget: Option<TenantBudget>,
) -> ResponseFuture<S, B>
where
    S: Service<http::Request<B>>,
{
    if let Some(budget) = budget {
        request.extensions_mut().insert(budget);
    }
    ResponseFuture::inner(service.call(request), slot)
}

impl<S, B, ResBody> Future for ResponseFuture<S, B>
where
    S: Service<http::Request<B>, Response = http::Response<ResBody>>,
{
    type Output = Result<http::Response<ResponseBody<ResBody>>, S::Error>;

    #[inline]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            let next = match self.as_mut().project().kind.project() {
                KindProj::Inner { future, slot } => {
                    return future.poll(cx).map(|output| {
                        // On an error the slot is given back here; on a
                        // response it rides in the body until the body
                        // ends.
                        let slot = slot.take();
                        output.map(|response| {
                            response.map(|body| ResponseBody::with_slot(body, slot))
                        })
                    });
                }
                KindProj::Refused { refusal } => {
                    return Poll::Ready(Ok(Refusal::into_response(
                        refusal.take().ok_or_else(polled_after_completion),
                    )));
                }
                KindProj::AnswerDue { waiting } => {
                    if let Some(waiting) = waiting.as_mut() {
                        std::task::ready!(waiting.answer.answered.as_mut().poll(cx));
                    }
                    let Some(answer_due) = waiting.take() else {
                        return Poll::Ready(Ok(Refusal::into_response(Err(
                            polled_after_completion(),
                        ))));
                    };
                    let Waiting {
                        answer,
                        mut service,
                        request,
                        limiter,
                    } = *answer_due;
                    let mut budget = None;
                    // Judged again; a federated call may wait for its next
                    // tenant's answer, within the same deadline.
                    match limiter.admit_again(&request, &mut budget, answer.deadline) {
                        Ok(slot) => call_admitted(&mut service, request, slot, budget),
                        Err(NotYet::Refused(refused)) => {
                            ResponseFuture::refused(Refusal::of(request.headers(), refused))
                        }
                        Err(NotYet::AnswerDue(answer)) => {
                            ResponseFuture::answer_due(answer, service, request, limiter)
                        }
                    }
                }
            };
            self.set(next);
        }
    }
}

impl<S, B> fmt::Debug for ResponseFuture<S, B>
where
    S: Service<http::Request<B>>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.kind {
            Kind::Inner { .. } => "calling the inner service",
            Kind::AnswerDue { .. } => "waiting for the tenant's lease answer",
            Kind::Refused { .. } => "refused",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish_non_exhaustive()
    }
}

/// The status of a future polled again after it answered its refusal.
#[cold]
pub(crate) fn polled_after_completion() -> Status {
    Status::internal("tonic_hotpath::limits future polled after completion")
}
