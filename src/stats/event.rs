//! The events a [`StatsHandler`] observes, and the
//! information it is given when an RPC or a connection is tagged.

use std::fmt;
use std::net::SocketAddr;
use std::time::Instant;

use http::HeaderMap;
use tonic::Code;

use super::frame::FrameError;
use super::message_data::MessageData;
#[cfg(doc)]
use crate::stats::StatsHandler;

/// Which end of an RPC or connection is observing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The server handling the RPC.
    Server,
    /// The client issuing the RPC.
    Client,
}

/// What is known about an RPC when it is tagged (grpc-go `RPCTagInfo`).
///
/// Built by the layer; [`RpcInfo::new`] builds one to drive a handler in
/// its own tests.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct RpcInfo<'a> {
    /// Server or client.
    pub side: Side,
    /// The full method name as in the request path, e.g. `/pkg.Service/Method`.
    pub method: &'a str,
    /// The request's authority (HTTP/2 `:authority`, the server's host and
    /// port as the client addressed it), where known: on the server, the
    /// request's; on the client, the request's, or, as tonic's channel
    /// adds it below the layer, the one the layer's connector dialled
    /// (`layer.connector()`, a connection being open as the RPC begins).
    pub authority: Option<&'a str>,
    /// The peer's address, where known: on the server, the client's
    /// address (TCP connections); on the client, the server's address when
    /// the channel was built with the layer's connector and a connection
    /// is open as the RPC begins (grpc-go reports it in the client's
    /// `OutHeader`).
    pub peer_addr: Option<SocketAddr>,
    /// The local address, where known (as `peer_addr`).
    pub local_addr: Option<SocketAddr>,
    /// Server: the request's extensions as the layer received them, where
    /// tonic keeps what it knows of the connection (`TcpConnectInfo`,
    /// `TlsConnectInfo` with the client's certificates, `UdsConnectInfo`).
    /// `None` on the client.
    pub extensions: Option<&'a http::Extensions>,
    /// Client: the attempt of a call this RPC is, when a retrying layer
    /// above the stats layer made it one
    /// (`retry::RetryLayer` puts a
    /// [`CallAttempt`](super::CallAttempt) in each attempt's extensions).
    /// `None` otherwise: the RPC is a call of one attempt.
    pub attempt: Option<&'a super::CallAttempt>,
}

impl<'a> RpcInfo<'a> {
    /// An RPC on `side` to `method` (`/pkg.Service/Method`), addresses
    /// unknown: for driving a handler in a test.
    ///
    /// ```
    /// use tonic_hotpath::stats::{RpcInfo, Side};
    ///
    /// let info = RpcInfo::new(Side::Server, "/pkg.Greeter/Hello")
    ///     .with_addrs(Some("127.0.0.1:4000".parse()?), None);
    /// assert_eq!(info.method, "/pkg.Greeter/Hello");
    /// # Ok::<(), std::net::AddrParseError>(())
    /// ```
    #[must_use]
    pub fn new(side: Side, method: &'a str) -> Self {
        Self {
            side,
            method,
            authority: None,
            peer_addr: None,
            local_addr: None,
            extensions: None,
            attempt: None,
        }
    }

    /// The same RPC as `attempt` of a call.
    #[must_use]
    pub fn with_attempt(mut self, attempt: &'a super::CallAttempt) -> Self {
        self.attempt = Some(attempt);
        self
    }

    /// The same RPC with these peer and local addresses.
    #[must_use]
    pub fn with_addrs(
        mut self,
        peer_addr: Option<SocketAddr>,
        local_addr: Option<SocketAddr>,
    ) -> Self {
        self.peer_addr = peer_addr;
        self.local_addr = local_addr;
        self
    }
}

/// What is known about a connection when it is tagged (grpc-go `ConnTagInfo`).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ConnInfo {
    /// Server (accepted) or client (dialled) connection.
    pub side: Side,
    /// The peer's address, where known.
    pub peer_addr: Option<SocketAddr>,
    /// The local address, where known.
    pub local_addr: Option<SocketAddr>,
}

impl ConnInfo {
    /// A connection on `side` with these addresses: for driving a handler
    /// in a test.
    ///
    /// ```
    /// use tonic_hotpath::stats::{ConnInfo, Side};
    ///
    /// let info = ConnInfo::new(Side::Client, Some("127.0.0.1:50051".parse()?), None);
    /// assert_eq!(info.peer_addr.unwrap().port(), 50051);
    /// # Ok::<(), std::net::AddrParseError>(())
    /// ```
    #[must_use]
    pub fn new(side: Side, peer_addr: Option<SocketAddr>, local_addr: Option<SocketAddr>) -> Self {
        Self {
            side,
            peer_addr,
            local_addr,
        }
    }
}

