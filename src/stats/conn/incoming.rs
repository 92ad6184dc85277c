//! Server connections: [`StatsIncoming`] wraps the accepted-connection
//! stream handed to `Server::serve_with_incoming`, built from the server
//! layer so both share one handler.

use std::fmt;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_core::Stream;
use pin_project_lite::pin_project;
use tonic::transport::server::{Connected, TcpConnectInfo};

use super::io::{ConnOwner, StatsIo};
use super::registry::ConnRegistry;
#[cfg(doc)]
use crate::stats::CombinedLayer;
use crate::stats::StatsHandler;
use crate::stats::event::{ConnInfo, Side};

/// Connection addresses of a server IO's `Connected::ConnectInfo`, for
/// [`ConnInfo`]: implemented for tonic's `TcpConnectInfo` (plain TCP, and
/// TCP under tonic's TLS), `UdsConnectInfo` (Unix sockets: no IP
/// addresses) and `()`. Implement it for the connection info of an IO of
/// your own to serve it through [`CombinedLayer::incoming`]; the layer
/// links RPCs to the connection states of TCP and Unix socket connections
/// only.
pub trait ConnectAddrs {
    /// The peer's address, where known.
    fn peer_addr(&self) -> Option<SocketAddr>;
    /// The local address, where known.
    fn local_addr(&self) -> Option<SocketAddr>;
}

impl ConnectAddrs for TcpConnectInfo {
    fn peer_addr(&self) -> Option<SocketAddr> {
        self.remote_addr
    }

    fn local_addr(&self) -> Option<SocketAddr> {
        self.local_addr
    }
}

#[cfg(unix)]
impl ConnectAddrs for tonic::transport::server::UdsConnectInfo {
    fn peer_addr(&self) -> Option<SocketAddr> {
        None
    }

    fn local_addr(&self) -> Option<SocketAddr> {
        None
    }
}

impl ConnectAddrs for () {
    fn peer_addr(&self) -> Option<SocketAddr> {
        None
    }

    fn local_addr(&self) -> Option<SocketAddr> {
        None
    }
}

pin_project! {
    /// A server's accepted-connection stream (the `incoming` of
    /// `Server::serve_with_incoming`) whose connections are observed by a
    /// server layer's handlers: every accepted IO becomes a [`StatsIo`]
    /// whose [`ConnTag`] reaches that layer's RPCs.
    ///
    /// Built from the layer ([`CombinedLayer::incoming_tcp`],
    /// [`CombinedLayer::incoming`]), so the two cannot disagree on the
    /// handler.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicI64, Ordering};
    ///
    /// use tonic::transport::{Endpoint, Server};
    /// use tonic_health::pb::HealthCheckRequest;
    /// use tonic_health::pb::health_client::HealthClient;
    /// use tonic_hotpath::stats::{CombinedLayer, ConnEvent, StatsHandler};
    ///
    /// /// Counts open connections.
    /// #[derive(Debug, Default)]
    /// struct OpenConns(AtomicI64);
    ///
    /// impl StatsHandler for OpenConns {
    ///     type RpcState = ();
    ///     type ConnState = ();
    ///
    ///     fn handle_conn(&self, _: &(), event: &ConnEvent) {
    ///         let delta = match event {
    ///             ConnEvent::Begin { .. } => 1,
    ///             ConnEvent::End { .. } => -1,
    ///             _ => 0,
    ///         };
    ///         self.0.fetch_add(delta, Ordering::Relaxed);
    ///     }
    /// }
    ///
    /// #[tokio::main(flavor = "current_thread")]
    /// async fn main() -> Result<(), Box<dyn std::error::Error>> {
    ///     let open = Arc::new(OpenConns::default());
    ///     let layer = CombinedLayer::server().with(Arc::clone(&open));
    ///     let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    ///     let addr = listener.local_addr()?;
    ///     // TCP_NODELAY on, and the layer's own handler.
    ///     let incoming = layer.incoming_tcp(listener);
    ///     let (_reporter, health) = tonic_health::server::health_reporter();
    ///     tokio::spawn(
    ///         Server::builder()
    ///             .layer(layer)
    ///             .add_service(health)
    ///             .serve_with_incoming(incoming),
    ///     );
    ///
    ///     let channel = Endpoint::from_shared(format!("http://{addr}"))?.connect().await?;
    ///     HealthClient::new(channel)
    ///         .check(HealthCheckRequest { service: String::new() })
    ///         .await?;
    ///     assert_eq!(open.0.load(Ordering::Relaxed), 1);
    ///     Ok(())
    /// }
    /// ```
    pub struct StatsIncoming<I, H: StatsHandler> {
        #[pin]
        inner: I,
        handler: Arc<H>,
        // The layer's connections, when its handlers keep connection state.
        registry: Option<Arc<ConnRegistry<H>>>,
    }
}

impl<I, H: StatsHandler> fmt::Debug for StatsIncoming<I, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StatsIncoming").finish_non_exhaustive()
    }
}

impl<I, H: StatsHandler> StatsIncoming<I, H> {
    /// `incoming`, observed by `handler`, its connections registered in
    /// `registry` when the handlers keep connection state (see
    /// `CombinedLayer::incoming`).
    pub(crate) fn new(
        incoming: I,
        handler: Arc<H>,
        registry: Option<Arc<ConnRegistry<H>>>,
    ) -> Self {
        Self {
            inner: incoming,
            handler,
            registry,
        }
    }

    /// The wrapped stream.
    pub fn get_ref(&self) -> &I {
        &self.inner
    }
}

impl<I, IO, E, H> Stream for StatsIncoming<I, H>
where
    I: Stream<Item = Result<IO, E>>,
    IO: Connected,
    IO::ConnectInfo: ConnectAddrs,
    H: StatsHandler,
{
    type Item = Result<StatsIo<IO, H>, E>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        let (handler, registry) = (this.handler, this.registry);
        this.inner.poll_next(cx).map(|item| {
            item.map(|accepted| {
                accepted.map(|io| {
                    let addrs = io.connect_info();
                    let info = ConnInfo {
                        side: Side::Server,
                        peer_addr: addrs.peer_addr(),
                        local_addr: addrs.local_addr(),
                    };
                    let owner = match registry {
                        Some(registry) => ConnOwner::server(Arc::clone(registry)),
                        None => ConnOwner::None,
                    };
                    StatsIo::new(io, Arc::clone(handler), info, None, owner)
                })
            })
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}
