//! The body wrapper that turns gRPC messages into payload events and, on
//! the response body, delivers trailers and `End`.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use tonic::Code;

use super::StatsHandler;
use super::event::{Direction, RpcError};
use super::frame::FrameDecoder;
use super::recorder::{RpcRecorder, classify_error};

pin_project! {
    /// A request or response body observed by a [`CombinedLayer`](super::CombinedLayer).
    ///
    /// Data frames pass through untouched; their gRPC message prefixes are
    /// decoded incrementally and reported as `InPayload` / `OutPayload`.
    /// On the response body, trailers are reported and `End` is delivered
    /// at trailers, at end of stream, on error, or when the body is dropped
    /// first (then with `Cancelled` unless a status was already seen).
    pub struct ObservedBody<B, H: StatsHandler> {
        #[pin]
        inner: B,
        recorder: Arc<RpcRecorder<H>>,
        decoder: FrameDecoder,
        direction: Direction,
        ends_rpc: bool,
    }

    impl<B, H: StatsHandler> PinnedDrop for ObservedBody<B, H> {
        fn drop(this: Pin<&mut Self>) {
            if this.ends_rpc {
                this.recorder.end_dropped();
            }
        }
    }
}

impl<B, H: StatsHandler> std::fmt::Debug for ObservedBody<B, H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObservedBody")
            .field("direction", &self.direction)
            .field("ends_rpc", &self.ends_rpc)
            .field("decoder", &self.decoder)
            .finish_non_exhaustive()
    }
}

impl<B, H: StatsHandler> ObservedBody<B, H> {
    /// A body whose messages are reported in `direction`; the response body
    /// (`ends_rpc`) also completes the RPC.
    pub(crate) fn new(
        inner: B,
        recorder: Arc<RpcRecorder<H>>,
        direction: Direction,
        ends_rpc: bool,
    ) -> Self {
        Self {
            inner,
            decoder: FrameDecoder::with_max_message_len(recorder.max_message_len()),
            recorder,
            direction,
            ends_rpc,
        }
    }
}

impl<B, H> Body for ObservedBody<B, H>
where
    B: Body<Data = Bytes>,
    B::Error: std::error::Error + 'static,
    H: StatsHandler,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.project();
        let recorder: &RpcRecorder<H> = this.recorder;
        let direction = *this.direction;
        let result = std::task::ready!(this.inner.poll_frame(cx));
        match &result {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    let decoded = this
                        .decoder
                        .push(data, |header| recorder.payload(direction, header));
                    if let Err(error) = decoded {
                        recorder.record_error(RpcError::Frame { direction, error }, None);
                    }
                } else if let Some(trailers) = frame.trailers_ref() {
                    if *this.ends_rpc {
                        recorder.trailers(trailers);
                        end_at_stream_end(recorder, this.decoder, direction);
                    }
                }
            }
            Some(Err(error)) => {
                let code = classify_error(error);
                let message = error.to_string();
                recorder.record_error(RpcError::Body { direction, message }, Some(code));
                if *this.ends_rpc {
                    recorder.end(code, None);
                }
            }
            None => {
                if *this.ends_rpc {
                    end_at_stream_end(recorder, this.decoder, direction);
                } else if let Err(error) = this.decoder.finish() {
                    recorder.record_error(RpcError::Frame { direction, error }, None);
                }
            }
        }
        Poll::Ready(result)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The response stream is complete: check framing, then deliver `End` with
/// the status seen (or `Unknown`, as tonic reports a missing status).
fn end_at_stream_end<H: StatsHandler>(
    recorder: &RpcRecorder<H>,
    decoder: &FrameDecoder,
    direction: Direction,
) {
    if let Err(error) = decoder.finish() {
        recorder.record_error(RpcError::Frame { direction, error }, None);
    }
    recorder.end(Code::Unknown, Some(RpcError::MissingStatus));
}
