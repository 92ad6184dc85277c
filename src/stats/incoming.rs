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
use tokio::net::TcpListener;
use tonic::transport::server::{Connected, TcpConnectInfo, TcpIncoming};

use super::StatsHandler;
use super::conn::StatsIo;
use super::event::{ConnInfo, Side};
use super::layer::{CombinedLayer, ServerSide};

impl<H: StatsHandler> CombinedLayer<H, ServerSide> {
    /// Wraps a server's accepted-connection stream (anything
    /// `Server::serve_with_incoming` takes whose connections carry
    /// addresses, see [`ConnectAddrs`]) so that every connection delivers
    /// `ConnBegin` / `ConnEnd` to this layer's handlers and its state
    /// reaches them in [`StatsHandler::tag_rpc`].
    ///
    /// Socket options are the stream's own: `serve_with_incoming` ignores
    /// the builder's `tcp_nodelay` and `tcp_keepalive`. For a plain TCP
    /// listener use [`incoming_tcp`](Self::incoming_tcp), which sets
    /// `TCP_NODELAY` as `Server::serve` does; to set more, pass a
    /// configured `TcpIncoming`:
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tonic::transport::server::TcpIncoming;
    /// # use tonic_hotpath::stats::{CombinedLayer, StatsHandler};
    /// # #[derive(Debug)]
    /// # struct Log;
    /// # impl StatsHandler for Log {
    /// #     type RpcState = ();
    /// #     type ConnState = ();
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> std::io::Result<()> {
    /// let layer = CombinedLayer::server().with(Log);
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let incoming = layer.incoming(
    ///     TcpIncoming::from(listener)
    ///         .with_nodelay(Some(true))
    ///         .with_keepalive(Some(Duration::from_secs(60))),
    /// );
    /// # let _ = incoming;
    /// # Ok(())
    /// # }
    /// ```
    #[must_use = "the stream does nothing unless served"]
    pub fn incoming<I>(&self, incoming: I) -> StatsIncoming<I, H> {
        StatsIncoming::with_handler(incoming, Arc::clone(self.handler()))
    }

    /// Accepts connections on `listener` with tonic's server defaults
    /// (`TCP_NODELAY` on, as `Server::serve` sets it; no keepalive) and
    /// wraps them as [`incoming`](Self::incoming) does.
    ///
    /// Without `TCP_NODELAY`, Nagle's algorithm and delayed ACKs hold back
    /// small HTTP/2 writes by up to ~40 ms.
    #[must_use = "the stream does nothing unless served"]
    pub fn incoming_tcp(&self, listener: TcpListener) -> StatsIncoming<TcpIncoming, H> {
        self.incoming(TcpIncoming::from(listener).with_nodelay(Some(true)))
    }
}

/// Connection addresses of a server IO's `Connected::ConnectInfo`.
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
    /// whose [`ConnTag`](super::ConnTag) reaches that layer's RPCs.
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
    pub struct StatsIncoming<I, H> {
        #[pin]
        inner: I,
        handler: Arc<H>,
    }
}

impl<I, H> fmt::Debug for StatsIncoming<I, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StatsIncoming").finish_non_exhaustive()
    }
}

impl<I, H> StatsIncoming<I, H> {
    /// Wraps `incoming`, tagging each connection with `handler`.
    ///
    /// Only the server layer holding this very `handler` (the same `Arc`)
    /// links its RPCs to these connections; build the stream from the
    /// layer instead, which cannot get that wrong and also offers
    /// `TCP_NODELAY` ([`CombinedLayer::incoming_tcp`]).
    #[deprecated(
        since = "0.1.0",
        note = "use `layer.incoming_tcp(listener)` or `layer.incoming(stream)`, which take the layer's own handler"
    )]
    pub fn new(incoming: I, handler: Arc<H>) -> Self {
        Self::with_handler(incoming, handler)
    }

    fn with_handler(incoming: I, handler: Arc<H>) -> Self {
        Self {
            inner: incoming,
            handler,
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
        let handler = this.handler;
        this.inner.poll_next(cx).map(|item| {
            item.map(|accepted| {
                accepted.map(|io| {
                    let addrs = io.connect_info();
                    let info = ConnInfo {
                        side: Side::Server,
                        peer_addr: addrs.peer_addr(),
                        local_addr: addrs.local_addr(),
                    };
                    StatsIo::new(io, Arc::clone(handler), info, None)
                })
            })
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}
