//! [`BinaryLog`]: the binary logger, a stats handler for a server's or a
//! client's [`CombinedLayer`](crate::stats::CombinedLayer).

use std::cell::Cell;
use std::collections::HashSet;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::address::ip_address;
use super::call::{Call, CallStart};
use super::filter::Filter;
use super::sink::Sink;
use super::writer::{EntryWriter, LogCounts, WriterOptions};
use crate::stats::{RpcEvent, RpcInfo, Side, StatsHandler};

/// gRPC binary logging (gRFC A16) as a stats handler: each RPC the
/// [`Filter`] selects is logged entry by entry (its headers, messages,
/// half-close, trailer or cancel) as `grpc.binarylog.v1.GrpcLogEntry`,
/// as grpc-go logs it, to a [`Sink`].
///
/// Add it to a server's or a client's layer with `.with(log.clone())`;
/// clones share one writer. Each RPC encodes its entries on its own
/// thread, straight into their wire format and into that thread's buffer;
/// a thread of the log's own takes the buffers and writes them to the
/// sink: an RPC never waits for the sink. Past a bounded memory budget
/// ([`BinaryLogBuilder::max_queued_bytes`]) an entry is dropped and
/// counted ([`counts`](Self::counts)). A call's entries reach the sink in
/// order, and calls' entries interleave in the order the threads' buffers
/// were taken: entries that different threads logged within about a
/// millisecond of each other (one sweep of the writer's) may be written
/// in either order. grpc-go writes every entry under one lock, in the
/// order logged.
/// [`shutdown`](Self::shutdown) (or dropping the last clone and every
/// layer holding one) writes what is queued and flushes the sink.
///
/// Entries follow grpc-go (`internal/binarylog`, and where its server and
/// client streams call it): the client's header with method, authority
/// and timeout; messages uncompressed, cut to the filter's message limit
/// (`length` stays the whole length); the server's header (none for a
/// trailers-only answer); the client's half-close for methods that stream
/// requests; the trailer with status code, message and details, or on the
/// client a `CANCEL` when the call was dropped before its status or its
/// deadline ended a stream (a unary call's passed deadline is a trailer
/// with `DEADLINE_EXCEEDED`, as in grpc-go).
/// The peer is on the server's client header and the client's server
/// header and trailer (a client logs it when its channel was built with
/// the layer's connector, `layer.connector()`, over TCP; a client over a
/// Unix socket logs none). Where a tower layer sees less than grpc-go's own
/// streams, this is what it does:
///
/// - An unknown method: tonic answers a path no service serves with
///   `UNIMPLEMENTED`, trailers only and no message; a server logs nothing
///   for such a call (as grpc-go), and also nothing for a handler that
///   answers the same without reading its request.
/// - The half-close: a layer cannot tell a method's kind from its
///   requests; see [`BinaryLogBuilder::client_streaming`].
/// - A client's passed deadline: grpc-go logs `CANCEL` for a stream (a
///   goroutine of each stream finishes it with the context's error as the
///   deadline passes) and a trailer with `DEADLINE_EXCEEDED` for a unary
///   call (its deadline comes back as the transport's status), from the
///   method's descriptor. Here a client call its deadline ended (`End`
///   says `DEADLINE_EXCEEDED`: dropped at or after the deadline, or reset
///   past it) with no trailers from the server logs `CANCEL` when it
///   streams: by each kind the application declared
///   ([`client_streaming`](BinaryLogBuilder::client_streaming),
///   [`server_streaming`](BinaryLogBuilder::server_streaming)), and for
///   a kind it declared nothing of, by what the call carried: more than
///   one request, or a response message with no trailers after it. The
///   traffic is read so because it errs only at the edges: a unary
///   answer is its message and its trailers back to back, so a unary
///   call is taken for a stream only if its deadline falls between the
///   two; a stream is taken for unary only if it sent at most one request
///   and received nothing before its deadline (a watch with no news),
///   which a declaration settles. Trailers that arrived are logged as
///   they came (grpc-go too logs them when they beat its cancel).
/// - A server call the client cancelled (or whose deadline tonic
///   enforced) ends with the status tonic gives (`CANCELLED` with no
///   message, `CANCELLED` "Timeout expired"), where a grpc-go server logs
///   its handler's return.
/// - Headers are logged as they cross the layer: a server's response
///   headers without the `date` hyper adds below it, a client's with it;
///   a client's request headers with what handlers of the same layer add
///   (trace context) and what layers outside it added (an org id stamped
///   by a `tenant` client layer above it in the `ServiceBuilder`), not
///   what layers inside it add later.
///
/// The comparison with grpc-go's own log, call by call, is the crate's
/// `tests/binlog/interop_go.rs`.
///
/// ```no_run
/// use tonic_hotpath::binlog::{BinaryLog, FileSink, Filter, Framing};
/// use tonic_hotpath::stats::CombinedLayer;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // GRPC_BINARY_LOG_FILTER, or every method when it is not set.
/// let filter = Filter::from_env()?.unwrap_or_else(Filter::all);
/// let log = BinaryLog::builder(filter, FileSink::create("/tmp/grpc.binlog", Framing::Grpc)?).build()?;
/// let layer = CombinedLayer::server().with(log.clone());
/// // Server::builder().layer(layer).add_service(..).serve(..).await?;
/// # let _ = layer;
/// log.shutdown()?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct BinaryLog {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    filter: Filter,
    client_streaming: HashSet<Box<str>>,
    declared: bool,
    server_streaming: HashSet<Box<str>>,
    server_declared: bool,
    writer: EntryWriter,
}

