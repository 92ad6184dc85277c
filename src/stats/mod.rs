//! gRPC stats handlers for tonic, fed from one instrumentation point.
//!
//! grpc-go lets several `stats.Handler`s observe every RPC and connection;
//! its PR #8639 stopped allocating each event once per handler by combining
//! them. Here the combination is static: a [`CombinedLayer`] holds any
//! number of [`StatsHandler`]s, builds each [`RpcEvent`] once and hands the
//! same reference to each handler in registration order. All handlers'
//! per-RPC states live inline in one per-RPC record, shared by the
//! response future and the body wrappers, so an extra handler costs no
//! allocation; records are recycled through small per-thread free lists per
//! layered service, so in steady state the server layer allocates nothing
//! per RPC and the client layer once (the request body re-boxed for the
//! `Channel`).
//!
//! - Server: `Server::builder().layer(layer)` with
//!   `layer = CombinedLayer::server().with(h)`, served with
//!   `.serve_with_incoming(layer.incoming_tcp(listener))` for connection
//!   events ([`StatsIncoming`]; `TCP_NODELAY` on, as `Server::serve` does).
//! - Client: `ServiceBuilder::new().layer(layer).service(channel)` with
//!   `layer = CombinedLayer::client().with(h)`, over a channel from
//!   `endpoint.connect_with_connector(layer.connector())` for connection
//!   events ([`StatsConnector`]; tonic's TCP defaults).
//! - Connections: both sides emit [`ConnEvent`]s and make each
//!   connection's handler states and addresses visible to its RPCs
//!   ([`StatsHandler::tag_rpc`], [`RpcInfo::peer_addr`]). The connection
//!   wrappers keep tonic's connection info as it is (`remote_addr()`,
//!   `peer_certs()` behind TLS, `UdsConnectInfo`), for the handlers and
//!   every other layer.
//! - Only gRPC is observed: a request whose `content-type` is not
//!   `application/grpc` (`+subtype`, `;params`) passes through untouched,
//!   with no event: axum routes on the same server, health probes,
//!   grpc-web seen outside tonic-web's `GrpcWebLayer` (put the stats layer
//!   inside it to measure grpc-web calls).
//! - The side is in the type: a server layer over a `Channel` or a client
//!   layer on a server does not compile ([`ClientTransport`]).
//! - Ready-made handlers: gRPC's OpenTelemetry plugin in `otel` (feature
//!   `otel`): `otel::OtelMetrics` records gRFC A66's metrics,
//!   `otel::OtelTracing` gRFC A72's tracing. For tracing, a handler can
//!   edit the outgoing request headers
//!   ([`StatsHandler::edit_request_headers`]) and give the server's inner
//!   service a context to run in (`StatsHandler::otel_context`).
//!
//! Payload events come from [`frame::FrameDecoder`], which follows gRPC's
//! 5-byte length prefix across any body chunk split; a message is reported
//! once all of it has passed, as in grpc-go. Exactly one
//! [`RpcEvent::End`] is delivered per `Begin`, including when the call is
//! dropped (cancelled), the deadline passes or a body fails; events that
//! would arrive after `End` are not delivered. [`End::code`] is the status
//! the application saw, as grpc-go's `End.Error`.
//!
//! A server and a client, each with two handlers, over 127.0.0.1:
//!
//! ```
//! use std::sync::Arc;
//!
//! use tonic::Code;
//! use tonic_hotpath::stats::{CombinedLayer, RpcEvent, RpcInfo, ShardedCounter, StatsHandler};
//!
//! /// Counts RPCs that ended with each outcome.
//! #[derive(Debug, Default)]
//! struct Outcomes {
//!     ok: ShardedCounter,
//!     failed: ShardedCounter,
//! }
//!
//! impl StatsHandler for Outcomes {
//!     type RpcState = ();
//!     type ConnState = ();
//!
//!     fn handle_rpc(&self, _: &mut (), event: &RpcEvent<'_>) {
//!         if let RpcEvent::End(end) = event {
//!             let counter = if end.code == Code::Ok { &self.ok } else { &self.failed };
//!             counter.add(1);
//!         }
//!     }
//! }
//!
//! /// Logs each RPC's end; its per-RPC state is the method name.
//! #[derive(Debug)]
//! struct EndLog;
//!
//! impl StatsHandler for EndLog {
//!     type RpcState = String;
//!     type ConnState = ();
//!
//!     fn tag_rpc(&self, info: &RpcInfo<'_>, _conn: Option<&()>) -> String {
//!         format!("{:?} {}", info.side, info.method)
//!     }
//!
//!     fn handle_rpc(&self, rpc: &mut String, event: &RpcEvent<'_>) {
//!         if let RpcEvent::End(end) = event {
//!             println!("{rpc}: {:?} after {:?}", end.code, end.end_time - end.begin_time);
//!         }
//!     }
//! }
//!
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//!     let server_outcomes = Arc::new(Outcomes::default());
//!     let client_outcomes = Arc::new(Outcomes::default());
//!
//!     // Server: two handlers, each event built once and handed to both in
//!     // order; the wrapped incoming stream adds ConnBegin/ConnEnd.
//!     let layer = CombinedLayer::server()
//!         .with(Arc::clone(&server_outcomes))
//!         .with(EndLog);
//!     let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//!     let addr = listener.local_addr()?;
//!     let incoming = layer.incoming_tcp(listener);
//!     // (No services registered: every RPC ends `Unimplemented`.)
//!     let server = tonic::transport::Server::builder()
//!         .layer(layer)
//!         .add_routes(tonic::service::Routes::default())
//!         .serve_with_incoming(incoming);
//!     tokio::spawn(server);
//!
//!     // Client: the layer's connector makes the connections, the layer
//!     // wraps the Channel; generated clients accept the result.
//!     let layer = CombinedLayer::client()
//!         .with(Arc::clone(&client_outcomes))
//!         .with(EndLog);
//!     let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))?
//!         .connect_with_connector(layer.connector())
//!         .await?;
//!     let layered = tower::ServiceBuilder::new().layer(layer).service(channel);
//!     let mut grpc = tonic::client::Grpc::new(layered);
//!     grpc.ready().await?;
//!     let status = grpc
//!         .unary::<(), (), _>(
//!             tonic::Request::new(()),
//!             http::uri::PathAndQuery::from_static("/demo.Greeter/Hello"),
//!             tonic_prost::ProstCodec::default(),
//!         )
//!         .await
//!         .unwrap_err();
//!     assert_eq!(status.code(), Code::Unimplemented);
//!     assert_eq!(client_outcomes.failed.get(), 1);
//!     Ok(())
//! }
//! ```

