//! Which side a layer instruments, checked by the compiler.
//!
//! A server layer over a client `Channel` does not compile: the server
//! layer hands its inner service a wrapped request body, which a `Channel`
//! does not accept. The other mistake, a client layer on a server, is
//! caught by [`ClientTransport`].

#[cfg(doc)]
use crate::stats::CombinedLayer;
use http::Request;
use tower::Service;

/// The services a client [`CombinedLayer`] can wrap:
/// a tonic `Channel` and any stack over one.
///
/// A client transport can fail with a transport error, so its error type
/// is built from `tonic::transport::Error`: `Channel`'s own error, the
/// `BoxError` of tower's `Buffer`, `Timeout` or `LoadShed`, and the
/// errors of layers that keep their inner service's (`ConcurrencyLimit`,
/// `RateLimit`, tonic's `InterceptedService`, ...) all are. A server's
/// `Routes` never fails (`Infallible`), so a client layer on a server
/// (`Server::builder().layer(CombinedLayer::client()..)`) is rejected at
/// compile time instead of reporting every RPC with inverted directions.
///
/// This is a blanket implementation: a service of your own over a channel
/// qualifies when its error implements `From<tonic::transport::Error>`.
/// (A layer that boxes errors, placed between a wrongly-sided client
/// layer and a server's `Routes`, hides the mistake from this check.)
///
/// The server layer on a server, and the client layer over a channel:
///
/// ```
/// # use tonic_hotpath::stats::{CombinedLayer, StatsHandler};
/// # #[derive(Debug)]
/// # struct Log;
/// # impl StatsHandler for Log {
/// #     type RpcState = ();
/// #     type ConnState = ();
/// # }
/// # async fn wiring(
/// #     listener: tokio::net::TcpListener,
/// #     channel: tonic::transport::Channel,
/// # ) -> Result<(), Box<dyn std::error::Error>> {
/// let (_, health) = tonic_health::server::health_reporter();
/// let layer = CombinedLayer::server().with(Log);
/// let incoming = layer.incoming_tcp(listener);
/// tonic::transport::Server::builder()
///     .layer(layer)
///     .add_service(health)
///     .serve_with_incoming(incoming)
///     .await?;
///
/// let client = tower::ServiceBuilder::new()
///     .layer(CombinedLayer::client().with(Log))
///     .service(channel);
/// tonic_health::pb::health_client::HealthClient::new(client);
/// # Ok(())
/// # }
/// ```
///
/// A client layer on a server does not compile:
///
/// ```compile_fail,E0277
/// # use tonic_hotpath::stats::{CombinedLayer, StatsHandler};
/// # #[derive(Debug)]
/// # struct Log;
/// # impl StatsHandler for Log {
/// #     type RpcState = ();
/// #     type ConnState = ();
/// # }
/// # async fn wiring(listener: tokio::net::TcpListener) -> Result<(), Box<dyn std::error::Error>> {
/// let (_, health) = tonic_health::server::health_reporter();
/// tonic::transport::Server::builder()
///     .layer(CombinedLayer::client().with(Log))
///     .add_service(health)
///     .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
///     .await?;
/// # Ok(())
/// # }
/// ```
///
/// Nor does a server layer over a channel:
///
/// ```compile_fail,E0277
/// # use tonic_hotpath::stats::{CombinedLayer, StatsHandler};
/// # #[derive(Debug)]
/// # struct Log;
/// # impl StatsHandler for Log {
/// #     type RpcState = ();
/// #     type ConnState = ();
/// # }
/// # fn wiring(channel: tonic::transport::Channel) {
/// let client = tower::ServiceBuilder::new()
///     .layer(CombinedLayer::server().with(Log))
///     .service(channel);
/// tonic_health::pb::health_client::HealthClient::new(client);
/// # }
/// ```
pub trait ClientTransport: Service<Request<tonic::body::Body>> {}

impl<S> ClientTransport for S
where
    S: Service<Request<tonic::body::Body>>,
    S::Error: From<tonic::transport::Error>,
{
}

/// Marker: the layer instruments a server (`Server::builder().layer(..)`).
/// Its connections come from [`CombinedLayer::incoming_tcp`] /
/// [`CombinedLayer::incoming`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ServerSide;

/// Marker: the layer instruments a client: it wraps a
/// [`ClientTransport`] (a `Channel` or a stack over one), whose
/// connections come from [`CombinedLayer::connector`] /
/// [`CombinedLayer::connector_with`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientSide;
