//! The events a [`StatsHandler`](super::StatsHandler) observes, and the
//! information it is given when an RPC or a connection is tagged.

use std::fmt;
use std::net::SocketAddr;
use std::time::Instant;

use http::HeaderMap;
use tonic::Code;

use super::frame::FrameError;

/// Which end of an RPC or connection is observing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The server handling the RPC.
    Server,
    /// The client issuing the RPC.
    Client,
}

/// What is known about an RPC when it is tagged (grpc-go `RPCTagInfo`).
#[derive(Debug, Clone, Copy)]
pub struct RpcInfo<'a> {
    /// Server or client.
    pub side: Side,
    /// The full method name as in the request path, e.g. `/pkg.Service/Method`.
    pub method: &'a str,
    /// The peer's address, where known: on the server, the client's
    /// address (TCP connections); on the client, the server's address when
    /// the channel was built with the layer's connector and a connection
    /// is open as the RPC begins (grpc-go reports it in the client's
    /// `OutHeader`).
    pub peer_addr: Option<SocketAddr>,
    /// The local address, where known (as `peer_addr`).
    pub local_addr: Option<SocketAddr>,
}

/// What is known about a connection when it is tagged (grpc-go `ConnTagInfo`).
#[derive(Debug, Clone, Copy)]
pub struct ConnInfo {
    /// Server (accepted) or client (dialled) connection.
    pub side: Side,
    /// The peer's address, where known.
    pub peer_addr: Option<SocketAddr>,
    /// The local address, where known.
    pub local_addr: Option<SocketAddr>,
}

/// A connection event (grpc-go `ConnBegin` / `ConnEnd`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnEvent {
    /// The connection was established.
    Begin {
        /// When it was established.
        time: Instant,
    },
    /// The connection was closed (its IO object was dropped).
    End {
        /// When it was closed.
        time: Instant,
    },
}

/// One gRPC message seen on a body (grpc-go `InPayload` / `OutPayload`).
///
/// Delivered once the whole message (its 5-byte prefix and every byte the
/// prefix announces) has passed through the body, as grpc-go does: a
/// message that never completes gives no payload event (the stream ending
/// inside it is reported in [`End::error`]), so a peer cannot inflate byte
/// counts with a length prefix it never fills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Payload {
    /// The message length on the wire without the 5-byte prefix. For a
    /// compressed message this is the compressed size: the uncompressed size
    /// is not visible without decompressing the message.
    pub length: u32,
    /// The length on the wire including the 5-byte prefix.
    pub wire_length: u64,
    /// Whether the message's compressed flag was set.
    pub compressed: bool,
    /// When the message's last byte was seen (messages that complete in
    /// one body chunk share one reading). `None` when no handler of the
    /// layer asked for payload times
    /// ([`StatsHandler::PAYLOAD_TIMES`](super::StatsHandler::PAYLOAD_TIMES)).
    pub time: Option<Instant>,
}

/// The end of an RPC (grpc-go `End`). Exactly one per `Begin`.
#[derive(Debug, Clone, Copy)]
pub struct End<'a> {
    /// The final status code: the code of the status the application saw,
    /// as grpc-go's `End.Error`.
    ///
    /// - Client: the code tonic hands the caller, with h2/hyper errors
    ///   mapped as tonic's `Status::from_error` maps them (a stream reset
    ///   with `CANCEL` is `Cancelled`, GOAWAY `ENHANCE_YOUR_CALM`
    ///   `ResourceExhausted`, a protocol error such as oversized response
    ///   headers `Internal`), and malformed response framing as tonic's
    ///   decoder reports it (flag other than 0/1 or a message cut short:
    ///   `Internal`, also when `grpc-status: 0` follows; a length over the
    ///   layer's limit: `OutOfRange`). Two cases follow grpc-go where
    ///   tonic says otherwise: the call's own deadline passing is
    ///   `DeadlineExceeded` (tonic: `Cancelled`, "Timeout expired"), and a
    ///   connection that broke under the call is `Unavailable` (tonic:
    ///   `Unknown`, "h2 protocol error").
    /// - Server: the status sent to the client, unless the client reset the
    ///   stream (or the connection broke) first: then `Cancelled` (or the
    ///   code of that failure), whatever the handler answers afterwards.
    /// - Both: `Cancelled` when the call is dropped before its status is
    ///   known, and `DeadlineExceeded` instead of `Cancelled` once the
    ///   request's deadline (`grpc-timeout`) has passed.
    pub code: Code,
    /// The status message from `grpc-message` (percent-decoded), empty when
    /// there was none.
    pub message: &'a str,
    /// When the RPC began.
    pub begin_time: Instant,
    /// When it ended.
    pub end_time: Instant,
    /// The first error observed, if any.
    pub error: Option<&'a RpcError>,
}

