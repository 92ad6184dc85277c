//! The body wrapper that turns gRPC messages into payload events and, on
//! the response body, delivers trailers and `End`.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use tonic::Code;

use super::StatsHandler;
use super::event::{Direction, RpcError};
use super::frame::FrameDecoder;
use super::pool::RecordRef;
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
        recorder: RecordRef<H>,
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
        recorder: RecordRef<H>,
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

    // Always inlined: the hot part is a few branches around the inner poll
    // (cold paths are out of line), and a call per frame cost more than
    // the work (callgrind, in-process unary: ~120 instructions per RPC).
    #[inline(always)]
    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.project();
        // The frame is observed by reference and handed back as polled:
        // it is never moved out of (and rebuilt into) the return value.
        let poll = this.inner.poll_frame(cx);
        if let Poll::Ready(result) = &poll {
            let recorder = &**this.recorder;
            let direction = *this.direction;
            match result {
                Some(Ok(frame)) => {
                    if let Some(data) = frame.data_ref() {
                        let mut batch = recorder.payloads(direction);
                        let decoded = this.decoder.push(data, |header| batch.payload(header));
                        drop(batch);
                        if let Err(error) = decoded {
                            recorder.record_error(RpcError::Frame { direction, error }, None);
                        }
                    } else if let Some(trailers) = frame.trailers_ref() {
                        if *this.ends_rpc {
                            let error = framing_error_at_end(this.decoder, direction);
                            recorder.trailers_then_end(trailers, error);
                            // Ended: dropping the body has nothing left to do.
                            *this.ends_rpc = false;
                        }
                    }
                }
                Some(Err(error)) => body_failed(recorder, error, direction, this.ends_rpc),
                None => body_complete(recorder, this.decoder, direction, this.ends_rpc),
            }
        }
        poll
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The body failed: the error is recorded (and ends the RPC on the
/// response body).
#[cold]
fn body_failed<H: StatsHandler, E: std::error::Error + 'static>(
    recorder: &RpcRecorder<H>,
    error: &E,
    direction: Direction,
    ends_rpc: &mut bool,
) {
    let code = classify_error(error);
    let message = error.to_string();
    let error = RpcError::Body { direction, message };
    if *ends_rpc {
        recorder.end(Some((error, Some(code))), code, None);
        *ends_rpc = false;
    } else {
        recorder.record_error(error, Some(code));
    }
}

/// The body ended without trailers: a framing error is recorded, and on
/// the response body the RPC ends `Unknown`, as tonic reports a missing
/// status.
fn body_complete<H: StatsHandler>(
    recorder: &RpcRecorder<H>,
    decoder: &FrameDecoder,
    direction: Direction,
    ends_rpc: &mut bool,
) {
    let error = framing_error_at_end(decoder, direction);
    if *ends_rpc {
        let error = error.map(|error| (error, None));
        recorder.end(error, Code::Unknown, Some(RpcError::MissingStatus));
        *ends_rpc = false;
    } else if let Some(error) = error {
        recorder.record_error(error, None);
    }
}

/// The body is complete: a message cut short is a framing error.
fn framing_error_at_end(decoder: &FrameDecoder, direction: Direction) -> Option<RpcError> {
    decoder
        .finish()
        .err()
        .map(|error| RpcError::Frame { direction, error })
}
