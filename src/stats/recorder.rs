//! The per-RPC shared record: every handler's state inline behind one
//! mutex, plus what is needed to deliver exactly one `End`.

use std::error::Error as _;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderName, HeaderValue};
use tonic::Code;

use super::StatsHandler;
use super::context::RpcContext;
use super::event::{Direction, End, Payload, RpcError, RpcEvent, RpcInfo, Side};
use super::frame::{FrameError, FrameHeader};
use super::pool::{LayerShared, RecordRef};

// Pre-built names: a lookup by `&HeaderName` skips parsing the name.
const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");
const GRPC_MESSAGE: HeaderName = HeaderName::from_static("grpc-message");
const GRPC_TIMEOUT: HeaderName = HeaderName::from_static("grpc-timeout");

/// One RPC's record, shared by the response future and the request and
/// response body wrappers (each through a [`RecordRef`]). Records are
/// recycled through the layer's free list ([`LayerShared`]).
pub(crate) struct RpcRecorder<H: StatsHandler> {
    facts: Facts<H>,
    core: Mutex<Core<H::RpcState>>,
}

/// What an RPC's events read but never change once it has begun.
struct Facts<H: StatsHandler> {
    /// The layer's shared part: the handler, and the free list the record
    /// returns to (see [`pool`](super::pool) for how the cycle is broken).
    shared: Arc<LayerShared<H>>,
    side: Side,
    begin_time: Instant,
    deadline: Option<Instant>,
    max_message_len: u32,
}

/// What an RPC's events change: the handler states and the outcome.
struct Core<S> {
    state: S,
    ended: bool,
    code: Option<Code>,
    message: Option<String>,
    error: Option<RpcError>,
}

impl<S: Default> Core<S> {
    fn new(state: S) -> Self {
        Self {
            state,
            ended: false,
            code: None,
            message: None,
            error: None,
        }
    }
}

impl<H: StatsHandler> std::fmt::Debug for RpcRecorder<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RpcRecorder")
            .field("side", &self.facts.side)
            .field("begin_time", &self.facts.begin_time)
            .finish_non_exhaustive()
    }
}

impl<H: StatsHandler> RpcRecorder<H> {
    /// Tags the RPC and delivers `Begin` and the request-headers event in
    /// grpc-go's order: `InHeader` then `Begin` on the server, `Begin` then
    /// `OutHeader` on the client (after the handlers edited the headers).
    /// The record is an idle one from the layer's free list when there is
    /// one. Also returns the context the handlers want the server's inner
    /// service to run in.
    pub(crate) fn begin(
        shared: &Arc<LayerShared<H>>,
        info: &RpcInfo<'_>,
        conn: Option<&H::ConnState>,
        request_headers: &mut HeaderMap,
    ) -> (RecordRef<H>, RpcContext) {
        let handler = &*shared.handler;
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
        let deadline = find(request_headers, &GRPC_TIMEOUT)
            .and_then(|value| parse_grpc_timeout(value.as_bytes()))
            .and_then(|timeout| begin_time.checked_add(timeout));
        let record = match shared.take_idle() {
            Some(mut idle) => match Arc::get_mut(&mut idle) {
                // Unshared (it was unique when returned, and taking it from
                // the list is the only way to reach it), reset when it was
                // returned, and of this layer: only the RPC's own fields
                // change.
                Some(slot) => {
                    slot.facts.begin_time = begin_time;
                    slot.facts.deadline = deadline;
                    slot.core
                        .get_mut()
                        .unwrap_or_else(PoisonError::into_inner)
                        .state = state;
                    idle
                }
                None => Self::fresh(shared, info.side, begin_time, deadline, state),
            },
            None => Self::fresh(shared, info.side, begin_time, deadline, state),
        };
        (RecordRef::new(record), context)
    }

    fn fresh(
        shared: &Arc<LayerShared<H>>,
        side: Side,
        begin_time: Instant,
        deadline: Option<Instant>,
        state: H::RpcState,
    ) -> Arc<Self> {
        Arc::new(Self {
            facts: Facts {
                shared: Arc::clone(shared),
                side,
                begin_time,
                deadline,
                max_message_len: shared.max_message_len,
            },
            core: Mutex::new(Core::new(state)),
        })
    }

    /// Resets a record whose last holder is going away, before it returns
    /// to the free list: drops the handler states, status and error.
    pub(crate) fn reset(&mut self) {
        let core = self.core.get_mut().unwrap_or_else(PoisonError::into_inner);
        *core = Core::new(H::RpcState::default());
    }

