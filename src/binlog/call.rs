//! One logged RPC: which entries its events become, in grpc-go's order
//! and by its rules (`internal/binarylog/method_logger.go`, and where
//! `server.go` and `stream.go` call it).

use std::io;
use std::time::SystemTime;

use bytes::Bytes;
use http::HeaderMap;
use tonic::Code;

use super::cancel::{CallEnd, Declared, logs_cancel};
use super::encode::{EntryHead, EntryPayload, encode_framed};
use super::filter::LogLimits;
use super::metadata::{LoggedMetadata, status_details};
use super::proto::Address;
use super::proto::grpc_log_entry::{EventType, Logger};
use super::sink::Framing;
use super::writer::{CallMark, EntryWriter};
use crate::stats::{End, Payload, RpcEvent, Side};
use crate::wire;

/// What is known of a call when it is tagged.
#[derive(Debug)]
pub(crate) struct CallStart {
    pub(crate) call_id: u64,
    pub(crate) side: Side,
    pub(crate) limits: LogLimits,
    pub(crate) method: Box<str>,
    pub(crate) authority: Option<Box<str>>,
    pub(crate) peer: Option<Address>,
    /// Whether the method streams requests, if the application said so.
    pub(crate) client_streaming: Option<bool>,
    /// Whether the method streams responses, if the application said so.
    pub(crate) server_streaming: Option<bool>,
}

/// The state of one logged call.
#[derive(Debug)]
pub(crate) struct Call {
    start: CallStart,
    next_sequence: u64,
    /// Server: the client's header, framed, held until something shows
    /// the method exists (grpc-go logs nothing for an unknown method);
    /// empty if it could not be framed.
    held_header: Option<Vec<u8>>,
    /// Request messages seen.
    requests: u32,
    /// Response messages seen.
    responses: u32,
    /// The trailers sent (server) or received (client), logged at the
    /// call's end with its final status.
    trailers: Option<HeldTrailers>,
    /// The call's last entry (its trailer or cancel) was logged, or the
    /// call was found to be one not to log.
    over: bool,
    /// Where the call's last entry went (its entries stay in order).
    mark: CallMark,
}

/// The trailers, kept for the trailer entry at the call's end.
#[derive(Debug, Default)]
struct HeldTrailers {
    /// The fields of their `Metadata` message.
    metadata: Vec<u8>,
    /// `grpc-status-details-bin`, decoded.
    details: Bytes,
}

/// A status as a trailer entry carries it.
struct Status<'a> {
    code: Code,
    message: &'a str,
}

impl Call {
    pub(crate) fn new(start: CallStart) -> Self {
        Self {
            start,
            next_sequence: 1,
            held_header: None,
            requests: 0,
            responses: 0,
            trailers: None,
            over: false,
            mark: CallMark::default(),
        }
    }

    /// Logs the entries `event` gives, in order, to `writer`.
    pub(crate) fn observe(&mut self, event: &RpcEvent<'_>, writer: &EntryWriter) {
        if self.over {
            return;
        }
        match (self.start.side, event) {
            (Side::Server, RpcEvent::InHeader(headers)) => {
                let sequence = self.take_sequence();
                let mut held = Vec::new();
                let framing = writer.framing();
                if client_header(&self.start, sequence, headers, framing, &mut held).is_err() {
                    held.clear();
                }
                self.held_header = Some(held);
            }
            (Side::Client, RpcEvent::OutHeader(headers)) => {
                let sequence = self.take_sequence();
                let framing = writer.framing();
                let Self { start, mark, .. } = self;
                writer.append(mark, |buf| {
                    client_header(start, sequence, headers, framing, buf)
                });
            }
            (Side::Server, RpcEvent::OutHeader(headers))
            | (Side::Client, RpcEvent::InHeader(headers)) => {
                self.release_header(writer);
                self.server_header(headers, writer);
            }
            (side, RpcEvent::InPayload(payload) | RpcEvent::OutPayload(payload)) => {
                self.release_header(writer);
                let from_client = matches!(
                    (side, event),
                    (Side::Server, RpcEvent::InPayload(_))
                        | (Side::Client, RpcEvent::OutPayload(_))
                );
                if from_client {
                    self.requests = self.requests.saturating_add(1);
                } else {
                    self.responses = self.responses.saturating_add(1);
                }
                self.message(from_client, payload, writer);
            }
            (_, RpcEvent::HalfClose { .. }) => {
                self.release_header(writer);
                if self.client_streams() {
                    self.log(
                        writer,
                        EventType::ClientHalfClose,
                        EntryPayload::None,
                        false,
                    );
                }
            }
            (Side::Server, RpcEvent::OutTrailer(trailers))
                if self.held_header.is_some() && is_unknown_method(trailers) =>
            {
                // What tonic answers for a path no service serves.
                self.held_header = None;
                self.over = true;
            }
            (_, RpcEvent::OutTrailer(trailers) | RpcEvent::InTrailer(trailers)) => {
                // Logged at `End`, with the call's final status (the
                // trailers' own, or the one its receiver gave).
                self.release_header(writer);
                let metadata = LoggedMetadata::new(trailers, u64::MAX);
                let mut encoded = Vec::with_capacity(metadata.encoded_len());
                metadata.encode(&mut encoded);
                self.trailers = Some(HeldTrailers {
                    metadata: encoded,
                    details: status_details(trailers),
                });
            }
            (side, RpcEvent::End(end)) => {
                self.release_header(writer);
                self.last_entry(side, end, writer);
                self.over = true;
            }
            _ => {}
        }
    }

    /// Whether the client's half-close is logged: as grpc-go, only for a
    /// method that streams requests (a unary or server-streaming call's
    /// end of requests is not an event of its own). Undeclared, a call
    /// that sent exactly one request is taken for one that does not.
    fn client_streams(&self) -> bool {
        self.start.client_streaming.unwrap_or(self.requests != 1)
    }