impl BinaryLog {
    /// A log of the calls `filter` selects, written to `sink`: the
    /// builder's defaults are an 8 MiB budget of waiting entries and a 1 s flush
    /// interval, and its [`build`](BinaryLogBuilder::build) fails only if
    /// the writer's thread cannot be started.
    pub fn builder(filter: Filter, sink: impl Sink) -> BinaryLogBuilder {
        BinaryLogBuilder {
            filter,
            sink: Box::new(sink),
            options: WriterOptions::default(),
            client_streaming: HashSet::new(),
            declared: false,
            server_streaming: HashSet::new(),
            server_declared: false,
        }
    }

    /// How many entries were written, dropped (their thread's buffer full, or logged after
    /// shutdown) and failed (the sink returned an error).
    pub fn counts(&self) -> LogCounts {
        self.shared.writer.counts()
    }

    /// Asks the writer to flush the sink soon; does not wait.
    pub fn flush(&self) {
        self.shared.writer.flush();
    }

    /// Writes every queued entry, flushes the sink and stops the writer;
    /// entries logged afterwards are dropped and counted. Returns the
    /// first error the sink returned, if any. Calling it again does
    /// nothing.
    pub fn shutdown(&self) -> io::Result<()> {
        self.shared.writer.shutdown()
    }
}

/// Builds a [`BinaryLog`] (see [`BinaryLog::builder`]).
pub struct BinaryLogBuilder {
    filter: Filter,
    sink: Box<dyn Sink>,
    options: WriterOptions,
    client_streaming: HashSet<Box<str>>,
    declared: bool,
    server_streaming: HashSet<Box<str>>,
    server_declared: bool,
}

impl std::fmt::Debug for BinaryLogBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BinaryLogBuilder")
            .field("filter", &self.filter)
            .field("options", &self.options)
            .field("client_streaming", &self.client_streaming)
            .field("server_streaming", &self.server_streaming)
            .finish_non_exhaustive()
    }
}

impl BinaryLogBuilder {
    /// How many bytes of encoded entries may wait for the writer (see
    /// [`WriterOptions::max_queued_bytes`]); past it, entries are dropped
    /// and counted.
    #[must_use]
    pub fn max_queued_bytes(mut self, bytes: usize) -> Self {
        self.options = self.options.max_queued_bytes(bytes);
        self
    }

    /// How often the writer flushes the sink while entries arrive.
    #[must_use]
    pub fn flush_interval(mut self, interval: Duration) -> Self {
        self.options = self.options.with_flush_interval(interval);
        self
    }

    /// The application's methods (`/pkg.Service/Method`) that stream
    /// requests (client streaming and bidirectional): their half-close is
    /// logged, and no other method's is, exactly as grpc-go does from its
    /// method descriptors. A tower layer cannot tell a method's kind from
    /// its requests, so without this list a call that sent exactly one
    /// request is taken for a unary or server-streaming one (no
    /// half-close), and any other for a streaming one. The list also
    /// counts for a passed deadline, as
    /// [`server_streaming`](Self::server_streaming) does.
    #[must_use]
    pub fn client_streaming<I, S>(mut self, methods: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.declared = true;
        self.client_streaming
            .extend(methods.into_iter().map(|m| Box::from(m.as_ref())));
        self
    }

