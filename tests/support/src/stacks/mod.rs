//! Shared support for tests on the stacks users really run: axum routes
//! beside gRPC, tonic-web, TLS and mTLS, Unix domain sockets, compression,
//! and clients that send junk. Real tonic servers and clients on
//! 127.0.0.1:0 (or a Unix socket in a temp dir); no mocks.
//!
//! Every server helper takes
//! - a server layer `layer` ([`ServerLayer`]: anything
//!   `Server::builder().layer(..)` accepts over the routes it wraps; pass
//!   `tower::layer::util::Identity::new()` for none, or a
//!   `ServiceBuilder::new().layer(a).layer(b).into_inner()` stack), and
//! - the accepted-connection stream `incoming` ([`Incoming`]: anything
//!   `serve_with_incoming` takes, e.g. `crate::bind().await.1`, a
//!   [`uds::bind`] stream, or a layer's `incoming(..)` wrapping one),
//!
//! spawns the server on the current runtime and returns its task.
//!
//! | concern | server | client |
//! |---|---|---|
//! | plain gRPC | [`spawn_echo`], [`serve`] | `crate::connect`, [`client`] |
//! | axum beside gRPC | [`plain_http::spawn_grpc_and_axum`] | [`plain_http::http1`], [`plain_http::http2`] |
//! | tonic-web | [`web::spawn_web_layer_outside`], [`web::spawn_web_layer_inside`] | [`web::web_unary`], [`web::web_call`] |
//! | TLS, mTLS | [`tls::spawn_tls`] with [`tls::TestCerts`] | [`tls::tls_endpoint`] |
//! | Unix sockets | [`uds::bind`] + any server helper | [`uds::channel`], [`uds::channel_with`] |
//! | compression | [`compress::compressing_routes`] + [`serve`] | [`compress::compressing_client`], [`compress::echo_sized`] |
//! | what is seen | [`record::RecordingEcho`], [`record::ProbeLayer`] | [`record::ProbeLayer`] |
//! | junk | any | [`junk::h2_send`], [`junk::h2_connect`] + [`junk::h2_exchange`] (many streams), [`junk::http1_raw`] |
//! Client helpers return a `Channel` (or an `Endpoint` to connect), so a
//! test wraps it with any client layer (`ServiceBuilder::new().layer(..)
//! .service(channel)`, or [`client`]), or take a caller's connector.
//!
//! To see what reaches the handler and each layer position, serve a
//! [`record::RecordingEcho`] and stack [`record::ProbeLayer`]s.

pub mod compress;
pub mod junk;
pub mod plain_http;
pub mod record;
pub mod tls;
pub mod uds;
pub mod web;

use std::fmt;
use std::future::Future;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::JoinHandle;
use tokio_stream::Stream;
use tonic::body::Body;
use tonic::service::Routes;
use tonic::transport::Server;
use tonic::transport::server::Connected;
use tower::{Layer, Service};

use crate::{Echo, EchoClient, EchoServer};

/// Errors as tonic's server bounds name them.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A spawned server; it runs until the runtime stops (dropping the handle
/// detaches it, `abort()` stops it).
pub type ServerTask = JoinHandle<Result<(), tonic::transport::Error>>;

/// A server layer over `S` that `Server::builder().layer(..)` serves: the
/// bounds of tonic's `serve_with_incoming`, named once. Implemented for
/// every such layer; `Display` on the body error is what tonic-web asks of
/// the service it wraps.
pub trait ServerLayer<S>: Layer<S, Service = Self::Layered> + Clone + Send + 'static {
    /// The layered service.
    type Layered: Service<
            http::Request<Body>,
            Response = http::Response<Self::ResBody>,
            Error = Self::Error,
            Future = Self::Future,
        > + Clone
        + Send
        + 'static;
    /// Its response body.
    type ResBody: http_body::Body<Data = Bytes, Error = Self::BodyError> + Send + 'static;
    /// The response body's error.
    type BodyError: Into<BoxError> + fmt::Display;
    /// The service's error.
    type Error: Into<BoxError> + Send + 'static;
    /// The service's future.
    type Future: Future<Output = Result<http::Response<Self::ResBody>, Self::Error>>
        + Send
        + 'static;
}

