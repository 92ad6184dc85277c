//! One logged RPC: which entries its events become, in grpc-go's order
//! and by its rules (`internal/binarylog/method_logger.go`, and where
//! `server.go` and `stream.go` call it).

use std::time::SystemTime;

use bytes::Bytes;
use http::HeaderMap;
use tonic::Code;

use super::cancel::{CallEnd, Declared, logs_cancel};
use super::filter::LogLimits;
use super::metadata::{metadata, status_details, truncate_metadata};
use super::proto::grpc_log_entry::{EventType, Logger, Payload as EntryPayload};
use super::proto::{Address, ClientHeader, GrpcLogEntry, Message, Metadata, ServerHeader, Trailer};
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
    /// Server: the client's header, held until something shows the method
    /// exists (grpc-go logs nothing for an unknown method).
    held_header: Option<GrpcLogEntry>,
    /// Request messages seen.
    requests: u32,
    /// Response messages seen.
    responses: u32,
    /// The trailers sent (server) or received (client), logged at the
    /// call's end with its final status.
    trailers: Option<(Metadata, Bytes)>,
    /// The call's last entry (its trailer or cancel) was logged, or the
    /// call was found to be one not to log.
    over: bool,
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
        }
    }

    /// The entries `event` gives, handed to `log` in order.
    pub(crate) fn observe(&mut self, event: &RpcEvent<'_>, log: &mut impl FnMut(GrpcLogEntry)) {
        if self.over {
            return;
        }
        match (self.start.side, event) {
            (Side::Server, RpcEvent::InHeader(headers)) => {
                let entry = self.client_header(headers);
                self.held_header = Some(entry);
            }
            (Side::Client, RpcEvent::OutHeader(headers)) => {
                let entry = self.client_header(headers);
                log(entry);
            }
            (Side::Server, RpcEvent::OutHeader(headers))
            | (Side::Client, RpcEvent::InHeader(headers)) => {
                self.release_header(log);
                let entry = self.server_header(headers);
                log(entry);
            }
            (side, RpcEvent::InPayload(payload) | RpcEvent::OutPayload(payload)) => {
                self.release_header(log);
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
                if let Some(entry) = self.message(from_client, payload) {
                    log(entry);
                }
            }
            (_, RpcEvent::HalfClose { .. }) => {
                self.release_header(log);
                if self.client_streams() {
                    let entry = self.entry(EventType::ClientHalfClose, None, false);
                    log(entry);
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
                self.release_header(log);
                self.trailers = Some((metadata(trailers), status_details(trailers)));
            }
            (side, RpcEvent::End(end)) => {
                self.release_header(log);
                log(self.last_entry(side, end));
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

    /// The call's last entry, at its end when no trailer was logged: the
    /// client's cancel (the call dropped before its status, or a stream
    /// its deadline ended; see `cancel.rs`) or the status it ended with.
    fn last_entry(&mut self, side: Side, end: &End<'_>) -> GrpcLogEntry {
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
            return self.entry(EventType::Cancel, None, false);
        }
        let (metadata, details) = self.trailers.take().unwrap_or_default();
        let status = Status {
            code: end.code,
            message: end.message.to_owned(),
            details,
        };
        let peer = match side {
            Side::Client => self.start.peer.clone(),
            Side::Server => None,
        };
        self.trailer(metadata, status, peer)
    }

    fn release_header(&mut self, log: &mut impl FnMut(GrpcLogEntry)) {
        if let Some(entry) = self.held_header.take() {
            log(entry);
        }
    }

    fn client_header(&mut self, headers: &HeaderMap) -> GrpcLogEntry {
        let mut metadata = metadata(headers);
        let truncated = truncate_metadata(&mut metadata, self.start.limits.header);
        let timeout = wire::status::timeout(headers)
            .and_then(|timeout| prost_types::Duration::try_from(timeout).ok());
        let header = ClientHeader {
            metadata: Some(metadata),
            method_name: self.start.method.to_string(),
            authority: self
                .start
                .authority
                .as_deref()
                .unwrap_or_default()
                .to_owned(),
            timeout,
        };
        let mut entry = self.entry(
            EventType::ClientHeader,
            Some(EntryPayload::ClientHeader(header)),
            truncated,
        );
        // The server logs its peer on the client's header.
        if self.start.side == Side::Server {
            entry.peer = self.start.peer.clone();
        }
        entry
    }

    fn server_header(&mut self, headers: &HeaderMap) -> GrpcLogEntry {
        let mut metadata = metadata(headers);
        let truncated = truncate_metadata(&mut metadata, self.start.limits.header);
        let header = ServerHeader {
            metadata: Some(metadata),
        };
        let mut entry = self.entry(
            EventType::ServerHeader,
            Some(EntryPayload::ServerHeader(header)),
            truncated,
        );
        // The client logs its peer on the server's header.
        if self.start.side == Side::Client {
            entry.peer = self.start.peer.clone();
        }
        entry
    }

    /// A message entry, cut to the message limit; `None` for a message
    /// whose bytes the layer did not keep (it always does for a logger).
    fn message(&mut self, from_client: bool, payload: &Payload<'_>) -> Option<GrpcLogEntry> {
        let data = payload.data?;
        let length = data.len();
        let limit = usize::try_from(self.start.limits.message).unwrap_or(usize::MAX);
        let truncated = length > limit;
        let message = Message {
            length: u32::try_from(length).unwrap_or(u32::MAX),
            data: data.prefix(limit),
        };
        let kind = match from_client {
            true => EventType::ClientMessage,
            false => EventType::ServerMessage,
        };
        Some(self.entry(kind, Some(EntryPayload::Message(message)), truncated))
    }

    fn trailer(
        &mut self,
        metadata: Metadata,
        status: Status,
        peer: Option<Address>,
    ) -> GrpcLogEntry {
        let trailer = Trailer {
            metadata: Some(metadata),
            status_code: status.code as u32,
            status_message: status.message,
            status_details: status.details,
        };
        let mut entry = self.entry(
            EventType::ServerTrailer,
            Some(EntryPayload::Trailer(trailer)),
            false,
        );
        entry.peer = peer;
        entry
    }

    /// The next entry of this call.
    fn entry(
        &mut self,
        kind: EventType,
        payload: Option<EntryPayload>,
        truncated: bool,
    ) -> GrpcLogEntry {
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        let logger = match self.start.side {
            Side::Client => Logger::Client,
            Side::Server => Logger::Server,
        };
        GrpcLogEntry {
            timestamp: Some(SystemTime::now().into()),
            call_id: self.start.call_id,
            sequence_id_within_call: sequence,
            r#type: kind as i32,
            logger: logger as i32,
            payload,
            payload_truncated: truncated,
            peer: None,
        }
    }
}

/// A status as a trailer entry carries it.
struct Status {
    code: Code,
    message: String,
    details: Bytes,
}

/// tonic's answer for a path no service serves (its router's fallback and
/// a generated service's unknown method): `UNIMPLEMENTED`, trailers only,
/// no message. A handler's own `unimplemented` has one.
fn is_unknown_method(trailers: &HeaderMap) -> bool {
    wire::status::status_code(trailers) == Some(tonic::Code::Unimplemented)
        && wire::headers::first_value(trailers, &wire::status::GRPC_MESSAGE)
            .is_none_or(|value| value.is_empty())
}