    /// The application's methods (`/pkg.Service/Method`) that stream
    /// responses (server streaming and bidirectional): on the client, such
    /// a call that its deadline ends logs `CANCEL`, as grpc-go's streams
    /// do, and no other method's does unless it streams requests (a unary
    /// call logs a trailer with `DEADLINE_EXCEEDED`). Without this list a
    /// call that received a response message and no trailers by then is
    /// taken for one that streams responses, and any other for one that
    /// does not (see [`BinaryLog`], "a client's passed deadline").
    #[must_use]
    pub fn server_streaming<I, S>(mut self, methods: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.server_declared = true;
        self.server_streaming
            .extend(methods.into_iter().map(|m| Box::from(m.as_ref())));
        self
    }

    /// Starts the writer's thread (the only way this fails).
    pub fn build(self) -> io::Result<BinaryLog> {
        Ok(BinaryLog {
            shared: Arc::new(Shared {
                filter: self.filter,
                client_streaming: self.client_streaming,
                declared: self.declared,
                server_streaming: self.server_streaming,
                server_declared: self.server_declared,
                writer: EntryWriter::spawn(self.sink, self.options)?,
            }),
        })
    }
}

/// A call's logging state: `None` for a call the filter does not select.
#[derive(Debug, Default)]
pub struct CallLog(Option<Box<Call>>);

impl StatsHandler for BinaryLog {
    type RpcState = CallLog;
    type ConnState = ();
    const PAYLOAD_TIMES: bool = false;
    const MESSAGE_DATA: bool = true;
    const HALF_CLOSE: bool = true;

    fn tag_rpc(&self, info: &RpcInfo<'_>, _: Option<&()>) -> CallLog {
        let Some(limits) = self.shared.filter.lookup(info.method) else {
            return CallLog(None);
        };
        let client_streaming = self
            .shared
            .declared
            .then(|| self.shared.client_streaming.contains(info.method));
        let server_streaming = self
            .shared
            .server_declared
            .then(|| self.shared.server_streaming.contains(info.method));
        CallLog(Some(Box::new(Call::new(CallStart {
            call_id: next_call_id(),
            side: info.side,
            limits,
            method: info.method.into(),
            authority: info.authority.map(Box::from),
            peer: peer(info),
            client_streaming,
            server_streaming,
        }))))
    }

    fn wants_message_data(&self, state: &CallLog) -> bool {
        state.0.is_some()
    }

    fn handle_rpc(&self, state: &mut CallLog, event: &RpcEvent<'_>) {
        if let Some(call) = &mut state.0 {
            call.observe(event, &self.shared.writer);
        }
    }

    fn service_dropped(&self) {
        self.shared.writer.flush();
    }
}

/// The peer as grpc-go logs it: its IP address, or on a server its Unix
/// socket.
fn peer(info: &RpcInfo<'_>) -> Option<super::proto::Address> {
    if let Some(addr) = info.peer_addr {
        return Some(ip_address(addr));
    }
    #[cfg(unix)]
    if info.side == Side::Server {
        let uds = info
            .extensions
            .and_then(|extensions| extensions.get::<tonic::transport::server::UdsConnectInfo>());
        if let Some(uds) = uds {
            let path = uds.peer_addr.as_ref().and_then(|addr| addr.as_pathname());
            return Some(super::address::unix_address(path));
        }
    }
    None
}

/// Call ids are unique in the process (as grpc-go's): each thread takes a
/// block of them at a time, so a call does not touch a shared counter.
fn next_call_id() -> u64 {
    const BLOCK: u64 = 1024;
    static NEXT_BLOCK: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static IDS: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
    }
    IDS.with(|ids| {
        let (mut next, mut end) = ids.get();
        if next == end {
            next = NEXT_BLOCK.fetch_add(BLOCK, Ordering::Relaxed);
            end = next + BLOCK;
        }
        ids.set((next + 1, end));
        next
    })
}