/// An RPC event, in grpc-go's order.
///
/// Server: `InHeader`, `Begin`, `InPayload`*, `OutHeader`, `OutPayload`*,
/// `OutTrailer`, `End` (grpc-go: "Begin is called after the InHeader
/// event"). Client: `Begin`, `OutHeader`, `OutPayload`*,
/// `InHeader`, `InPayload`*, `InTrailer`, `End`. Request and response
/// payloads interleave as they happen in streaming RPCs. A trailers-only
/// response (status in the headers, no body) gives `OutTrailer` /
/// `InTrailer` with those headers and no `OutHeader` / `InHeader`, as in
/// grpc-go. Once the client has reset the stream (or the connection broke),
/// the server's later `OutHeader`, `OutPayload` and `OutTrailer` are not
/// delivered: as in grpc-go, nothing more is written to a closed stream.
///
/// A handler matches the events it needs and ignores the rest; the
/// references are only valid during the call:
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
///
/// use tonic::Code;
/// use tonic_hotpath::stats::{RpcEvent, StatsHandler};
///
/// /// Bytes on the wire per direction, and failed RPCs.
/// #[derive(Debug, Default)]
/// struct Traffic {
///     sent: AtomicU64,
///     received: AtomicU64,
///     failed: AtomicU64,
/// }
///
/// impl StatsHandler for Traffic {
///     type RpcState = ();
///     type ConnState = ();
///     const PAYLOAD_TIMES: bool = false;
///
///     fn handle_rpc(&self, _: &mut (), event: &RpcEvent<'_>) {
///         match event {
///             RpcEvent::OutPayload(p) => {
///                 self.sent.fetch_add(p.wire_length, Ordering::Relaxed);
///             }
///             RpcEvent::InPayload(p) => {
///                 self.received.fetch_add(p.wire_length, Ordering::Relaxed);
///             }
///             RpcEvent::End(end) if end.code != Code::Ok => {
///                 self.failed.fetch_add(1, Ordering::Relaxed);
///             }
///             _ => {}
///         }
///     }
/// }
/// # let _ = Traffic::default();
/// ```
#[derive(Debug, Clone, Copy)]
pub enum RpcEvent<'a> {
    /// The RPC began.
    Begin {
        /// When it began.
        time: Instant,
    },
    /// Request headers received (server).
    InHeader(&'a HeaderMap),
    /// Headers sent: request headers (client) or response headers (server).
    OutHeader(&'a HeaderMap),
    /// A message received.
    InPayload(Payload),
    /// A message sent.
    OutPayload(Payload),
    /// Trailers received (client).
    InTrailer(&'a HeaderMap),
    /// Trailers sent (server).
    OutTrailer(&'a HeaderMap),
    /// The RPC ended.
    End(End<'a>),
}

/// Which body of an RPC an error was seen on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// The body this side receives.
    Inbound,
    /// The body this side sends.
    Outbound,
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Direction::Inbound => "inbound",
            Direction::Outbound => "outbound",
        })
    }
}

/// An error observed during an RPC, reported in [`End::error`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RpcError {
    /// A body carried malformed gRPC framing.
    Frame {
        /// Which body.
        direction: Direction,
        /// What was wrong.
        error: FrameError,
    },
    /// A body returned an error.
    Body {
        /// Which body.
        direction: Direction,
        /// The error's text.
        message: String,
    },
    /// The inner service (the handler's routes, or the client's channel)
    /// returned an error instead of a response.
    Service {
        /// The error's text.
        message: String,
    },
    /// The RPC was dropped before its status was known.
    Cancelled,
    /// The RPC's response stream ended without a `grpc-status`.
    MissingStatus,
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RpcError::Frame { direction, error } => write!(f, "{direction} body: {error}"),
            RpcError::Body { direction, message } => {
                write!(f, "{direction} body error: {message}")
            }
            RpcError::Service { message } => write!(f, "service error: {message}"),
            RpcError::Cancelled => f.write_str("rpc dropped before its status was known"),
            RpcError::MissingStatus => f.write_str("response ended without grpc-status"),
        }
    }
}

impl std::error::Error for RpcError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RpcError::Frame { error, .. } => Some(error),
            _ => None,
        }
    }
}
