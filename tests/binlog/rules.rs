//! The entry rules the interop test's script does not reach, over a real
//! tonic server and client on 127.0.0.1 (or `[::1]`, or a Unix socket),
//! each behind a `CombinedLayer` with the same [`BinaryLog`]: header and
//! message truncation at their boundaries (`truncation`); half-close with
//! and without declared client-streaming methods, a client's passed
//! deadline with and without declared server-streaming methods, unknown
//! methods and services, exclusions (`calls`); peers, compression and plain HTTP
//! beside gRPC (`transport`); a full queue, a clean stop and rotation
//! under load (`load`). This file is their rig.
//!
//! A call's entries are compared whole, one line each ([`describe`]):
//! everything but the timestamp, the call id and the sequence id, which
//! [`Logged::calls`] checks (ids shared within a call, sequences 1..=n in
//! the order written). A call is over once both sides' layers ended it
//! ([`Rig::ended`]); [`Rig::finish`] stops both ends and shuts the log
//! down, so every entry is in the sink before it is read.

mod calls;
mod load;
mod transport;
mod truncation;

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use prost::Message as _;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::service::Routes;
use tonic::transport::server::{Connected, TcpIncoming};
use tonic::transport::{Channel, Server};
use tonic::{Code, Request, Response, Status};

use crate::script::{self, Ends};
use support::stacks::Incoming;
use support::stacks::compress::compressing_echo;
use support::{
    self, Echo, EchoClient, EchoOverride, EchoRequest, EchoResponse, EchoService, ResponseStream,
};
use tonic_hotpath::binlog::proto::grpc_log_entry::{EventType, Logger, Payload};
use tonic_hotpath::binlog::proto::{GrpcLogEntry, Metadata, address};
use tonic_hotpath::binlog::{BinaryLog, BinaryLogBuilder, Filter, Sink};
use tonic_hotpath::stats::{Combined, CombinedLayer, CombinedService, ConnectAddrs};

pub const UNARY: &str = "/hotpath.echo.Echo/UnaryEcho";
pub const CLIENT_STREAMING: &str = "/hotpath.echo.Echo/ClientStreamingEcho";
pub const BIDI: &str = "/hotpath.echo.Echo/BidirectionalStreamingEcho";
pub const SERVER_STREAMING: &str = "/hotpath.echo.Echo/ServerStreamingEcho";

// ---------------------------------------------------------------------
// The rig: a sink, a server, a client.

/// An in-memory sink: every entry written, in order.
#[derive(Debug, Clone, Default)]
pub struct MemorySink(Arc<Mutex<Vec<GrpcLogEntry>>>);

impl Sink for MemorySink {
    fn write(&mut self, entry: &GrpcLogEntry) -> std::io::Result<()> {
        self.0.lock().unwrap().push(entry.clone());
        Ok(())
    }
}

impl MemorySink {
    pub fn take(&self) -> Logged {
        Logged(std::mem::take(&mut *self.0.lock().unwrap()))
    }
}

/// A log of `filter` into a fresh [`MemorySink`].
pub fn memory_log(filter: &str) -> (BinaryLog, MemorySink) {
    let sink = MemorySink::default();
    let log = builder(filter, sink.clone()).build().unwrap();
    (log, sink)
}

pub fn builder(filter: &str, sink: impl Sink) -> BinaryLogBuilder {
    BinaryLog::builder(Filter::parse(filter).expect("a valid filter"), sink)
}

/// The echo service of these tests: [`EchoService`] (accepting and
/// sending every compression), except that a unary request
/// - `"not yet"` is answered by the handler with `UNIMPLEMENTED "not yet"`,
/// - `"trailers"` with `FAILED_PRECONDITION` and [`trailer_metadata`];
///
/// a server-streaming request `"silent"` gets a stream that sends nothing
/// (a watch with no news), and it keeps the client's address of the last unary call.
#[derive(Debug, Clone, Default)]
pub struct RulesEcho {
    remote: Arc<Mutex<Option<SocketAddr>>>,
}

