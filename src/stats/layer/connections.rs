//! The layer's connection wrappers: the server's accepted-connection
//! stream ([`CombinedLayer::incoming`]) and the client's connector
//! ([`CombinedLayer::connector`]), built from the layer so that both share
//! its handler and its RPCs find their connection.

use std::sync::Arc;

use hyper_util::client::legacy::connect::HttpConnector;
use tokio::net::TcpListener;
use tonic::transport::server::TcpIncoming;

use super::layer::CombinedLayer;
use super::side::{ClientSide, ServerSide};
use crate::stats::conn::registry::needs_conn_state;
#[cfg(doc)]
use crate::stats::{ConnectAddrs, RpcInfo};
use crate::stats::{StatsConnector, StatsHandler, StatsIncoming};

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
        let registry = needs_conn_state::<H>().then(|| self.registry());
        StatsIncoming::new(incoming, Arc::clone(self.handler()), registry)
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

impl<H: StatsHandler> CombinedLayer<H, ClientSide> {
    /// A TCP connector for `Endpoint::connect_with_connector` with tonic's
    /// `Endpoint` defaults (hyper-util's `HttpConnector` with
    /// `TCP_NODELAY` on and `enforce_http(false)`, no keepalive, no local
    /// address), whose connections are observed by this layer's handlers.
    ///
    /// A channel built with it links this layer's RPCs to its connection:
    /// see [`connector_with`](Self::connector_with). `Endpoint`'s own TCP
    /// settings (`tcp_nodelay`, `tcp_keepalive`, `local_address`) apply to
    /// `Endpoint::connect` only; to change them, configure an
    /// `HttpConnector` and pass it to `connector_with`. `connect_timeout`
    /// and TLS still apply (tonic wraps the connector).
    ///
    /// ```
    /// # use tonic_hotpath::stats::{CombinedLayer, StatsHandler};
    /// # #[derive(Debug)]
    /// # struct Log;
    /// # impl StatsHandler for Log {
    /// #     type RpcState = ();
    /// #     type ConnState = ();
    /// # }
    /// # async fn client() -> Result<(), Box<dyn std::error::Error>> {
    /// use tonic::transport::Endpoint;
    /// use tower::ServiceBuilder;
    ///
    /// let layer = CombinedLayer::client().with(Log);
    /// let channel = Endpoint::from_static("http://127.0.0.1:50051")
    ///     .connect_with_connector(layer.connector())
    ///     .await?;
    /// let service = ServiceBuilder::new().layer(layer).service(channel);
    /// // e.g. `HealthClient::new(service)`
    /// # let _ = service;
    /// # Ok(())
    /// # }
    /// ```
    #[must_use = "a connector does nothing unless a channel uses it"]
    pub fn connector(&self) -> StatsConnector<HttpConnector, H> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        self.connector_with(http)
    }

    /// Wraps `connector` (a `Service<Uri>` whose IO implements hyper-util's
    /// `Connection`, as TCP, Unix socket and hyper-util-based TLS streams
    /// do) so that every connection delivers `ConnBegin` / `ConnEnd` to
    /// this layer's handlers.
    ///
    /// While a connection made by this layer's connectors is open, it is
    /// this layer's *current* connection: each RPC that begins then gets
    /// its state in [`StatsHandler::tag_rpc`] and its addresses in
    /// [`RpcInfo`] (`peer_addr` is the server's address,
    /// from the socket, or from the URI when the IO knows none). A tonic
    /// `Channel` holds one connection at a time and makes a new one after
    /// the old one fails, so with one channel per layer this is the
    /// connection the RPC is sent on. An RPC gets `None` for both when it
    /// begins while no connection is open: on a lazy channel
    /// (`connect_with_connector_lazy`) before the first connection, and
    /// between a connection's end and the reconnect. An RPC keeps the
    /// connection it was tagged with. Several channels (or a balanced
    /// channel) behind one layer link each RPC to the connection opened
    /// last: build one layer per channel.
    #[must_use = "a connector does nothing unless a channel uses it"]
    pub fn connector_with<C>(&self, connector: C) -> StatsConnector<C, H> {
        StatsConnector::new(connector, Arc::clone(self.handler()), self.link())
    }
}