    /// The layer's shared part (whose free list the record returns to).
    pub(crate) fn shared(&self) -> &LayerShared<H> {
        &self.facts.shared
    }

    /// The message length limit for this RPC's bodies.
    pub(crate) fn max_message_len(&self) -> u32 {
        self.facts.max_message_len
    }

    /// The direction of the response body on this side.
    pub(crate) fn response_direction(&self) -> Direction {
        match self.facts.side {
            Side::Server => Direction::Outbound,
            Side::Client => Direction::Inbound,
        }
    }

    /// The RPC's events, reached without the lock: the caller holds the
    /// record's only reference.
    pub(crate) fn unshared(&mut self) -> Rpc<'_, H> {
        Rpc {
            facts: &self.facts,
            core: self.core.get_mut().unwrap_or_else(PoisonError::into_inner),
        }
    }

    /// Runs `f` on the RPC's events under the record's lock.
    pub(crate) fn locked<R>(&self, f: impl FnOnce(&mut Rpc<'_, H>) -> R) -> R {
        // A handler that panicked must not stop the others from seeing `End`.
        let mut core = self.core.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut Rpc {
            facts: &self.facts,
            core: &mut core,
        })
    }
}

/// One holder's exclusive access to an RPC's record (through the lock, or
/// without it when the holder is the only one): every event goes through
/// here.
pub(crate) struct Rpc<'a, H: StatsHandler> {
    facts: &'a Facts<H>,
    core: &'a mut Core<H::RpcState>,
}

