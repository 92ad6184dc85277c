//! The response future of [`CallMetrics`](super::CallMetrics).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::Response;
use pin_project_lite::pin_project;

use super::{ReportConfig, ResponseBody};
use crate::orca::recorder::scope::CallScope;
use crate::wire::status::has_status;

pin_project! {
    /// The response future of [`CallMetrics`](super::CallMetrics): polls
    /// the inner service with its call current (so the handler finds its
    /// recorder), then hands the call to the response body; a trailers-only
    /// answer (its status in the headers) gets the report there.
    ///
    /// Like most futures, it panics if polled again after it completed.
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
        call: Option<(CallScope, Arc<ReportConfig>)>,
        // Not gRPC: no call to make current, nothing to report.
        passthrough: bool,
    }
}

impl<F> ResponseFuture<F> {
    pub(super) fn new(inner: F, scope: CallScope, config: Arc<ReportConfig>) -> Self {
        Self {
            inner,
            call: Some((scope, config)),
            passthrough: false,
        }
    }

    /// A request that is not gRPC: the response passes through.
    pub(super) fn passthrough(inner: F) -> Self {
        Self {
            inner,
            call: None,
            passthrough: true,
        }
    }
}

impl<F, B, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<ResponseBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if *this.passthrough {
            let response = std::task::ready!(this.inner.poll(cx))?;
            return Poll::Ready(Ok(response.map(ResponseBody::passthrough)));
        }
        let (scope, _) = this
            .call
            .as_mut()
            .expect("ResponseFuture polled after completion");
        let inner = this.inner;
        let response = match scope.enter(|| inner.poll(cx)) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(result) => result?,
        };
        let (scope, config) = this.call.take().expect("checked above");
        let (mut parts, body) = response.into_parts();
        if has_status(&parts.headers) {
            // Trailers-only: the handler is done; its report rides in the
            // headers, and the body has no trailers to add to.
            if let Some(recorder) = scope.recorder() {
                config.write_report(recorder, &mut parts.headers);
            }
            return Poll::Ready(Ok(Response::from_parts(
                parts,
                ResponseBody::passthrough(body),
            )));
        }
        Poll::Ready(Ok(Response::from_parts(
            parts,
            ResponseBody::new(body, scope, config),
        )))
    }
}

impl<F> std::fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("call", &self.call)
            .finish_non_exhaustive()
    }
}
