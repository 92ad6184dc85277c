//! The per-RPC shared record: every handler's state inline behind one
//! mutex, plus what is needed to deliver exactly one `End` (the phase and
//! the final status are decided in [`ending`](super::ending)).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use http::{HeaderMap, StatusCode};
use tonic::Code;

use super::context::RpcContext;
use super::ending::{Ending, Final, Phase, Seen, Status, final_status};
use super::idle;
use super::service_core::ServiceCore;
use crate::stats::StatsHandler;
use crate::stats::event::{
    CompressionError, Direction, End, Payload, RpcError, RpcEvent, RpcInfo, Side,
};
use crate::stats::frame::FrameError;
use crate::wire;

/// One RPC's record, shared by the response future and the request and
/// response body wrappers (each through a [`RecordRef`](super::record_ref::RecordRef)). Records are
/// recycled through per-thread free lists ([`idle`](super::idle)).
pub(crate) struct RpcRecorder<H: StatsHandler> {
    setup: RpcSetup<H>,
    progress: Mutex<RpcProgress<H::RpcState>>,
}

/// What an RPC's events read but never change once it has begun.
struct RpcSetup<H: StatsHandler> {
    /// The service the record belongs to: the handler, and the key of the
    /// free lists the record returns to (see
    /// [`open_service`](super::open_service) for how the cycle is broken).
    core: Arc<ServiceCore<H>>,
    side: Side,
    begin_time: Instant,
    deadline: Option<Instant>,
    max_message_len: u32,
    /// Whether a handler wants this RPC's message bytes (decided once, as
    /// it begins).
    keep_message_data: bool,
}

impl<H: StatsHandler> RpcSetup<H> {
    /// See [`RpcRecorder::judged_by_decoder`].
    #[inline]
    fn judged_by_decoder(&self, direction: Direction) -> bool {
        self.side == Side::Client && direction == Direction::Inbound
    }
}

/// What an RPC's events change: the handler states, the phase, and what
/// its `End` is decided from.
struct RpcProgress<S> {
    state: S,
    phase: Phase,
    /// The first error recorded.
    error: Option<RpcError>,
    /// The response's HTTP status, once its headers were seen: what a
    /// missing `grpc-status` maps from.
    http_status: Option<StatusCode>,
}

impl<S> RpcProgress<S> {
    fn new(state: S) -> Self {
        Self {
            state,
            phase: Phase::Open,
            error: None,
            http_status: None,
        }
    }
}

impl<H: StatsHandler> std::fmt::Debug for RpcRecorder<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RpcRecorder")
            .field("side", &self.setup.side)
            .field("begin_time", &self.setup.begin_time)
            .finish_non_exhaustive()
    }
}