/// A connection event (grpc-go `ConnBegin` / `ConnEnd`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
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
/// counts with a length prefix it never fills. A compressed message that
/// cannot be decompressed gives no payload event either: it is an error in
/// [`End::error`], as the receiver's decoder reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Payload<'a> {
    /// The message's length, uncompressed (grpc-go `Length`), without
    /// gRPC's 5-byte prefix. Always `Some` for a message sent
    /// uncompressed (it is then `compressed_length`). For a compressed
    /// message (`grpc-encoding` `gzip`, `deflate` or `zstd`) it is known
    /// only by decompressing it, which the layer does only when one of its
    /// handlers asks
    /// ([`StatsHandler::UNCOMPRESSED_SIZES`],
    /// and on the client for the messages it receives): otherwise `None`.
    pub length: Option<u32>,
    /// The message's length as sent, without the 5-byte prefix (grpc-go
    /// `CompressedLength`): the compressed size for a compressed message,
    /// `length` otherwise.
    pub compressed_length: u32,
    /// The length on the wire: `compressed_length` plus the 5-byte prefix
    /// (grpc-go `WireLength`).
    pub wire_length: u64,
    /// Whether the message's compressed flag was set.
    pub compressed: bool,
    /// When the message's last byte was seen (messages that complete in
    /// one body chunk share one reading). `None` when no handler of the
    /// layer asked for payload times
    /// ([`StatsHandler::PAYLOAD_TIMES`]).
    pub time: Option<Instant>,
    /// The message's bytes, uncompressed (grpc-go `Data`, decompressed):
    /// `Some` when a handler of the layer asked for them
    /// ([`StatsHandler::MESSAGE_DATA`]), else `None`.
    pub data: Option<MessageData<'a>>,
}

impl<'a> Payload<'a> {
    /// A message of `length` bytes sent uncompressed: for driving a handler
    /// in a test (the layer builds the real ones).
    ///
    /// ```
    /// use tonic_hotpath::stats::Payload;
    ///
    /// let payload = Payload::uncompressed(7);
    /// assert_eq!(
    ///     (payload.length, payload.compressed_length, payload.wire_length),
    ///     (Some(7), 7, 12)
    /// );
    /// let gzipped = Payload::compressed(65_536, 261);
    /// assert_eq!((gzipped.length, gzipped.wire_length), (Some(65_536), 266));
    /// let unmeasured = Payload::compressed_unmeasured(261);
    /// assert_eq!((unmeasured.length, unmeasured.wire_length), (None, 266));
    /// ```
    #[must_use]
    pub fn uncompressed(length: u32) -> Self {
        Self::new(Some(length), length, false)
    }

    /// A message of `length` bytes sent compressed into `compressed_length`
    /// bytes (see [`uncompressed`](Self::uncompressed)).
    #[must_use]
    pub fn compressed(length: u32, compressed_length: u32) -> Self {
        Self::new(Some(length), compressed_length, true)
    }

    /// A message sent compressed into `compressed_length` bytes whose
    /// uncompressed length was not measured (no handler asked for it; see
    /// [`uncompressed`](Self::uncompressed)).
    #[must_use]
    pub fn compressed_unmeasured(compressed_length: u32) -> Self {
        Self::new(None, compressed_length, true)
    }

    pub(crate) fn new(length: Option<u32>, compressed_length: u32, compressed: bool) -> Self {
        Self {
            length,
            compressed_length,
            wire_length: u64::from(compressed_length)
                + super::frame::FrameHeader::PREFIX_LEN as u64,
            compressed,
            time: None,
            data: None,
        }
    }

    /// The same message, seen at `time`.
    #[must_use]
    pub fn with_time(mut self, time: Option<Instant>) -> Self {
        self.time = time;
        self
    }

    /// The same message, with its bytes.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use tonic_hotpath::stats::{MessageData, Payload};
    ///
    /// let bytes = [Bytes::from_static(b"hi")];
    /// let payload = Payload::uncompressed(2).with_data(Some(MessageData::new(&bytes)));
    /// assert_eq!(payload.data.unwrap().to_bytes(), "hi");
    /// ```
    #[must_use]
    pub fn with_data<'b>(self, data: Option<MessageData<'b>>) -> Payload<'b> {
        Payload {
            length: self.length,
            compressed_length: self.compressed_length,
            wire_length: self.wire_length,
            compressed: self.compressed,
            time: self.time,
            data,
        }
    }
}

