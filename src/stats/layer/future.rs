//! The response future of [`CombinedService`]: the
//! response headers (or the status that ends the call before any body),
//! the response body wrapped, and `End` when the call is dropped first or
//! the service fails.
//!
//! [`CombinedService`]: crate::stats::CombinedService

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::Response;
use pin_project_lite::pin_project;

use super::body::ObservedBody;
use super::context::RpcContext;
use super::ending::Ending;
use super::headers::{AcceptedEncodings, GRPC_ENCODING};
use super::messages::BodyEncoding;
use super::record_ref::RecordRef;
use super::status::{server_error_status, transport_error_code};
use crate::stats::StatsHandler;
use crate::stats::event::RpcError;
use crate::wire::headers::first_value;
use tower::BoxError;

pin_project! {
    /// The response future of [`CombinedService`]: reports
    /// the response headers (or a trailers-only status) and wraps the
    /// response body; if dropped before completing, delivers `End`
    /// (`Cancelled`, or `DeadlineExceeded` past the request's deadline).
    /// For a request that is not gRPC it only passes the response through.
    ///
    /// Like most futures, it panics if polled again after it completed.
    pub struct ResponseFuture<F, H: StatsHandler> {
        #[pin]
        inner: F,
        state: FutureState<H>,
        // Current while the inner future is polled (server, `otel`).
        context: RpcContext,
    }

    impl<F, H: StatsHandler> PinnedDrop for ResponseFuture<F, H> {
        fn drop(this: Pin<&mut Self>) {
            if let FutureState::Observing { recorder, .. } =
                std::mem::replace(this.project().state, FutureState::Done)
            {
                recorder.close(|rpc| rpc.end(Ending::Dropped));
            }
        }
    }
}

/// What a [`ResponseFuture`] does with the response.
enum FutureState<H: StatsHandler> {
    /// A gRPC call: report it. The record moves into the response body on
    /// completion.
    Observing {
        recorder: RecordRef<H>,
        side: ObservedSide,
    },
    /// Not gRPC: pass the response through untouched.
    Passthrough,
    /// Completed.
    Done,
}

/// The side of an observed call, with what the response is judged by.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ObservedSide {
    Server,
    /// The encodings the client accepts in the response.
    Client {
        accepted: AcceptedEncodings,
    },
}

impl<F, H: StatsHandler> ResponseFuture<F, H> {
    pub(crate) fn observing(
        inner: F,
        recorder: RecordRef<H>,
        context: RpcContext,
        side: ObservedSide,
    ) -> Self {
        Self {
            inner,
            state: FutureState::Observing { recorder, side },
            context,
        }
    }

    pub(crate) fn passthrough(inner: F) -> Self {
        Self {
            inner,
            state: FutureState::Passthrough,
            context: RpcContext::default(),
        }
    }
}

impl<F, H: StatsHandler> fmt::Debug for ResponseFuture<F, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            FutureState::Observing { side, .. } => match side {
                ObservedSide::Server => "observing server rpc",
                ObservedSide::Client { .. } => "observing client rpc",
            },
            FutureState::Passthrough => "passthrough",
            FutureState::Done => "done",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish_non_exhaustive()
    }
}

impl<F, H, ResBody, E> Future for ResponseFuture<F, H>
where
    F: Future<Output = Result<Response<ResBody>, E>>,
    ResBody: http_body::Body,
    E: Into<BoxError>,
    H: StatsHandler,
{
    type Output = Result<Response<ObservedBody<ResBody, H>>, BoxError>;

    // Always inlined into the caller's poll, like the body wrapper's
    // `poll_frame`: the completed path is a handful of branches.
    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = {
            let _entered = this.context.enter::<H>();
            std::task::ready!(this.inner.poll(cx))
        };
        let (mut recorder, side) = match std::mem::replace(this.state, FutureState::Done) {
            FutureState::Observing { recorder, side } => (recorder, side),
            FutureState::Passthrough => {
                return Poll::Ready(
                    result
                        .map(|response| response.map(ObservedBody::passthrough))
                        .map_err(Into::into),
                );
            }
            FutureState::Done => panic!("ResponseFuture polled after completion"),
        };
        match result {
            Ok(response) => {
                if let ObservedSide::Client { accepted } = side {
                    refuse_unaccepted_encoding(&mut recorder, accepted, response.headers());
                }
                let body_is_empty = response.body().is_end_stream();
                recorder.with(|rpc| {
                    rpc.response_headers(response.status(), response.headers(), body_is_empty)
                });
                let direction = recorder.response_direction();
                let encoding = BodyEncoding::of(response.headers());
                let context = std::mem::take(this.context);
                Poll::Ready(Ok(response.map(|body| {
                    ObservedBody::new(body, recorder, direction, encoding, true).in_context(context)
                })))
            }
            Err(error) => {
                let error: BoxError = error.into();
                service_failed(recorder, side, &*error);
                Poll::Ready(Err(error))
            }
        }
    }
}

/// tonic's client fails a call whose response is compressed with an
/// encoding it does not accept (`Unimplemented`), before anything else.
#[inline(always)]
fn refuse_unaccepted_encoding<H: StatsHandler>(
    recorder: &mut RecordRef<H>,
    accepted: AcceptedEncodings,
    headers: &http::HeaderMap,
) {
    if let Some(encoding) = first_value(headers, &GRPC_ENCODING)
        && !accepted.accepts(encoding.as_bytes())
    {
        recorder.with(|rpc| rpc.refuse_encoding(encoding.as_bytes()));
    }
}

/// The inner service failed instead of answering: the RPC ends with the
/// status the peer's caller sees for it (see [`server_error_status`] and
/// [`transport_error_code`]).
#[cold]
fn service_failed<H: StatsHandler>(
    recorder: RecordRef<H>,
    side: ObservedSide,
    error: &(dyn std::error::Error + 'static),
) {
    let service_error = RpcError::Service {
        message: error.to_string(),
    };
    match side {
        ObservedSide::Server => {
            let (code, message) = server_error_status(error);
            recorder.close(|rpc| {
                rpc.end(Ending::Failed {
                    code,
                    message,
                    error: service_error,
                });
            });
        }
        ObservedSide::Client { .. } => {
            let code = transport_error_code(error);
            recorder.close(|rpc| {
                rpc.end(Ending::Failed {
                    code,
                    message: Cow::Borrowed(""),
                    error: service_error,
                });
            });
        }
    }
}