    /// The call's last entry, at its end: the client's cancel (the call
    /// dropped before its status, or a stream its deadline ended; see
    /// `cancel.rs`) or the status it ended with.
    fn last_entry(&mut self, side: Side, end: &End<'_>, writer: &EntryWriter) {
        let cancel = logs_cancel(&CallEnd {
            side,
            code: end.code,
            error: end.error,
            trailers: self.trailers.is_some(),
            requests: self.requests,
            responses: self.responses,
            declared: Declared {
                client_streaming: self.start.client_streaming,
                server_streaming: self.start.server_streaming,
            },
        });
        if cancel {
            self.log(writer, EventType::Cancel, EntryPayload::None, false);
            return;
        }
        let trailers = self.trailers.take().unwrap_or_default();
        let status = Status {
            code: end.code,
            message: end.message,
        };
        self.trailer(&trailers, &status, writer);
    }

    /// Logs the client's header held on the server, if any.
    fn release_header(&mut self, writer: &EntryWriter) {
        if let Some(held) = self.held_header.take() {
            writer.append(&mut self.mark, |buf| {
                if held.is_empty() {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "the client header could not be framed",
                    ));
                }
                buf.extend_from_slice(&held);
                Ok(())
            });
        }
    }

    fn server_header(&mut self, headers: &HeaderMap, writer: &EntryWriter) {
        let metadata = LoggedMetadata::new(headers, self.start.limits.header);
        let payload = EntryPayload::ServerHeader { metadata };
        self.log(
            writer,
            EventType::ServerHeader,
            payload,
            metadata.truncated(),
        );
    }

    /// A message entry, cut to the message limit; none for a message
    /// whose bytes the layer did not keep (it always does for a logger).
    fn message(&mut self, from_client: bool, payload: &Payload<'_>, writer: &EntryWriter) {
        let Some(data) = payload.data else {
            return;
        };
        let length = data.len();
        let limit = usize::try_from(self.start.limits.message).unwrap_or(usize::MAX);
        let payload = EntryPayload::Message {
            length: u32::try_from(length).unwrap_or(u32::MAX),
            data,
            kept: length.min(limit),
        };
        let kind = match from_client {
            true => EventType::ClientMessage,
            false => EventType::ServerMessage,
        };
        self.log(writer, kind, payload, length > limit);
    }

    fn trailer(&mut self, trailers: &HeldTrailers, status: &Status<'_>, writer: &EntryWriter) {
        let payload = EntryPayload::Trailer {
            metadata: &trailers.metadata,
            code: status.code as u32,
            message: status.message,
            details: &trailers.details,
        };
        self.log(writer, EventType::ServerTrailer, payload, false);
    }

    /// Logs the call's next entry. A client logs its peer on the
    /// server's header and trailer; a server on the client's header
    /// ([`client_header`]).
    fn log(
        &mut self,
        writer: &EntryWriter,
        kind: EventType,
        payload: EntryPayload<'_>,
        truncated: bool,
    ) {
        let sequence = self.take_sequence();
        let Self { start, mark, .. } = self;
        let peer = match (start.side, kind) {
            (Side::Client, EventType::ServerHeader | EventType::ServerTrailer) => {
                start.peer.as_ref()
            }
            _ => None,
        };
        let head = entry_head(start, sequence, kind, truncated, peer);
        let framing = writer.framing();
        writer.append(mark, |buf| encode_framed(&head, &payload, framing, buf));
    }

    /// The sequence number of the call's next entry.
    fn take_sequence(&mut self) -> u64 {
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        sequence
    }
}

/// Encodes `start`'s client header entry, framed, into `buf`: its
/// metadata, method, authority and timeout, and on a server its peer.
fn client_header(
    start: &CallStart,
    sequence: u64,
    headers: &HeaderMap,
    framing: Framing,
    buf: &mut Vec<u8>,
) -> io::Result<()> {
    let metadata = LoggedMetadata::new(headers, start.limits.header);
    let timeout = wire::status::timeout(headers)
        .and_then(|timeout| prost_types::Duration::try_from(timeout).ok());
    let payload = EntryPayload::ClientHeader {
        metadata,
        method: &start.method,
        authority: start.authority.as_deref().unwrap_or_default(),
        timeout,
    };
    // The server logs its peer on the client's header.
    let peer = match start.side {
        Side::Server => start.peer.as_ref(),
        Side::Client => None,
    };
    let head = entry_head(
        start,
        sequence,
        EventType::ClientHeader,
        metadata.truncated(),
        peer,
    );
    encode_framed(&head, &payload, framing, buf)
}

/// The fields of a call's entry, timestamped now.
fn entry_head<'a>(
    start: &CallStart,
    sequence: u64,
    kind: EventType,
    truncated: bool,
    peer: Option<&'a Address>,
) -> EntryHead<'a> {
    EntryHead {
        timestamp: SystemTime::now(),
        call_id: start.call_id,
        sequence,
        kind,
        logger: match start.side {
            Side::Client => Logger::Client,
            Side::Server => Logger::Server,
        },
        truncated,
        peer,
    }
}

/// tonic's answer for a path no service serves (its router's fallback and
/// a generated service's unknown method): `UNIMPLEMENTED`, trailers only,
/// no message. A handler's own `unimplemented` has one.
fn is_unknown_method(trailers: &HeaderMap) -> bool {
    wire::status::status_code(trailers) == Some(tonic::Code::Unimplemented)
        && wire::headers::first_value(trailers, &wire::status::GRPC_MESSAGE)
            .is_none_or(|value| value.is_empty())
}
