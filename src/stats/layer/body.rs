//! The body wrapper that turns gRPC messages into payload events and, on
//! the response body, delivers trailers and `End`.

use std::borrow::Cow;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use tonic::Code;

use super::context::RpcContext;
use super::ending::Ending;
use super::messages::{BodyEncoding, BodyMessages};
use super::record_ref::RecordRef;
use super::recorder::RpcEvents;
use super::status::transport_error_code;
use crate::stats::StatsHandler;
use crate::stats::event::{Direction, Payload, RpcError};
use crate::stats::frame::FrameDecoder;

pin_project! {
    /// A request or response body observed by a [`CombinedLayer`].
    ///
    /// Data frames pass through untouched; their gRPC message prefixes are
    /// decoded incrementally, and each message is reported as `InPayload` /
    /// `OutPayload` once its last byte has passed.
    /// On the response body, trailers are reported and `End` is delivered
    /// at trailers, at end of stream, on error, or when the body is dropped
    /// first (then with `Cancelled` unless a status was already seen).
    pub struct ObservedBody<B, H: StatsHandler> {
        #[pin]
        inner: B,
        // `None` once this body has given the record up: the response body
        // does at trailers, end of stream or error (the RPC has ended).
        recorder: Option<RecordRef<H>>,
        messages: BodyMessages,
        direction: Direction,
        ends_rpc: bool,
        // Server response body: the context its frames are produced in
        // (a response stream tonic polls after the handler returned).
        context: RpcContext,
    }

    impl<B, H: StatsHandler> PinnedDrop for ObservedBody<B, H> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            match this.recorder.take() {
                Some(recorder) if *this.ends_rpc => recorder.close(|rpc| rpc.end(Ending::Dropped)),
                Some(recorder) => recorder.release(),
                None => {}
            }
        }
    }
}

impl<B, H: StatsHandler> std::fmt::Debug for ObservedBody<B, H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObservedBody")
            .field("direction", &self.direction)
            .field("ends_rpc", &self.ends_rpc)
            .field("messages", &self.messages)
            .finish_non_exhaustive()
    }
}

impl<B, H: StatsHandler> ObservedBody<B, H> {
    /// A body whose messages, compressed with `encoding` (its
    /// `grpc-encoding`), are reported in `direction`; the response body
    /// (`ends_rpc`) also completes the RPC. The message length limit
    /// applies to the messages this side receives only: tonic limits what
    /// it decodes (4 MiB by default), not what it sends.
    ///
    /// Compressed messages are decompressed when a handler asked for
    /// their sizes, and in a body whose status is tonic's decoder's verdict
    /// on them (the client's response; on the server, a request the
    /// service cannot decode ends with the status it answers, seen in its
    /// trailers).
    pub(crate) fn new(
        inner: B,
        recorder: RecordRef<H>,
        direction: Direction,
        encoding: BodyEncoding,
        ends_rpc: bool,
    ) -> Self {
        let limit = match direction {
            Direction::Inbound => recorder.max_message_len(),
            Direction::Outbound => u32::MAX,
        };
        let decompress = H::UNCOMPRESSED_SIZES || recorder.judged_by_decoder(direction);
        let keep = recorder.keeps_message_data();
        Self {
            inner,
            messages: BodyMessages::new(limit, encoding, decompress, keep),
            recorder: Some(recorder),
            direction,
            ends_rpc,
            context: RpcContext::default(),
        }
    }

    /// A body the layer does not observe (a request that is not gRPC, and
    /// its response): frames pass through, no event is delivered.
    pub(crate) fn passthrough(inner: B) -> Self {
        Self {
            inner,
            messages: BodyMessages::default(),
            recorder: None,
            direction: Direction::Inbound,
            ends_rpc: false,
            context: RpcContext::default(),
        }
    }