impl RulesEcho {
    /// The client's address, as the last unary call's handler saw it.
    pub fn remote(&self) -> SocketAddr {
        self.remote
            .lock()
            .unwrap()
            .expect("a unary call was served")
    }
}

/// The metadata of the `"trailers"` answer: 56 bytes of keys and values,
/// more than any header limit of the truncation tests.
pub fn trailer_metadata() -> MetadataMap {
    let mut metadata = MetadataMap::new();
    metadata.insert("x-trailer-one", MetadataValue::from_static("value one"));
    metadata.insert(
        "x-trailer-two",
        MetadataValue::from_static("a longer second value"),
    );
    metadata
}

#[tonic::async_trait]
impl EchoOverride for RulesEcho {
    async fn unary(&self, request: Request<EchoRequest>) -> Result<Response<EchoResponse>, Status> {
        *self.remote.lock().unwrap() = request.remote_addr();
        match request.get_ref().message.as_str() {
            "not yet" => Err(Status::unimplemented("not yet")),
            "trailers" => Err(Status::with_metadata(
                Code::FailedPrecondition,
                "with trailers",
                trailer_metadata(),
            )),
            _ => EchoService.unary_echo(request).await,
        }
    }

    async fn server_streaming(
        &self,
        request: Request<EchoRequest>,
    ) -> Result<Response<ResponseStream>, Status> {
        if request.get_ref().message == "silent" {
            return Ok(Response::new(Box::pin(tokio_stream::pending())));
        }
        EchoService.server_streaming_echo(request).await
    }
}

pub type Handlers = Combined<BinaryLog, Arc<Ends>>;
pub type Layered = CombinedService<Channel, Handlers, tonic_hotpath::stats::ClientSide>;

/// A server of [`RulesEcho`] and a client of it, both behind one log.
pub struct Rig {
    pub log: BinaryLog,
    pub addr: SocketAddr,
    pub echo: RulesEcho,
    pub layered: Layered,
    server_ends: Arc<Ends>,
    client_ends: Arc<Ends>,
    stop: oneshot::Sender<()>,
    server: JoinHandle<Result<(), tonic::transport::Error>>,
}

impl Rig {
    /// On 127.0.0.1.
    pub async fn start(log: &BinaryLog) -> Self {
        let (addr, incoming) = support::bind().await;
        Self::on_tcp(log, addr, incoming, None).await
    }

    /// On `addr`'s TCP `incoming`, with `axum`'s routes beside the echo
    /// service if given.
    pub async fn on_tcp(
        log: &BinaryLog,
        addr: SocketAddr,
        incoming: TcpIncoming,
        axum: Option<axum::Router>,
    ) -> Self {
        let echo = RulesEcho::default();
        let server_ends = Arc::new(Ends::default());
        let routes = axum.map(Routes::from).unwrap_or_default();
        let routes = routes.add_service(compressing_echo(echo.clone()));
        let (stop, server) = spawn_server(log, &server_ends, routes, incoming);
        let client_ends = Arc::new(Ends::default());
        let layered = script::client(addr, log, &client_ends).await;
        Self {
            log: log.clone(),
            addr,
            echo,
            layered,
            server_ends,
            client_ends,
            stop,
            server,
        }
    }

    /// A client of the echo service.
    pub fn client(&self) -> EchoClient<Layered> {
        EchoClient::new(self.layered.clone())
    }

    /// Waits until `n` calls have ended on both sides.
    pub async fn ended(&self, n: u64) {
        self.ended_on(n, n).await;
    }

    /// Waits until `client` calls ended on the client, `server` on the
    /// server.
    pub async fn ended_on(&self, client: u64, server: u64) {
        support::wait_until("the calls' ends", || {
            self.client_ends.count() >= client && self.server_ends.count() >= server
        })
        .await;
    }

