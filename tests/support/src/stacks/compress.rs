//! Compression: an echo server that accepts and sends gzip, deflate and
//! zstd, a client that compresses with one chosen encoding and accepts it
//! back, and a call with a message of a given size.

use bytes::Bytes;
use tonic::codec::CompressionEncoding;
use tonic::service::Routes;
use tonic::{Response, Status};

use crate::{Echo, EchoClient, EchoRequest, EchoResponse, EchoServer};

/// Every encoding tonic supports (features `gzip`, `deflate`, `zstd`).
pub const ENCODINGS: [CompressionEncoding; 3] = [
    CompressionEncoding::Gzip,
    CompressionEncoding::Deflate,
    CompressionEncoding::Zstd,
];

/// The echo service `echo` accepting and sending every encoding in
/// [`ENCODINGS`] (the server answers in an encoding the client accepts).
pub fn compressing_echo<E: Echo>(echo: E) -> EchoServer<E> {
    ENCODINGS
        .into_iter()
        .fold(EchoServer::new(echo), |server, encoding| {
            server.accept_compressed(encoding).send_compressed(encoding)
        })
}

/// [`compressing_echo`] as `Routes`, for the server helpers
/// (`super::serve(Server::builder(), layer, compressing_routes(echo), incoming)`).
pub fn compressing_routes<E: Echo>(echo: E) -> Routes {
    Routes::new(compressing_echo(echo))
}

/// An `EchoClient` over `transport` (a `Channel`, or a client layer's
/// service over one) that compresses requests with `encoding` and accepts
/// responses in it.
pub fn compressing_client<T>(transport: T, encoding: CompressionEncoding) -> EchoClient<T>
where
    T: tonic::client::GrpcService<tonic::body::Body>,
    T::Error: Into<tonic::codegen::StdError>,
    T::ResponseBody: http_body::Body<Data = Bytes> + Send + 'static,
    <T::ResponseBody as http_body::Body>::Error: Into<tonic::codegen::StdError> + Send,
{
    EchoClient::new(transport)
        .send_compressed(encoding)
        .accept_compressed(encoding)
}

/// A message of `size` bytes, text cycling through `a..=z` (compressible
/// and deterministic).
pub fn message_of_size(size: usize) -> String {
    (b'a'..=b'z').cycle().take(size).map(char::from).collect()
}

/// A unary echo of a [`message_of_size`]`(size)` through `client`; the
/// response's metadata carries its `grpc-encoding`.
pub async fn echo_sized<T>(
    client: &mut EchoClient<T>,
    size: usize,
) -> Result<Response<EchoResponse>, Status>
where
    T: tonic::client::GrpcService<tonic::body::Body>,
    T::Error: Into<tonic::codegen::StdError>,
    T::ResponseBody: http_body::Body<Data = Bytes> + Send + 'static,
    <T::ResponseBody as http_body::Body>::Error: Into<tonic::codegen::StdError> + Send,
{
    client
        .unary_echo(EchoRequest {
            message: message_of_size(size),
        })
        .await
}

/// A server of the compressing echo behind a layer of `server_handler`,
/// and a channel to it behind a layer of `client_handler`: the client's
/// transport, for [`compressing_client`] (or a plain `EchoClient`).
#[cfg(feature = "stats")]
pub async fn layered_pair<S, C>(
    server_handler: std::sync::Arc<S>,
    client_handler: std::sync::Arc<C>,
) -> tonic_hotpath::stats::CombinedService<
    tonic::transport::Channel,
    std::sync::Arc<C>,
    tonic_hotpath::stats::ClientSide,
>
where
    S: tonic_hotpath::stats::StatsHandler,
    C: tonic_hotpath::stats::StatsHandler,
{
    let (addr, incoming) = crate::bind().await;
    let server = tonic_hotpath::stats::CombinedLayer::server().with(server_handler);
    super::serve(
        tonic::transport::Server::builder(),
        server.clone(),
        compressing_routes(crate::EchoService),
        server.incoming(incoming),
    );
    tower::ServiceBuilder::new()
        .layer(tonic_hotpath::stats::CombinedLayer::client().with(client_handler))
        .service(crate::connect(addr).await)
}