/// The end of an RPC (grpc-go `End`). Exactly one per `Begin`.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct End<'a> {
    /// The final status code: the code of the status the application saw,
    /// as grpc-go's `End.Error`.
    ///
    /// - Client: the code tonic hands the caller.
    ///   - A response without `grpc-status` (a proxy answering `503`, a
    ///     load balancer's `404`): the code tonic maps its HTTP status to
    ///     (`503`, `502`, `504`, `429`: `Unavailable`; `404`:
    ///     `Unimplemented`; `401`: `Unauthenticated`; `403`:
    ///     `PermissionDenied`; `400`: `Internal`; `200` and others:
    ///     `Unknown`), with tonic's message in [`message`](Self::message).
    ///   - A `grpc-status` in the response headers is the status, whatever
    ///     body follows; a response compressed with an encoding the client
    ///     does not accept is `Unimplemented`.
    ///   - h2/hyper errors as tonic's `Status::from_error` maps them (a
    ///     stream reset with `CANCEL` is `Cancelled`, GOAWAY
    ///     `ENHANCE_YOUR_CALM` `ResourceExhausted`, a protocol error such
    ///     as oversized response headers `Internal`).
    ///   - A response message tonic's decoder refuses, as it reports it,
    ///     also when `grpc-status: 0` follows: a flag other than 0/1, a
    ///     message cut short, a compressed message without `grpc-encoding`
    ///     or that does not decompress: `Internal`; a length over the
    ///     layer's limit: `OutOfRange`; decompressed past the limit:
    ///     `ResourceExhausted`. One exception: tonic 0.14 sees a message
    ///     cut short only in a unary answer ("Missing response
    ///     message"); a streaming caller whose stream ends mid-message
    ///     (trailers next, or right after a whole prefix) sees a clean
    ///     end. `End` says `Internal` there too, as grpc-go does.
    ///   - What a tower layer cannot see: a well-framed message the
    ///     client's codec cannot decode (not valid protobuf for the
    ///     method). tonic hands the caller `Internal` and drops the
    ///     response right after that message, exactly as a streaming
    ///     caller that stops reading early does: `End` says `Cancelled`.
    ///   - Two cases follow grpc-go where tonic says otherwise: the call's
    ///     own deadline passing is `DeadlineExceeded` (tonic: `Cancelled`,
    ///     "Timeout expired"), and a connection that broke under the call
    ///     is `Unavailable` (tonic: `Unknown`, "h2 protocol error").
    /// - Server: the status sent to the client, unless the client reset the
    ///   stream (or the connection broke) first: then `Cancelled` (or the
    ///   code of that failure), whatever the handler answers afterwards.
    ///   A service inside the layer that fails instead of answering (a
    ///   tower layer such as `load_shed` or `timeout`) ends with what tonic
    ///   sends for that error (its `RecoverError`: `ResourceExhausted` for
    ///   load shedding, a status found in the error's source chain, ...),
    ///   and `Internal` for any other error, on which hyper resets the
    ///   stream and the client reads `Internal`.
    /// - Both: `Cancelled` when the call is dropped before its status is
    ///   known, and `DeadlineExceeded` instead of `Cancelled` once the
    ///   request's deadline (`grpc-timeout`) has passed.
    pub code: Code,
    /// The status message: `grpc-message` (percent-decoded) when the status
    /// came from the peer, the message tonic gives when the layer found the
    /// status otherwise (a missing `grpc-status`, a service error); empty
    /// when there was none.
    pub message: &'a str,
    /// When the RPC began.
    pub begin_time: Instant,
    /// When it ended.
    pub end_time: Instant,
    /// The first error observed, if any.
    pub error: Option<&'a RpcError>,
}

impl<'a> End<'a> {
    /// An RPC that began at `begin_time` and ended at `end_time` with
    /// `code`, no message and no error: for driving a handler in a test.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    ///
    /// use tonic::Code;
    /// use tonic_hotpath::stats::{End, RpcError};
    ///
    /// let begin = Instant::now();
    /// let error = RpcError::Cancelled;
    /// let end = End::new(Code::Cancelled, begin, begin + Duration::from_millis(3))
    ///     .with_message("gone")
    ///     .with_error(Some(&error));
    /// assert_eq!(end.message, "gone");
    /// ```
    #[must_use]
    pub fn new(code: Code, begin_time: Instant, end_time: Instant) -> Self {
        Self {
            code,
            message: "",
            begin_time,
            end_time,
            error: None,
        }
    }

    /// The same end with this status message.
    #[must_use]
    pub fn with_message(mut self, message: &'a str) -> Self {
        self.message = message;
        self
    }