    /// Drops the client, stops the server (gracefully, waiting for it)
    /// and shuts the log down: every entry is in its sink.
    pub async fn finish(self) {
        let log = self.log.clone();
        self.stop().await;
        log.shutdown().expect("the log is written");
    }

    /// Drops the client and stops the server (gracefully, waiting for
    /// it): no layer holds the log any more.
    pub async fn stop(self) {
        drop(self.layered);
        let _ = self.stop.send(());
        self.server
            .await
            .expect("the server task")
            .expect("the server");
    }

    /// The client's address as the server's entries give it.
    pub fn client_peer(&self) -> String {
        let remote = self.echo.remote();
        format!("peer={} {}", ip_type(remote), remote)
    }

    /// The server's address as the client's entries give it.
    pub fn server_peer(&self) -> String {
        format!("peer={} {}", ip_type(self.addr), self.addr)
    }
}

fn ip_type(addr: SocketAddr) -> &'static str {
    match addr {
        SocketAddr::V4(_) => "IPV4",
        SocketAddr::V6(_) => "IPV6",
    }
}

/// Serves `routes` behind `log` and `ends` on `incoming` (HTTP/1.1
/// accepted too), until the returned sender sends or is dropped.
pub fn spawn_server<I>(
    log: &BinaryLog,
    ends: &Arc<Ends>,
    routes: Routes,
    incoming: I,
) -> (
    oneshot::Sender<()>,
    JoinHandle<Result<(), tonic::transport::Error>>,
)
where
    I: Incoming,
    <I::Io as Connected>::ConnectInfo: ConnectAddrs,
{
    let layer = CombinedLayer::server()
        .with(log.clone())
        .with(Arc::clone(ends));
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(
        Server::builder()
            .accept_http1(true)
            .layer(layer.clone())
            .add_routes(routes)
            .serve_with_incoming_shutdown(layer.incoming(incoming), async {
                let _ = stopped.await;
            }),
    );
    (stop, server)
}

pub fn echo(message: &str) -> EchoRequest {
    EchoRequest {
        message: message.to_owned(),
    }
}

/// A raw unary call to `path` (a method the generated client lacks).
pub async fn call_path(layered: Layered, path: &'static str, message: &str) -> Status {
    let mut grpc = tonic::client::Grpc::new(layered);
    grpc.ready().await.unwrap();
    let path = http::uri::PathAndQuery::from_static(path);
    let codec = tonic_prost::ProstCodec::<EchoRequest, EchoResponse>::default();
    grpc.unary(Request::new(echo(message)), path, codec)
        .await
        .expect_err("no such method")
}

// ---------------------------------------------------------------------
// What was logged, as lines.

/// The entries a sink received.
#[derive(Debug)]
pub struct Logged(pub Vec<GrpcLogEntry>);

impl Logged {
    /// `logger`'s calls in the order they began (their first entries'
    /// times), each as its entries' lines; checks each call's ids.
    pub fn calls(&self, logger: Logger) -> Vec<Vec<String>> {
        let mut calls: Vec<(u64, Vec<&GrpcLogEntry>)> = Vec::new();
        for entry in self.0.iter().filter(|e| e.logger == logger as i32) {
            match calls.iter_mut().find(|(id, _)| *id == entry.call_id) {
                Some((_, call)) => call.push(entry),
                None => calls.push((entry.call_id, vec![entry])),
            }
        }
        // In the order the calls began (their first entries' times): the
        // writer may write entries of calls made on different threads
        // within one sweep in either order (the per-thread buffers).
        calls.sort_by_key(|(_, call)| {
            call[0]
                .timestamp
                .as_ref()
                .map(|time| (time.seconds, time.nanos))
        });
        calls
            .into_iter()
            .map(|(id, call)| {
                assert_ne!(id, 0, "a call id");
                let sequences: Vec<u64> = call.iter().map(|e| e.sequence_id_within_call).collect();
                let expected: Vec<u64> = (1..=call.len() as u64).collect();
                assert_eq!(sequences, expected, "call {id}: sequence ids in order");
                assert!(call.iter().all(|e| e.timestamp.is_some()), "timestamps");
                call.into_iter().map(describe).collect()
            })
            .collect()
    }