impl<H: StatsHandler> RpcRecorder<H> {
    /// Tags the RPC and delivers `Begin` and the request-headers event in
    /// grpc-go's order: `InHeader` then `Begin` on the server, `Begin` then
    /// `OutHeader` on the client (after the handlers edited the headers).
    /// The record is an idle one from this thread's free list when there is
    /// one. Also returns the context the handlers want the server's inner
    /// service to run in.
    pub(crate) fn begin(
        core: &Arc<ServiceCore<H>>,
        info: &RpcInfo<'_>,
        conn: Option<&H::ConnState>,
        request_headers: &mut HeaderMap,
    ) -> (Arc<Self>, RpcContext) {
        let handler = &*core.handler;
        let begin_time = Instant::now();
        let mut state = handler.tag_rpc(info, conn);
        let begin = RpcEvent::Begin { time: begin_time };
        let context = match info.side {
            Side::Server => {
                handler.handle_rpc(&mut state, &RpcEvent::InHeader(request_headers));
                handler.handle_rpc(&mut state, &begin);
                RpcContext::of(handler, &state)
            }
            Side::Client => {
                handler.edit_request_headers(&mut state, request_headers);
                handler.handle_rpc(&mut state, &begin);
                handler.handle_rpc(&mut state, &RpcEvent::OutHeader(request_headers));
                RpcContext::default()
            }
        };
        // Both sides learn the deadline from `grpc-timeout` (tonic's
        // `Request::set_timeout` writes it on the client).
        let deadline = wire::status::timeout(request_headers)
            .and_then(|timeout| begin_time.checked_add(timeout));
        let keep_message_data = H::MESSAGE_DATA && handler.wants_message_data(&state);
        if let Some(mut idle) = Self::take_idle(core)
            // Unshared (it was unique when returned, and taking it from the
            // list is the only way to reach it), reset when it was
            // returned, and of this layer: only the RPC's own fields
            // change.
            && let Some(slot) = Arc::get_mut(&mut idle)
        {
            slot.setup.begin_time = begin_time;
            slot.setup.deadline = deadline;
            slot.setup.keep_message_data = keep_message_data;
            slot.progress
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner)
                .state = state;
            return (idle, context);
        }
        let setup = RpcSetup {
            core: Arc::clone(core),
            side: info.side,
            begin_time,
            deadline,
            max_message_len: core.max_message_len,
            keep_message_data,
        };
        (Self::fresh(setup, state), context)
    }

    fn fresh(setup: RpcSetup<H>, state: H::RpcState) -> Arc<Self> {
        Arc::new(Self {
            setup,
            progress: Mutex::new(RpcProgress::new(state)),
        })
    }

    /// Resets a record whose last holder is going away, before it returns
    /// to the free list: drops the handler states, status and error.
    pub(crate) fn reset(&mut self) {
        let progress = self
            .progress
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        *progress = RpcProgress::new(H::RpcState::default());
    }

    /// The service the record belongs to (whose free lists it returns to).
    pub(crate) fn core(&self) -> &ServiceCore<H> {
        &self.setup.core
    }

    /// An idle record of the service `core` from this thread's free list.
    #[inline]
    pub(crate) fn take_idle(core: &ServiceCore<H>) -> Option<Arc<Self>> {
        idle::take(core.key())
    }

    /// Whether this RPC's payloads carry their bytes: a handler asked
    /// ([`StatsHandler::MESSAGE_DATA`]) and wants them for this RPC.
    #[inline]
    pub(crate) fn keeps_message_data(&self) -> bool {
        H::MESSAGE_DATA && self.setup.keep_message_data
    }

    /// The message length limit for this RPC's bodies.
    pub(crate) fn max_message_len(&self) -> u32 {
        self.setup.max_message_len
    }

    /// Whether tonic's decoder on this side judges the messages of the
    /// body going `direction`, so that the status the application sees
    /// for a message it cannot receive (bad framing, a length over the
    /// limit, a message that does not decompress) is the decoder's: the
    /// client's response. On the server, the handler's answer decides.
    #[inline]
    pub(crate) fn judged_by_decoder(&self, direction: Direction) -> bool {
        self.setup.judged_by_decoder(direction)
    }

    /// The direction of the response body on this side.
    pub(crate) fn response_direction(&self) -> Direction {
        match self.setup.side {
            Side::Server => Direction::Outbound,
            Side::Client => Direction::Inbound,
        }
    }

    /// The RPC's events, reached without the lock: the caller holds the
    /// record's only reference.
    pub(crate) fn unshared(&mut self) -> RpcEvents<'_, H> {
        RpcEvents {
            setup: &self.setup,
            progress: self
                .progress
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner),
        }
    }

    /// Runs `f` on the RPC's events under the record's lock.
    pub(crate) fn locked<R>(&self, f: impl FnOnce(&mut RpcEvents<'_, H>) -> R) -> R {
        // A handler that panicked must not stop the others from seeing `End`.
        let mut progress = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut RpcEvents {
            setup: &self.setup,
            progress: &mut progress,
        })
    }
}

impl<H: StatsHandler> idle::Record for RpcRecorder<H> {
    type Owner = ServiceCore<H>;

    fn owner(&self) -> &ServiceCore<H> {
        self.core()
    }
}

/// One holder's exclusive access to an RPC's record (through the lock, or
/// without it when the holder is the only one): every event goes through
/// here.
pub(crate) struct RpcEvents<'a, H: StatsHandler> {
    setup: &'a RpcSetup<H>,
    progress: &'a mut RpcProgress<H::RpcState>,
}

