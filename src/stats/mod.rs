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
//! - Ready-made handlers live beside this module, as readers of its
//!   events: gRPC's OpenTelemetry plugin in `tonic_hotpath::otel` (feature
//!   `otel`: `OtelMetrics` records gRFC A66's metrics, `OtelTracing` gRFC
//!   A72's tracing) and channelz in `tonic_hotpath::channelz` (feature
//!   `channelz`). For tracing, a handler can
//!   edit the outgoing request headers
//!   ([`StatsHandler::edit_request_headers`]) and give the server's inner
//!   service a context to run in ([`StatsHandler::service_context`], a
//!   [`ServiceContext`]).
//!
//! Payload events come from [`frame::FrameDecoder`], which follows gRPC's
//! 5-byte length prefix across any body chunk split; a message is reported
//! once all of it has passed, as in grpc-go. Exactly one
//! [`RpcEvent::End`] is delivered per `Begin`, including when the call is
//! dropped (cancelled), the deadline passes or a body fails; events that
//! would arrive after `End` are not delivered. [`End::code`] is the status
//! the application saw, as grpc-go's `End.Error`.
//!
//! # Naming
//!
//! A stats handler is named for what it records or produces, without a
//! `Handler` suffix: only the trait is [`StatsHandler`]. The crate's own:
//! `otel::OtelMetrics` and `otel::OtelTracing`, `binlog::BinaryLog`,
//! `orca::CallRates` and `orca::client::LoadReports`,
//! `channelz::ServerEntry` and `channelz::ChannelEntry` (a server's and
//! a channel's channelz entries), and [`Combined`] for several at once.
//! A handler's per-RPC and per-connection states are named for what they
//! hold (`CallLog`, `RpcSocket`, `ConnSocket`). What a [`CombinedLayer`]
//! holds, no handler or a handler, is a [`HandlerSet`].
//!
//! # Layer order
//!
//! A stats layer stacks with the others in any order; what it reports
//! depends on what sits outside it (outermost first in `Server::builder()`):
//!
//! | layer | outside the stats layer | inside it |
//! |---|---|---|
//! | `GrpcWebLayer` | grpc-web calls are reported as the gRPC calls tonic-web makes of them | grpc-web passes through unreported |
//! | `RequireOrgIdLayer`, `TenantLimitLayer`, interceptors | refused calls are not seen | refused calls end with their status (`UNAUTHENTICATED`, `RESOURCE_EXHAUSTED`, ...) |
//! | `load_shed`, `concurrency_limit` | shed calls are not seen | a shed call ends `RESOURCE_EXHAUSTED`, as tonic sends it |
//! | tower `timeout` | the call is dropped: `CANCELLED` | tonic resets the stream: `INTERNAL`, as the client reads it |
//! | `OutgoingMetadataLayer`, `SetOrgIdLayer` | `OutHeader` shows their headers; their refusals are not seen | `OutHeader` lacks them; a refusal ends `INVALID_ARGUMENT` |
//!
//! In any order, plain HTTP passes the stats layer untouched (and gets `401`
//! from `RequireOrgIdLayer` without an org id), tonic's own `Server::timeout`
//! and `load_shed` act outside every user layer, and every layer sees
//! tonic's connection info (`remote_addr()`, `peer_certs()`) unchanged. Put
//! a client stats layer with `OtelTracing` directly over the `Channel`.
//!
//! # Example
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

// The handler-facing API (the bottom floor: the rest uses it, it uses
// nothing above it): the trait, its events, `Combined`, `ShardedCounter`,
// and the framing and compression the events report on.
mod attempt;
mod combined;
// Crate-private; public (hidden) for the crate's own bench and tests.
#[cfg(feature = "bench-internals")]
#[doc(hidden)]
pub mod compression;
#[cfg(not(feature = "bench-internals"))]
mod compression;
pub(crate) mod counter;
mod event;
pub mod frame;
mod handler;
mod message_data;
pub(crate) mod service_context;
// The tower layer (layer, service, future, body, per-RPC record) and the
// connection tracking its RPCs are linked to.
mod conn;
pub(crate) mod layer;

pub use attempt::{CallAttempt, CallScope, CallValue};
pub use combined::Combined;
pub use conn::{ConnTag, ConnectAddrs, ConnectFuture, StatsConnector, StatsIncoming, StatsIo};
pub use counter::ShardedCounter;
pub use event::{
    CompressionError, ConnEvent, ConnInfo, Direction, End, Payload, RpcError, RpcEvent, RpcInfo,
    Side,
};
pub use handler::StatsHandler;
pub use layer::{
    ClientSide, ClientTransport, CombinedLayer, CombinedService, HandlerSet, ObservedBody,
    ResponseFuture, ServerSide,
};
pub use message_data::MessageData;
pub use service_context::ServiceContext;