impl<H: StatsHandler> Rpc<'_, H> {
    /// Hands `event` to the handlers.
    fn deliver(&mut self, event: &RpcEvent<'_>) {
        self.facts
            .shared
            .handler
            .handle_rpc(&mut self.core.state, event);
    }

    /// The time payload events carry: read only if a handler wants it.
    pub(crate) fn payload_time() -> Option<Instant> {
        H::PAYLOAD_TIMES.then(Instant::now)
    }

    /// Delivers the payload event for one message that has fully arrived
    /// (unless the RPC has ended, or, on the server, the client already
    /// reset the stream). Messages that complete in one body chunk share
    /// one `time` (they arrived together).
    pub(crate) fn payload(
        &mut self,
        direction: Direction,
        header: FrameHeader,
        time: Option<Instant>,
    ) {
        if self.core.ended || (direction == Direction::Outbound && self.stream_closed()) {
            return;
        }
        let payload = Payload {
            length: header.length,
            wire_length: header.wire_length(),
            compressed: header.compressed,
            time,
        };
        self.deliver(&match direction {
            Direction::Inbound => RpcEvent::InPayload(payload),
            Direction::Outbound => RpcEvent::OutPayload(payload),
        });
    }

    /// Response headers: a trailers-only response (an empty body and
    /// `grpc-status` in the headers) records its status and is reported as
    /// trailers; otherwise it is the response-headers event. Only an empty
    /// body can be trailers-only, so the common case skips the lookup.
    pub(crate) fn response_headers(&mut self, headers: &HeaderMap, body_is_empty: bool) {
        if body_is_empty && find(headers, &GRPC_STATUS).is_some() {
            self.trailers(headers);
        } else if !self.core.ended && !self.stream_closed() {
            self.deliver(&match self.facts.side {
                Side::Server => RpcEvent::OutHeader(headers),
                Side::Client => RpcEvent::InHeader(headers),
            });
        }
    }

    /// The response's trailers close the RPC: records their status,
    /// delivers the trailer event (`OutTrailer` on the server, `InTrailer`
    /// on the client) and `End`. `error` is a framing error found at the
    /// end of the body: a message cut short turns an OK (or missing) status
    /// into `Internal`, as the receiver's decoder reports it.
    pub(crate) fn trailers_then_end(&mut self, trailers: &HeaderMap, error: Option<RpcError>) {
        match error {
            None => self.trailers(trailers),
            Some(error) => self.trailers_after_framing_error(trailers, error),
        }
        self.end_with(Code::Unknown, Some(RpcError::MissingStatus));
    }

    #[cold]
    fn trailers_after_framing_error(&mut self, trailers: &HeaderMap, error: RpcError) {
        let truncated = matches!(
            error,
            RpcError::Frame {
                error: FrameError::Truncated { .. },
                ..
            }
        );
        self.core.record_error(error, None);
        self.trailers(trailers);
        if truncated && matches!(self.core.code, None | Some(Code::Ok)) {
            self.core.code = Some(Code::Internal);
        }
    }

    /// Records the status in `trailers` (unless a status is already
    /// recorded: the first one wins, so a status the server writes after
    /// the client reset the stream does not replace `Cancelled`) and
    /// delivers the trailer event.
    fn trailers(&mut self, trailers: &HeaderMap) {
        if self.core.ended || self.stream_closed() {
            return;
        }
        if self.core.code.is_none()
            && let Some(status) = find(trailers, &GRPC_STATUS)
        {
            let code = Code::from_bytes(status.as_bytes());
            self.core.code = Some(code);
            // tonic sends no message with OK; skip the second lookup then.
            if code != Code::Ok {
                self.core.message =
                    find(trailers, &GRPC_MESSAGE).map(|message| percent_decode(message.as_bytes()));
            }
        }
        self.deliver(&match self.facts.side {
            Side::Server => RpcEvent::OutTrailer(trailers),
            Side::Client => RpcEvent::InTrailer(trailers),
        });
    }

    /// On the server, a status recorded before the response's trailers
    /// comes from the request body failing: the client reset the stream
    /// or the connection broke. Nothing the server sends afterwards
    /// reaches the client, and grpc-go reports no outbound event for it.
    #[inline(always)]
    fn stream_closed(&self) -> bool {
        self.facts.side == Side::Server && self.core.code.is_some()
    }

    /// Records an error; the first one is kept.
    pub(crate) fn record_error(&mut self, error: RpcError, code: Option<Code>) {
        self.core.record_error(error, code);
    }

    /// Records `error` (if any, with `code`) and delivers `End` once. The
    /// code is the recorded status, else `fallback` (and `fallback_error`
    /// is recorded); see [`final_code`](Self::final_code).
    pub(crate) fn end(
        &mut self,
        error: Option<(RpcError, Option<Code>)>,
        fallback: Code,
        fallback_error: Option<RpcError>,
    ) {
        if let Some((error, code)) = error {
            self.core.record_error(error, code);
        }
        self.end_with(fallback, fallback_error);
    }

    fn end_with(&mut self, fallback: Code, fallback_error: Option<RpcError>) {
        let core = &mut *self.core;
        if core.ended {
            return;
        }
        core.ended = true;
        let facts = self.facts;
        let end_time = Instant::now();
        let code = match core.code {
            Some(Code::Cancelled) | None => Self::final_code(facts, core, fallback, end_time),
            Some(code) => code,
        };
        if core.error.is_none() && core.code.is_none() {
            core.error = fallback_error;
        }
        let end = End {
            code,
            message: core.message.as_deref().unwrap_or_default(),
            begin_time: facts.begin_time,
            end_time,
            error: core.error.as_ref(),
        };
        facts
            .shared
            .handler
            .handle_rpc(&mut core.state, &RpcEvent::End(end));
    }

    /// The code of an RPC that recorded no status, or `Cancelled`:
    /// - a client call given up (dropped) after a framing error on its
    ///   response ends with that error's code: tonic's decoder handed the
    ///   caller that status, and the caller then dropped the call;
    /// - `Cancelled` at or after the request's deadline is
    ///   `DeadlineExceeded` (grpc-go: the deadline cancelled the call).
    #[cold]
    fn final_code(
        facts: &Facts<H>,
        core: &Core<H::RpcState>,
        fallback: Code,
        end_time: Instant,
    ) -> Code {
        let code = match (core.code, &core.error, facts.side) {
            (Some(code), _, _) => code,
            (
                None,
                Some(RpcError::Frame {
                    direction: Direction::Inbound,
                    error,
                }),
                Side::Client,
            ) if fallback == Code::Cancelled => error.code(),
            (None, _, _) => fallback,
        };
        if code == Code::Cancelled && facts.deadline.is_some_and(|d| end_time >= d) {
            Code::DeadlineExceeded
        } else {
            code
        }
    }

    /// The end for a body or future dropped early: the recorded status if
    /// any, else `Cancelled` (see [`final_code`](Self::final_code)).
    pub(crate) fn end_dropped(&mut self) {
        self.end(None, Code::Cancelled, Some(RpcError::Cancelled));
    }
}

impl<S> Core<S> {
    /// Records an error; the first one (and the first code) is kept.
    fn record_error(&mut self, error: RpcError, code: Option<Code>) {
        if self.error.is_none() {
            self.error = Some(error);
        }
        if self.code.is_none() {
            self.code = code;
        }
    }
}