impl<H: StatsHandler> RpcEvents<'_, H> {
    /// Hands `event` to the handlers.
    fn deliver(&mut self, event: &RpcEvent<'_>) {
        self.setup
            .core
            .handler
            .handle_rpc(&mut self.progress.state, event);
    }

    /// The time payload events carry: read only if a handler wants it.
    pub(crate) fn payload_time() -> Option<Instant> {
        H::PAYLOAD_TIMES.then(Instant::now)
    }

    /// Whether events still reach the peer's side of the stream: not
    /// once the RPC ended, nor, on the server, once a status is known
    /// before the response's trailers (the client reset the stream or
    /// the connection broke: nothing sent afterwards reaches the client,
    /// and grpc-go reports no outbound event for it).
    #[inline(always)]
    fn stream_open(&self) -> bool {
        match self.progress.phase {
            Phase::Open => true,
            Phase::Decided(_) => self.setup.side == Side::Client,
            Phase::Ended => false,
        }
    }

    /// Delivers the payload event for one message that has fully arrived
    /// (unless the RPC has ended, or, on the server, the client already
    /// reset the stream). Messages that complete in one body chunk share
    /// one `time` (they arrived together).
    pub(crate) fn payload(&mut self, direction: Direction, payload: Payload<'_>) {
        let event = match direction {
            Direction::Inbound if !self.progress.phase.is_ended() => RpcEvent::InPayload(payload),
            Direction::Outbound if self.stream_open() => RpcEvent::OutPayload(payload),
            _ => return,
        };
        self.deliver(&event);
    }

    /// The client finished sending (the request body ended).
    pub(crate) fn half_close(&mut self) {
        if !self.progress.phase.is_ended() {
            self.deliver(&RpcEvent::HalfClose {
                time: Instant::now(),
            });
        }
    }

    /// Response headers (`status` and `headers`; `body_is_empty` when the
    /// body is known to be empty). On the server, a trailers-only
    /// response (an empty body and `grpc-status` in the headers) records
    /// its status and is reported as trailers, else it is `OutHeader`.
    /// On the client, as tonic's client decides (`create_response`):
    /// `grpc-status` in the headers is the call's status whatever follows
    /// (trailers-only), and an empty body without one ends the call with
    /// the status mapped from the HTTP status, as tonic hands its caller;
    /// otherwise `InHeader`.
    pub(crate) fn response_headers(
        &mut self,
        status: StatusCode,
        headers: &HeaderMap,
        body_is_empty: bool,
    ) {
        self.progress.http_status = Some(status);
        let status_in_headers = match self.setup.side {
            // Only an empty body can be trailers-only: the common case
            // skips the lookup.
            Side::Server => body_is_empty && wire::status::has_status(headers),
            Side::Client => wire::status::has_status(headers),
        };
        if status_in_headers {
            self.trailers(headers);
            self.end(Ending::Complete { truncated: false });
        } else if self.setup.side == Side::Client && body_is_empty {
            self.end(Ending::Complete { truncated: false });
        } else if self.stream_open() {
            self.deliver(&match self.setup.side {
                Side::Server => RpcEvent::OutHeader(headers),
                Side::Client => RpcEvent::InHeader(headers),
            });
        }
    }

    /// The response's trailers close the RPC: records their status,
    /// delivers the trailer event (`OutTrailer` on the server, `InTrailer`
    /// on the client) and `End`. `error` is a framing error found at the
    /// end of the body (a message cut short turns an OK or missing status
    /// into `Internal`, as the receiver's decoder reports it).
    pub(crate) fn response_trailers(&mut self, trailers: &HeaderMap, error: Option<RpcError>) {
        let truncated = error.is_some_and(|error| self.framing_error_at_trailers(error));
        self.trailers(trailers);
        self.end(Ending::Complete { truncated });
    }

    /// Records a framing error found at the trailers; whether the body
    /// was cut inside a message.
    #[cold]
    fn framing_error_at_trailers(&mut self, error: RpcError) -> bool {
        let truncated = matches!(
            error,
            RpcError::Frame {
                error: FrameError::Truncated { .. },
                ..
            }
        );
        self.progress.record_error(error, None);
        truncated
    }

    /// Records the status in `trailers` (unless a status is already
    /// known: the first one wins, so a status the server writes after the
    /// client reset the stream does not replace `Cancelled`) and delivers
    /// the trailer event.
    fn trailers(&mut self, trailers: &HeaderMap) {
        if !self.stream_open() {
            return;
        }
        if matches!(self.progress.phase, Phase::Open)
            && let Some(code) = wire::status::status_code(trailers)
        {
            // tonic sends no message with OK; skip the second lookup then.
            let message = if code == Code::Ok {
                None
            } else {
                wire::status::message(trailers).map(Into::into)
            };
            self.progress.phase = Phase::Decided(Status { code, message });
        }
        self.deliver(&match self.setup.side {
            Side::Server => RpcEvent::OutTrailer(trailers),
            Side::Client => RpcEvent::InTrailer(trailers),
        });
    }

    /// Records an error, and `code` as the RPC's status unless one is
    /// known; the first error is kept.
    pub(crate) fn record_error(&mut self, error: RpcError, code: Option<Code>) {
        self.progress.record_error(error, code);
    }

    /// Records an error found in a body this side reads or writes. In a
    /// body the decoder judges
    /// ([`judged_by_decoder`](RpcRecorder::judged_by_decoder)), a message
    /// it cannot receive is the status tonic hands the caller at that
    /// point, whatever the server sends after it.
    pub(crate) fn record_body_error(&mut self, direction: Direction, error: RpcError) {
        let code = if self.setup.judged_by_decoder(direction) {
            error.receiver_code()
        } else {
            None
        };
        self.progress.record_error(error, code);
    }

    /// A client's response compressed with `encoding`, which the client
    /// does not accept: tonic fails the call with `Unimplemented`.
    #[cold]
    pub(crate) fn refuse_encoding(&mut self, encoding: &[u8]) {
        let encoding = String::from_utf8_lossy(encoding).into_owned();
        let message = format!("Content is compressed with `{encoding}` which isn't supported");
        let error = RpcError::Compression {
            direction: Direction::Inbound,
            error: CompressionError::UnsupportedEncoding { encoding },
        };
        self.end(Ending::Failed {
            code: Code::Unimplemented,
            message: message.into(),
            error,
        });
    }

    /// Ends the RPC: delivers its one `End`, with the status
    /// [`final_status`] decides from what was seen and `ending`. Nothing
    /// once it has ended.
    pub(crate) fn end(&mut self, ending: Ending) {
        let progress = &mut *self.progress;
        let status = match std::mem::replace(&mut progress.phase, Phase::Ended) {
            Phase::Open => None,
            Phase::Decided(status) => Some(status),
            Phase::Ended => return,
        };
        let setup = self.setup;
        let end_time = Instant::now();
        let seen = Seen {
            status,
            error: progress.error.take(),
            http_status: progress.http_status,
            deadline: setup.deadline,
        };
        let Final { status, error } = final_status(seen, ending, end_time);
        let end = End {
            code: status.code,
            message: status.message.as_deref().unwrap_or_default(),
            begin_time: setup.begin_time,
            end_time,
            error: error.as_ref(),
        };
        setup
            .core
            .handler
            .handle_rpc(&mut progress.state, &RpcEvent::End(end));
    }
}

impl<S> RpcProgress<S> {
    /// Records an error (the first one is kept) and `code` as the status
    /// unless one is known. Nothing once the RPC has ended.
    fn record_error(&mut self, error: RpcError, code: Option<Code>) {
        if self.phase.is_ended() {
            return;
        }
        if self.error.is_none() {
            self.error = Some(error);
        }
        if let (Phase::Open, Some(code)) = (&self.phase, code) {
            self.phase = Phase::Decided(Status {
                code,
                message: None,
            });
        }
    }
}

#[cfg(test)]
#[path = "recorder_tests.rs"]
mod tests;
