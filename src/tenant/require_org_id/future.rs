//! The response future of [`RequireOrgId`](super::RequireOrgId): the inner
//! service's future, or an immediate refusal.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

use super::ResponseBody;
use crate::tenant::OrgIdError;
use crate::tenant::inner_or_rejected::InnerOrRejected;
use crate::tenant::refusal::Refusal;

pin_project! {
    /// The response future of [`RequireOrgId`](super::RequireOrgId): the
    /// inner service's, or an immediate refusal (a gRPC status, or a plain
    /// HTTP error).
    #[derive(Debug)]
    pub struct ResponseFuture<F> {
        #[pin]
        kind: InnerOrRejected<F, Refusal<OrgIdError>>,
    }
}

impl<F> ResponseFuture<F> {
    /// The request reached the inner service, which answers with `future`.
    #[inline]
    pub(super) fn inner(future: F) -> Self {
        Self {
            kind: InnerOrRejected::inner(future),
        }
    }

    /// The request was refused: the inner service is not called.
    #[cold]
    pub(super) fn refused(refusal: Refusal<OrgIdError>) -> Self {
        Self {
            kind: InnerOrRejected::rejected(refusal),
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
        let kind = self.project().kind;
        kind.poll_or_reject(
            cx,
            |output| output.map(|response| response.map(ResponseBody::inner)),
            |refusal| Ok(Refusal::into_response(refusal)),
        )
    }
}