/// Looks `name` up in `headers`: small maps (gRPC trailers usually hold
/// one entry, request headers a handful) are scanned, which is cheaper than
/// hashing the name; larger ones use the hash lookup. The scan walks the
/// keys only (no multi-value links); most lookups miss (`grpc-timeout`) or
/// hit the first entry (`grpc-status` in tonic's trailers). A standard
/// name (most request headers) differs from our custom ones on its tag,
/// without its text being read.
#[inline(always)]
fn find<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Option<&'a HeaderValue> {
    const SCAN_UP_TO: usize = 8;
    if headers.keys_len() > SCAN_UP_TO {
        return headers.get(name);
    }
    match headers.keys().position(|key| key == name)? {
        // The first value of the first entry is the first `iter` yields.
        0 => headers.iter().next().map(|(_, value)| value),
        _ => headers.get(name),
    }
}

/// Decodes `grpc-message`'s percent-encoding (invalid UTF-8 is replaced).
fn percent_decode(encoded: &[u8]) -> String {
    let mut decoded = Vec::with_capacity(encoded.len());
    let mut i = 0;
    while i < encoded.len() {
        let byte = encoded[i];
        let escaped = match encoded.get(i + 1..i + 3) {
            Some(&[hi, lo]) if byte == b'%' => hex(hi).zip(hex(lo)),
            _ => None,
        };
        match escaped {
            Some((hi, lo)) => {
                decoded.push(hi << 4 | lo);
                i += 3;
            }
            None => {
                decoded.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(decoded)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

fn hex(digit: u8) -> Option<u8> {
    char::from(digit).to_digit(16).map(|d| d as u8)
}

/// Parses gRPC's `grpc-timeout` (`1-8 digits` + unit `H M S m u n`).
fn parse_grpc_timeout(value: &[u8]) -> Option<Duration> {
    let (unit, digits) = value.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let amount = digits
        .iter()
        .fold(0u64, |acc, d| acc * 10 + u64::from(d - b'0'));
    Some(match unit {
        b'H' => Duration::from_secs(amount * 3600),
        b'M' => Duration::from_secs(amount * 60),
        b'S' => Duration::from_secs(amount),
        b'm' => Duration::from_millis(amount),
        b'u' => Duration::from_micros(amount),
        b'n' => Duration::from_nanos(amount),
        _ => return None,
    })
}

/// Maps an error from the inner service or a body to the status code
/// tonic hands the caller for it (`Status::from_error`): a `tonic::Status`
/// anywhere in the source chain gives its code, an `h2::Error` (on top, or
/// under a `hyper::Error`) its reset reason's code, a hyper timeout
/// `Unavailable`, a hyper cancellation `Cancelled`, a connect failure
/// `Unavailable`, anything else `Unknown`. Two departures, to match
/// grpc-go: tonic's `TimeoutExpired` (the call's own deadline) is
/// `DeadlineExceeded` (tonic: `Cancelled`), and a connection that broke
/// (an I/O error under hyper or h2, which tonic reports as `Unknown`) is
/// `Unavailable`.
pub(crate) fn classify_error(error: &(dyn std::error::Error + 'static)) -> Code {
    if let Some(h2) = error.downcast_ref::<h2::Error>() {
        return code_from_h2(h2);
    }
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(status) = error.downcast_ref::<tonic::Status>() {
            // tonic's `Unknown` may wrap a broken connection: look under it.
            if status.code() != Code::Unknown {
                return status.code();
            }
        } else if error.is::<tonic::TimeoutExpired>() {
            return Code::DeadlineExceeded;
        } else if error.is::<tonic::ConnectError>() || error.is::<std::io::Error>() {
            return Code::Unavailable;
        } else if let Some(hyper) = error.downcast_ref::<hyper::Error>() {
            if hyper.is_timeout() {
                return Code::Unavailable;
            }
            if hyper.is_canceled() {
                return Code::Cancelled;
            }
            if let Some(h2) = hyper.source().and_then(|e| e.downcast_ref::<h2::Error>()) {
                return code_from_h2(h2);
            }
        }
        current = error.source();
    }
    Code::Unknown
}

/// tonic's mapping of an h2 error's reason (gRPC's PROTOCOL-HTTP2.md), and
/// `Unavailable` for a broken connection (grpc-go; tonic: `Unknown`).
fn code_from_h2(error: &h2::Error) -> Code {
    use h2::Reason;
    match error.reason() {
        Some(
            Reason::NO_ERROR
            | Reason::PROTOCOL_ERROR
            | Reason::INTERNAL_ERROR
            | Reason::FLOW_CONTROL_ERROR
            | Reason::SETTINGS_TIMEOUT
            | Reason::FRAME_SIZE_ERROR
            | Reason::COMPRESSION_ERROR
            | Reason::CONNECT_ERROR,
        ) => Code::Internal,
        Some(Reason::REFUSED_STREAM) => Code::Unavailable,
        Some(Reason::CANCEL) => Code::Cancelled,
        Some(Reason::ENHANCE_YOUR_CALM) => Code::ResourceExhausted,
        Some(Reason::INADEQUATE_SECURITY) => Code::PermissionDenied,
        None if error.is_io() => Code::Unavailable,
        _ => Code::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeout_units() {
        assert_eq!(parse_grpc_timeout(b"5S"), Some(Duration::from_secs(5)));
        assert_eq!(parse_grpc_timeout(b"20m"), Some(Duration::from_millis(20)));
        assert_eq!(parse_grpc_timeout(b"1H"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_grpc_timeout(b"7n"), Some(Duration::from_nanos(7)));
        assert_eq!(parse_grpc_timeout(b"S"), None);
        assert_eq!(parse_grpc_timeout(b"123456789S"), None);
        assert_eq!(parse_grpc_timeout(b"1x"), None);
        assert_eq!(parse_grpc_timeout(b""), None);
    }

    #[test]
    fn find_scans_small_maps_and_hashes_large_ones() {
        let mut headers = HeaderMap::new();
        headers.insert("grpc-status", HeaderValue::from_static("5"));
        assert_eq!(find(&headers, &GRPC_STATUS).unwrap(), "5");
        assert!(find(&headers, &GRPC_MESSAGE).is_none());
        headers.append("grpc-status", HeaderValue::from_static("6"));
        headers.insert("grpc-message", HeaderValue::from_static("m"));
        assert_eq!(find(&headers, &GRPC_STATUS).unwrap(), "5", "first value");
        assert_eq!(find(&headers, &GRPC_MESSAGE).unwrap(), "m", "later entry");
        for i in 0..20 {
            let name = HeaderName::try_from(format!("x-{i}")).unwrap();
            headers.insert(name, HeaderValue::from_static("v"));
        }
        assert_eq!(find(&headers, &GRPC_STATUS).unwrap(), "5");
        assert!(find(&headers, &GRPC_TIMEOUT).is_none());
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode(b"no%20such%20echo"), "no such echo");
        assert_eq!(percent_decode(b"100%"), "100%");
        assert_eq!(percent_decode(b"%zz%4"), "%zz%4");
        assert_eq!(percent_decode(b"%E2%9C%93"), "\u{2713}");
        assert_eq!(percent_decode(b"%FF"), "\u{FFFD}");
    }

    #[test]
    fn classify_walks_sources() {
        let status = tonic::Status::not_found("x");
        assert_eq!(classify_error(&status), Code::NotFound);
        assert_eq!(
            classify_error(&tonic::TimeoutExpired(())),
            Code::DeadlineExceeded
        );
        // A broken connection: `Unavailable`, as grpc-go (tonic: `Unknown`).
        let io = std::io::Error::other("boom");
        assert_eq!(classify_error(&io), Code::Unavailable);
        let wrapped = tonic::Status::from_error(Box::new(std::io::Error::other("cut")));
        assert_eq!(wrapped.code(), Code::Unknown, "tonic's own mapping");
        assert_eq!(classify_error(&wrapped), Code::Unavailable);
        let other: Box<dyn std::error::Error> = "not transport".into();
        assert_eq!(classify_error(&*other), Code::Unknown);
    }

    #[test]
    fn h2_reasons_map_as_tonic_maps_them() {
        use h2::Reason;
        for (reason, code) in [
            (Reason::NO_ERROR, Code::Internal),
            (Reason::PROTOCOL_ERROR, Code::Internal),
            (Reason::REFUSED_STREAM, Code::Unavailable),
            (Reason::CANCEL, Code::Cancelled),
            (Reason::ENHANCE_YOUR_CALM, Code::ResourceExhausted),
            (Reason::INADEQUATE_SECURITY, Code::PermissionDenied),
        ] {
            let error = h2::Error::from(reason);
            let tonic_code = tonic::Status::from_error(Box::new(h2::Error::from(reason))).code();
            assert_eq!(classify_error(&error), code, "{reason:?}");
            assert_eq!(tonic_code, code, "{reason:?}: tonic agrees");
        }
    }
}