    /// The client's and the server's calls.
    pub fn sides(&self) -> (Vec<Vec<String>>, Vec<Vec<String>>) {
        assert!(
            self.0
                .iter()
                .all(|e| e.logger == Logger::Client as i32 || e.logger == Logger::Server as i32),
            "every entry names its side"
        );
        (self.calls(Logger::Client), self.calls(Logger::Server))
    }
}

/// One entry as a line: its type, payload, truncation and peer (not its
/// timestamp, call id or sequence id). Metadata values are escaped,
/// `date` values (hyper's) shown as `*`.
pub fn describe(entry: &GrpcLogEntry) -> String {
    let kind = EventType::try_from(entry.r#type).expect("a known event type");
    let mut line = kind
        .as_str_name()
        .trim_start_matches("EVENT_TYPE_")
        .to_owned();
    match &entry.payload {
        Some(Payload::ClientHeader(header)) => {
            write!(line, " {} @{}", header.method_name, header.authority).unwrap();
            if let Some(timeout) = &header.timeout {
                write!(line, " timeout={}s{}ns", timeout.seconds, timeout.nanos).unwrap();
            }
            write!(line, " {}", metadata(header.metadata.as_ref())).unwrap();
        }
        Some(Payload::ServerHeader(header)) => {
            write!(line, " {}", metadata(header.metadata.as_ref())).unwrap();
        }
        Some(Payload::Message(message)) => {
            write!(line, " {} {}", message.length, message.data.escape_ascii()).unwrap();
        }
        Some(Payload::Trailer(trailer)) => {
            write!(
                line,
                " {} {:?} {}",
                trailer.status_code,
                trailer.status_message,
                metadata(trailer.metadata.as_ref())
            )
            .unwrap();
            if !trailer.status_details.is_empty() {
                write!(line, " details={}", trailer.status_details.escape_ascii()).unwrap();
            }
        }
        None => {}
    }
    if entry.payload_truncated {
        line.push_str(" truncated");
    }
    if let Some(peer) = &entry.peer {
        let kind = address::Type::try_from(peer.r#type).expect("a known address type");
        let kind = kind.as_str_name().trim_start_matches("TYPE_");
        match kind {
            "IPV6" => write!(line, " peer={kind} [{}]:{}", peer.address, peer.ip_port),
            "UNIX" => write!(line, " peer={kind} {:?} {}", peer.address, peer.ip_port),
            _ => write!(line, " peer={kind} {}:{}", peer.address, peer.ip_port),
        }
        .unwrap();
    }
    line
}

fn metadata(metadata: Option<&Metadata>) -> String {
    let entries: Vec<String> = metadata
        .expect("headers and trailers carry metadata")
        .entry
        .iter()
        .map(|entry| match entry.key.as_str() {
            "date" => "date=*".to_owned(),
            key => format!("{key}={}", entry.value.escape_ascii()),
        })
        .collect();
    format!("[{}]", entries.join(" "))
}

/// The line of a whole message entry of `kind` carrying `text`.
pub fn message(kind: &str, text: &str) -> String {
    let data = echo(text).encode_to_vec();
    format!("{kind} {} {}", data.len(), data.escape_ascii())
}

/// The line of a message entry of `kind` carrying `text`, cut to `keep`
/// bytes of data.
pub fn cut_message(kind: &str, text: &str, keep: usize) -> String {
    let data = echo(text).encode_to_vec();
    assert!(keep < data.len());
    format!(
        "{kind} {} {} truncated",
        data.len(),
        data[..keep].escape_ascii()
    )
}

/// Each line's event type alone.
pub fn kinds(call: &[String]) -> Vec<String> {
    call.iter()
        .map(|line| line.split(' ').next().unwrap().to_owned())
        .collect()
}