impl<L, S, Svc, B, BE, E, F> ServerLayer<S> for L
where
    L: Layer<S, Service = Svc> + Clone + Send + 'static,
    Svc: Service<http::Request<Body>, Response = http::Response<B>, Error = E, Future = F>
        + Clone
        + Send
        + 'static,
    B: http_body::Body<Data = Bytes, Error = BE> + Send + 'static,
    BE: Into<BoxError> + fmt::Display,
    E: Into<BoxError> + Send + 'static,
    F: Future<Output = Result<http::Response<B>, E>> + Send + 'static,
{
    type Layered = Svc;
    type ResBody = B;
    type BodyError = BE;
    type Error = E;
    type Future = F;
}

/// An accepted-connection stream that `serve_with_incoming` takes, with the
/// bounds of tonic's `serve_with_incoming` named once.
pub trait Incoming: Stream<Item = Result<Self::Io, Self::Error>> + Send + 'static {
    /// One accepted connection.
    type Io: AsyncRead + AsyncWrite + Connected + Unpin + Send + 'static;
    /// An accept error.
    type Error: Into<BoxError> + Send + 'static;
}

impl<T, IO, IE> Incoming for T
where
    T: Stream<Item = Result<IO, IE>> + Send + 'static,
    IO: AsyncRead + AsyncWrite + Connected + Unpin + Send + 'static,
    IE: Into<BoxError> + Send + 'static,
{
    type Io = IO;
    type Error = IE;
}

/// Serves `routes` behind `layer` with the configured `server` (TLS,
/// `accept_http1`, ...) on `incoming`: `server.layer(layer).add_routes(routes)
/// .serve_with_incoming(incoming)`, spawned.
pub fn serve<L, I>(server: Server, layer: L, routes: Routes, incoming: I) -> ServerTask
where
    L: ServerLayer<Routes>,
    I: Incoming,
{
    tokio::spawn(
        server
            .layer(layer)
            .add_routes(routes)
            .serve_with_incoming(incoming),
    )
}

/// Serves `echo` (e.g. `crate::EchoService`, or a
/// [`record::RecordingEcho`]) as the echo service behind `layer` on
/// `incoming`, over HTTP/2 (no TLS, no HTTP/1.1).
pub fn spawn_echo<L, E, I>(layer: L, echo: E, incoming: I) -> ServerTask
where
    L: ServerLayer<Routes>,
    E: Echo,
    I: Incoming,
{
    serve(
        Server::builder(),
        layer,
        Routes::new(EchoServer::new(echo)),
        incoming,
    )
}

/// An `EchoClient` over `channel` wrapped in the client layer `layer`
/// (`ServiceBuilder::new().layer(layer).service(channel)`).
pub fn client<C, L>(channel: C, layer: L) -> EchoClient<L::Service>
where
    L: Layer<C>,
    L::Service: tonic::client::GrpcService<Body>,
    <L::Service as tonic::client::GrpcService<Body>>::Error: Into<tonic::codegen::StdError>,
    <L::Service as tonic::client::GrpcService<Body>>::ResponseBody:
        http_body::Body<Data = Bytes> + Send + 'static,
    <<L::Service as tonic::client::GrpcService<Body>>::ResponseBody as http_body::Body>::Error:
        Into<tonic::codegen::StdError> + Send,
{
    EchoClient::new(tower::ServiceBuilder::new().layer(layer).service(channel))
}

/// The unary echo method's path.
pub const UNARY_PATH: &str = "/hotpath.echo.Echo/UnaryEcho";

/// One gRPC message frame: the flag byte (0 plain, 1 compressed; anything
/// else is junk), the 4-byte big-endian length of `payload`, `payload`.
pub fn frame(flag: u8, payload: &[u8]) -> Bytes {
    let mut wire = Vec::with_capacity(5 + payload.len());
    wire.push(flag);
    let len = u32::try_from(payload.len()).expect("payload under 4 GiB");
    wire.extend_from_slice(&len.to_be_bytes());
    wire.extend_from_slice(payload);
    wire.into()
}

/// A plain (uncompressed) frame of an `EchoRequest` carrying `message`.
pub fn echo_frame(message: &str) -> Bytes {
    use prost::Message;
    let request = crate::EchoRequest {
        message: message.to_owned(),
    };
    frame(0, &request.encode_to_vec())
}