    /// The same body, polled inside `context` (see
    /// [`StatsHandler::service_context`](crate::stats::StatsHandler)).
    #[inline(always)]
    pub(crate) fn in_context(mut self, context: RpcContext) -> Self {
        self.context = context;
        self
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
        let poll = {
            let _entered = this.context.enter::<H>();
            this.inner.poll_frame(cx)
        };
        // Nothing to observe once this body has given the record up.
        if let (Poll::Ready(result), Some(recorder)) = (&poll, this.recorder.as_mut()) {
            let direction = *this.direction;
            match result {
                Some(Ok(frame)) => {
                    if let Some(data) = frame.data_ref() {
                        observe_data(recorder, this.messages, data, direction);
                    } else if let Some(trailers) = frame.trailers_ref()
                        && *this.ends_rpc
                    {
                        let error = framing_error_at_end(this.messages.decoder(), direction);
                        if let Some(recorder) = this.recorder.take() {
                            recorder.close(|rpc| rpc.response_trailers(trailers, error));
                        }
                    }
                }
                Some(Err(error)) => body_failed(this.recorder, error, direction, *this.ends_rpc),
                // A request body that ends on a message boundary has
                // nothing to report but the client's half-close, to the
                // handlers that asked for it.
                None if !*this.ends_rpc && this.messages.decoder().is_idle() => {
                    if H::HALF_CLOSE {
                        half_close(this.recorder);
                    }
                }
                None => body_complete(
                    this.recorder,
                    this.messages.decoder(),
                    direction,
                    *this.ends_rpc,
                ),
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

/// Payload events for one data chunk. The usual chunk is one whole
/// message, or lies inside a message without completing it (nothing to
/// report); anything else goes to the general decoder, out of line.
#[inline(always)]
fn observe_data<H: StatsHandler>(
    recorder: &mut RecordRef<H>,
    messages: &mut BodyMessages,
    data: &Bytes,
    direction: Direction,
) {
    let single = messages.single_message(data, direction, |message| {
        let time = RpcEvents::<H>::payload_time();
        recorder.with(|rpc| message_event(rpc, direction, message, time));
    });
    if !single && !messages.skip_inside_message(data) {
        observe_chunk(recorder, messages, data, direction);
    }
}

/// Payload events for a chunk holding several messages, the end of one,
/// part of a prefix, or a malformed one: the messages it completes share
/// one lock and one clock read.
#[inline(never)]
fn observe_chunk<H: StatsHandler>(
    recorder: &mut RecordRef<H>,
    messages: &mut BodyMessages,
    data: &Bytes,
    direction: Direction,
) {
    recorder.with(|rpc| {
        let mut time = None;
        let decoded = messages.push(data, direction, |message| {
            let time = *time.get_or_insert_with(RpcEvents::<H>::payload_time);
            message_event(rpc, direction, message, time);
        });
        if let Err(error) = decoded {
            rpc.record_body_error(direction, RpcError::Frame { direction, error });
        }
    });
}

/// One whole message: its payload event, or the error its receiver
/// reports for it (no payload event then).
#[inline(always)]
fn message_event<H: StatsHandler>(
    rpc: &mut RpcEvents<'_, H>,
    direction: Direction,
    message: Result<Payload<'_>, RpcError>,
    time: Option<std::time::Instant>,
) {
    match message {
        Ok(payload) => rpc.payload(direction, payload.with_time(time)),
        Err(error) => rpc.record_body_error(direction, error),
    }
}

/// The request body ended: the client's half-close, once.
#[cold]
fn half_close<H: StatsHandler>(recorder: &mut Option<RecordRef<H>>) {
    if let Some(mut recorder) = recorder.take() {
        recorder.with(|rpc| rpc.half_close());
        recorder.release();
    }
}

/// The body failed: its error ends the RPC on the response body, or is
/// recorded on the request body.
#[cold]
fn body_failed<H: StatsHandler, E: std::error::Error + 'static>(
    recorder: &mut Option<RecordRef<H>>,
    error: &E,
    direction: Direction,
    ends_rpc: bool,
) {
    let code = transport_error_code(error);
    let message = error.to_string();
    let error = RpcError::Body { direction, message };
    body_over(recorder, ends_rpc, error, code);
}

/// The body ended without trailers. On the response body the RPC ends: a
/// message cut short is `Internal`, as tonic's decoder reports it to the
/// reader ("Unexpected EOF decoding stream"), else the status is the one
/// the reader infers for a missing `grpc-status`. On the request body a
/// message cut short is recorded.
fn body_complete<H: StatsHandler>(
    recorder: &mut Option<RecordRef<H>>,
    decoder: &FrameDecoder,
    direction: Direction,
    ends_rpc: bool,
) {
    let error = framing_error_at_end(decoder, direction);
    if ends_rpc {
        if let Some(recorder) = recorder.take() {
            recorder.close(|rpc| {
                if let Some(error) = error {
                    let code = error.receiver_code();
                    rpc.record_error(error, code);
                }
                rpc.end(Ending::Complete { truncated: false });
            });
        }
    } else if let (Some(error), Some(recorder)) = (error, recorder) {
        recorder.with(|rpc| rpc.record_body_error(direction, error));
    }
}

/// The body failed before its trailers. On the response body the RPC ends
/// with `error` and `code`; on the request body `error` is recorded.
fn body_over<H: StatsHandler>(
    recorder: &mut Option<RecordRef<H>>,
    ends_rpc: bool,
    error: RpcError,
    code: Code,
) {
    if ends_rpc {
        if let Some(recorder) = recorder.take() {
            recorder.close(|rpc| {
                rpc.end(Ending::Failed {
                    code,
                    message: Cow::Borrowed(""),
                    error,
                });
            });
        }
    } else if let Some(recorder) = recorder {
        recorder.with(|rpc| rpc.record_error(error, Some(code)));
    }
}

/// The body is complete: a message cut short is a framing error.
#[inline(always)]
fn framing_error_at_end(decoder: &FrameDecoder, direction: Direction) -> Option<RpcError> {
    if decoder.is_idle() {
        return None;
    }
    framing_error(decoder, direction)
}

#[cold]
fn framing_error(decoder: &FrameDecoder, direction: Direction) -> Option<RpcError> {
    decoder
        .finish()
        .err()
        .map(|error| RpcError::Frame { direction, error })
}