    /// The same end with this error.
    #[must_use]
    pub fn with_error(mut self, error: Option<&'a RpcError>) -> Self {
        self.error = error;
        self
    }
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
///
/// use tonic::Code;
/// use tonic_hotpath::stats::{RpcEvent, ShardedCounter, StatsHandler};
///
/// /// Bytes on the wire per direction, and failed RPCs.
/// #[derive(Debug, Default)]
/// struct Traffic {
///     sent: ShardedCounter,
///     received: ShardedCounter,
///     failed: ShardedCounter,
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
///                 self.sent.add(p.wire_length);
///             }
///             RpcEvent::InPayload(p) => {
///                 self.received.add(p.wire_length);
///             }
///             RpcEvent::End(end) if end.code != Code::Ok => {
///                 self.failed.add(1);
///             }
///             _ => {}
///         }
///     }
/// }
/// # let _ = Traffic::default();
/// ```
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
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
    InPayload(Payload<'a>),
    /// A message sent.
    OutPayload(Payload<'a>),
    /// The client finished sending (grpc-go's `CloseSend`): on the
    /// server, the request body ended as the service read it; on the
    /// client, the request body ended as it was sent. Delivered only when
    /// a handler of the layer asks ([`StatsHandler::HALF_CLOSE`]), once
    /// at most, between the payload events.
    HalfClose {
        /// When the end was seen.
        time: Instant,
    },
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
#[non_exhaustive]
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
    /// A compressed message could not be decompressed, so its size is
    /// unknown and no payload event was delivered for it.
    Compression {
        /// Which body.
        direction: Direction,
        /// What was wrong.
        error: CompressionError,
    },
    /// The RPC was dropped before its status was known.
    Cancelled,
    /// The RPC's response ended without a `grpc-status`: its code is the
    /// one tonic's client infers from the HTTP status (`503` is
    /// `Unavailable`, `200` is `Unknown`, ...).
    MissingStatus {
        /// The response's HTTP status code.
        http_status: u16,
    },
}

impl RpcError {
    /// The status tonic's decoder hands a receiver for this error in a
    /// body it reads, if it is about a message it cannot receive.
    pub(crate) fn receiver_code(&self) -> Option<Code> {
        match self {
            RpcError::Frame { error, .. } => Some(error.code()),
            RpcError::Compression { error, .. } => Some(error.code()),
            _ => None,
        }
    }
}

/// A compressed message that its receiver cannot decompress, as tonic's
/// decoder judges it (tonic `codec/decode.rs`, gRPC's compression spec).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CompressionError {
    /// The message's compressed flag is set but the body declares no
    /// `grpc-encoding` (or `identity`).
    MissingEncoding,
    /// The body is compressed with an encoding the receiver does not
    /// accept (a client: one it did not list in `grpc-accept-encoding`).
    UnsupportedEncoding {
        /// The `grpc-encoding` value, lossily decoded.
        encoding: String,
    },
    /// The bytes do not decompress with the body's encoding.
    Corrupt {
        /// The decoder's error.
        message: String,
    },
    /// Decompressed, the message is longer than the receiver's limit.
    TooLarge {
        /// The limit, in bytes.
        limit: u32,
    },
}

impl CompressionError {
    /// The status tonic's decoder gives the receiver: `Internal` for a
    /// missing encoding or corrupt data, `Unimplemented` for an encoding it
    /// does not accept, `ResourceExhausted` past the limit.
    pub fn code(&self) -> Code {
        match self {
            CompressionError::MissingEncoding | CompressionError::Corrupt { .. } => Code::Internal,
            CompressionError::UnsupportedEncoding { .. } => Code::Unimplemented,
            CompressionError::TooLarge { .. } => Code::ResourceExhausted,
        }
    }
}

impl fmt::Display for CompressionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompressionError::MissingEncoding => f.write_str(
                "message has its compressed flag set but no grpc-encoding was specified",
            ),
            CompressionError::UnsupportedEncoding { encoding } => {
                write!(
                    f,
                    "content is compressed with `{encoding}`, which the receiver does not accept"
                )
            }
            CompressionError::Corrupt { message } => write!(f, "error decompressing: {message}"),
            CompressionError::TooLarge { limit } => write!(
                f,
                "size limit of {limit} bytes exceeded while decompressing message"
            ),
        }
    }
}

impl std::error::Error for CompressionError {}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RpcError::Frame { direction, error } => write!(f, "{direction} body: {error}"),
            RpcError::Body { direction, message } => {
                write!(f, "{direction} body error: {message}")
            }
            RpcError::Service { message } => write!(f, "service error: {message}"),
            RpcError::Compression { direction, error } => write!(f, "{direction} body: {error}"),
            RpcError::Cancelled => f.write_str("rpc dropped before its status was known"),
            RpcError::MissingStatus { http_status } => write!(
                f,
                "response ended without grpc-status (HTTP status {http_status})"
            ),
        }
    }
}

impl std::error::Error for RpcError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RpcError::Frame { error, .. } => Some(error),
            RpcError::Compression { error, .. } => Some(error),
            _ => None,
        }
    }
}