mod body;
mod combined;
// Crate-private; public (hidden) for the crate's own bench and tests.
#[cfg(feature = "bench-internals")]
#[doc(hidden)]
pub mod compression;
#[cfg(not(feature = "bench-internals"))]
mod compression;
mod conn;
mod connector;
mod context;
pub(crate) mod counter;
mod event;
pub mod frame;
mod future;
mod headers;
mod idle;
mod incoming;
mod layer;
mod link;
mod messages;
#[cfg(feature = "otel")]
pub mod otel;
mod pool;
mod recorder;
mod registry;
mod side;
mod status;

pub use body::ObservedBody;
pub use combined::Combined;
pub use conn::{ConnTag, StatsIo};
pub use connector::{ConnectFuture, StatsConnector};
pub use counter::ShardedCounter;
pub use event::{
    CompressionError, ConnEvent, ConnInfo, Direction, End, Payload, RpcError, RpcEvent, RpcInfo,
    Side,
};
pub use future::ResponseFuture;
pub use incoming::{ConnectAddrs, StatsIncoming};
pub use layer::{BoxError, ClientSide, ClientStats, CombinedLayer, ServerSide, ServerStats};
pub use side::ClientTransport;

/// Observes RPCs and connections (grpc-go `stats.Handler`).
///
/// Every method has a no-op default. A handler may keep per-RPC state
/// (created by [`tag_rpc`](Self::tag_rpc), grpc-go's `TagRPC`) and
/// per-connection state (created by [`tag_conn`](Self::tag_conn)); both are
/// stored inline by the layer, so they cost no heap allocation of their own.
/// Handlers are called synchronously on the RPC's hot path: keep them short.
///
/// A handler that times each method, with the method name as its per-RPC
/// state and the peer's address remembered per connection:
///
/// ```
/// use std::net::SocketAddr;
/// use std::time::Duration;
///
/// use tonic_hotpath::stats::{CombinedLayer, ConnInfo, RpcEvent, RpcInfo, StatsHandler};
///
/// #[derive(Debug)]
/// struct Latency;
///
/// impl StatsHandler for Latency {
///     type RpcState = String;
///     type ConnState = Option<SocketAddr>;
///     // Only `Begin`/`End` times are read: skip the payload clock reads.
///     const PAYLOAD_TIMES: bool = false;
///
///     fn tag_conn(&self, info: &ConnInfo) -> Option<SocketAddr> {
///         info.peer_addr
///     }
///
///     fn tag_rpc(&self, info: &RpcInfo<'_>, conn: Option<&Option<SocketAddr>>) -> String {
///         match conn.copied().flatten() {
///             Some(peer) => format!("{} ({peer})", info.method),
///             None => info.method.to_owned(),
///         }
///     }
///
///     fn handle_rpc(&self, method: &mut String, event: &RpcEvent<'_>) {
///         if let RpcEvent::End(end) = event {
///             let took: Duration = end.end_time - end.begin_time;
///             println!("{method}: {:?} in {took:?}", end.code);
///         }
///     }
/// }
///
/// // Registered on a server layer (or a client layer) like any handler.
/// let layer = CombinedLayer::server().with(Latency);
/// # let _ = layer;
/// ```
pub trait StatsHandler: Send + Sync + 'static {
    /// Per-RPC state, created when the RPC begins and passed to every event.
    type RpcState: Default + Send + 'static;
    /// Per-connection state, created when the connection is established.
    type ConnState: Default + Send + Sync + 'static;

    /// Whether this handler reads [`Payload::time`]. Reading the clock is
    /// the largest part of the layer's per-RPC cost (tens of nanoseconds a
    /// read on a VM), so a handler that ignores payload times should say
    /// `const PAYLOAD_TIMES: bool = false;`. When no handler of a layer
    /// wants them, payload events carry `time: None` and cost no clock
    /// read; otherwise every handler sees `Some`. `Begin` and `End` times
    /// are always read.
    const PAYLOAD_TIMES: bool = true;

    /// Whether this handler reads the uncompressed length of compressed
    /// messages ([`Payload::length`] of a message whose `compressed` flag
    /// is set). Measuring it means decompressing the message a second
    /// time beside the receiver's own decoder, as much CPU as that decoding
    /// (see the crate's BENCHMARKS.md), so it is done only when some
    /// handler of the layer asks: say `const UNCOMPRESSED_SIZES: bool =
    /// true;` to ask. When none asks, a compressed message's
    /// [`Payload::length`] is `None` (its compressed and wire lengths are
    /// exact either way), and a compressed message costs the layer what an
    /// uncompressed one does. An uncompressed message's `length` is always
    /// `Some`. Unmeasured, a compressed message that its receiver then
    /// fails to decompress (corrupt, or past its size limit) is still
    /// reported with its compressed length, as it was sent; the RPC's
    /// [`End::code`] is still the status the receiver gave, without the
    /// compression error in [`End::error`].
    ///
    /// The client layer judges the compressed messages it receives whether
    /// or not a handler asks: the status the application sees for a
    /// response tonic cannot decompress is its decoder's verdict, and
    /// [`End::code`] reports that status. Such a message's length is then
    /// known and given as `Some`.
    const UNCOMPRESSED_SIZES: bool = false;

    /// Creates the per-RPC state. `conn` is this handler's state for the
    /// RPC's connection: on the server when it is served from the layer's
    /// [`StatsIncoming`] (`layer.incoming_tcp(..)`, TCP with or without
    /// TLS, and Unix sockets), on the client when the channel was built
    /// with the layer's [`StatsConnector`] (`layer.connector()`) and a
    /// connection is open as the RPC begins (see
    /// [`CombinedLayer::connector_with`]). A server layer whose handlers'
    /// `ConnState` is zero-sized (carries nothing) does not look the
    /// connection up: `conn` is then `None`.
    fn tag_rpc(&self, info: &RpcInfo<'_>, conn: Option<&Self::ConnState>) -> Self::RpcState {
        let _ = (info, conn);
        Self::RpcState::default()
    }

    /// Observes one RPC event.
    fn handle_rpc(&self, state: &mut Self::RpcState, event: &RpcEvent<'_>) {
        let _ = (state, event);
    }

    /// Client RPCs only: edits the request headers before they are sent,
    /// e.g. to inject trace propagation headers. Called right after
    /// [`tag_rpc`](Self::tag_rpc), before `Begin`; the `OutHeader` event
    /// then shows the edited headers. With several handlers, each edits in
    /// registration order.
    fn edit_request_headers(&self, state: &mut Self::RpcState, headers: &mut http::HeaderMap) {
        let _ = (state, headers);
    }

    /// Whether [`otel_context`](Self::otel_context) can return a context.
    /// Leave it `false` (the default) unless it can: the layer then skips
    /// the call and the per-poll context switch at compile time.
    #[cfg(feature = "otel")]
    const OTEL_CONTEXT: bool = false;

    /// Server RPCs only (feature `otel`): the OpenTelemetry context the
    /// inner service runs in, e.g. the RPC's server span, so that the
    /// handler's own spans and the calls it makes through a client layer
    /// continue the trace. Called once the RPC has begun (after `Begin`);
    /// the context is current while the service is called, while its
    /// future is polled and while the response body is polled (so a
    /// response stream's items are produced in it too). With several
    /// handlers, the
    /// first that returns one wins. Only consulted when
    /// [`OTEL_CONTEXT`](Self::OTEL_CONTEXT) is `true`.
    #[cfg(feature = "otel")]
    fn otel_context(&self, state: &Self::RpcState) -> Option<opentelemetry::Context> {
        let _ = state;
        None
    }

    /// Creates the per-connection state.
    fn tag_conn(&self, info: &ConnInfo) -> Self::ConnState {
        let _ = info;
        Self::ConnState::default()
    }

    /// Observes one connection event.
    fn handle_conn(&self, state: &Self::ConnState, event: &ConnEvent) {
        let _ = (state, event);
    }

    /// The layer made a layered service with this handler: tonic's server
    /// makes one per `serve` (its clones serve every connection), a client
    /// `ServiceBuilder` one per `.service(channel)`. Paired with
    /// [`service_dropped`](Self::service_dropped).
    fn service_created(&self) {}

    /// A layered service made by the layer, and every clone of it, was
    /// dropped: a server stopped, a client went away. RPCs still running
    /// deliver their remaining events after it. The handler itself may
    /// live on a while (idle per-RPC records on worker threads keep it), so
    /// a handler that must act when its service is gone acts here, not in
    /// `Drop`.
    fn service_dropped(&self) {}
}
