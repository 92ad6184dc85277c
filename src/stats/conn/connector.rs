//! Client connections: [`StatsConnector`] wraps the connector handed to
//! `Endpoint::connect_with_connector`, built from the client layer so both
//! share one handler and the layer's RPCs are linked to the connection.

use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::uri::Authority;
use http::{Extensions, Uri};
use hyper_util::client::legacy::connect::{Connection, HttpInfo};
use pin_project_lite::pin_project;
use tower::Service;

use super::io::{ConnOwner, StatsIo};
use super::link::ConnLink;
#[cfg(doc)]
use crate::stats::CombinedLayer;
use crate::stats::StatsHandler;
use crate::stats::event::{ConnInfo, Side};

/// A client connector (for `Endpoint::connect_with_connector`) whose
/// connections are observed by a client layer's handlers and linked to
/// that layer's RPCs.
///
/// Built from the layer ([`CombinedLayer::connector`],
/// [`CombinedLayer::connector_with`]). Each connection it makes is a
/// [`StatsIo`]: `ConnBegin` once connected, `ConnEnd` when hyper drops it.
///
/// ```
/// use std::net::SocketAddr;
/// use std::sync::Mutex;
/// use std::sync::atomic::{AtomicU64, Ordering};
///
/// use tonic::transport::server::TcpIncoming;
/// use tonic::transport::{Endpoint, Server};
/// use tonic_health::pb::HealthCheckRequest;
/// use tonic_health::pb::health_client::HealthClient;
/// use tonic_hotpath::stats::{CombinedLayer, ConnInfo, RpcInfo, StatsHandler};
/// use tower::ServiceBuilder;
///
/// /// Numbers connections; remembers each RPC's connection and peer.
/// #[derive(Debug, Default)]
/// struct ConnIds {
///     next: AtomicU64,
///     rpcs: Mutex<Vec<(Option<u64>, Option<SocketAddr>)>>,
/// }
///
/// impl StatsHandler for ConnIds {
///     type RpcState = ();
///     type ConnState = u64;
///
///     fn tag_conn(&self, _: &ConnInfo) -> u64 {
///         self.next.fetch_add(1, Ordering::Relaxed)
///     }
///
///     fn tag_rpc(&self, info: &RpcInfo<'_>, conn: Option<&u64>) {
///         self.rpcs.lock().unwrap().push((conn.copied(), info.peer_addr));
///     }
/// }
///
/// #[tokio::main(flavor = "current_thread")]
/// async fn main() -> Result<(), Box<dyn std::error::Error>> {
///     // A server to talk to.
///     let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
///     let addr = listener.local_addr()?;
///     let (_reporter, health) = tonic_health::server::health_reporter();
///     let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
///     tokio::spawn(Server::builder().add_service(health).serve_with_incoming(incoming));
///
///     // The client: the layer's connector makes the channel's connections.
///     let layer = CombinedLayer::client().with(ConnIds::default());
///     let channel = Endpoint::from_shared(format!("http://{addr}"))?
///         .connect_with_connector(layer.connector())
///         .await?;
///     let ids = std::sync::Arc::clone(layer.handler());
///     let mut client = HealthClient::new(ServiceBuilder::new().layer(layer).service(channel));
///     client
///         .check(HealthCheckRequest { service: String::new() })
///         .await?;
///     // The RPC went over connection 0, to the server's address.
///     assert_eq!(*ids.rpcs.lock().unwrap(), [(Some(0), Some(addr))]);
///     Ok(())
/// }
/// ```
pub struct StatsConnector<C, H: StatsHandler> {
    inner: C,
    handler: Arc<H>,
    link: Arc<ConnLink<H>>,
}

impl<C: Clone, H: StatsHandler> Clone for StatsConnector<C, H> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            handler: Arc::clone(&self.handler),
            link: Arc::clone(&self.link),
        }
    }
}

impl<C: fmt::Debug, H: StatsHandler> fmt::Debug for StatsConnector<C, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StatsConnector")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<C, H: StatsHandler> StatsConnector<C, H> {
    /// `connector`, observed by `handler`, its connections published
    /// through `link` (see `CombinedLayer::connector_with`).
    pub(crate) fn new(connector: C, handler: Arc<H>, link: Arc<ConnLink<H>>) -> Self {
        Self {
            inner: connector,
            handler,
            link,
        }
    }

    /// The wrapped connector.
    pub fn get_ref(&self) -> &C {
        &self.inner
    }
}

impl<C, H> Service<Uri> for StatsConnector<C, H>
where
    C: Service<Uri>,
    C::Response: Connection,
    H: StatsHandler,
{
    type Response = StatsIo<C::Response, H>;
    type Error = C::Error;
    type Future = ConnectFuture<C::Future, H>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), C::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let authority = uri.authority().cloned();
        let uri_addr = authority
            .as_ref()
            .and_then(|authority| authority.as_str().parse().ok());
        ConnectFuture {
            inner: self.inner.call(uri),
            handler: Arc::clone(&self.handler),
            link: Arc::clone(&self.link),
            uri_addr,
            authority,
        }
    }
}

pin_project! {
    /// The future of [`StatsConnector`]: the inner connection, wrapped and
    /// made the layer's current connection.
    pub struct ConnectFuture<F, H: StatsHandler> {
        #[pin]
        inner: F,
        handler: Arc<H>,
        link: Arc<ConnLink<H>>,
        // The URI's authority when it is a literal `ip:port`: the peer
        // address when the IO reports none.
        uri_addr: Option<SocketAddr>,
        // The URI's authority: the requests' when they carry none.
        authority: Option<Authority>,
    }
}

impl<F, H: StatsHandler> fmt::Debug for ConnectFuture<F, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectFuture")
            .field("uri_addr", &self.uri_addr)
            .finish_non_exhaustive()
    }
}

impl<F, IO, E, H> Future for ConnectFuture<F, H>
where
    F: Future<Output = Result<IO, E>>,
    IO: Connection,
    H: StatsHandler,
{
    type Output = Result<StatsIo<IO, H>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let io = std::task::ready!(this.inner.poll(cx))?;
        // The socket's addresses, as hyper-util reports them (once per
        // connection, so the extensions map it needs costs nothing per RPC).
        let mut extras = Extensions::new();
        io.connected().get_extras(&mut extras);
        let socket = extras.get::<HttpInfo>();
        let info = ConnInfo {
            side: Side::Client,
            peer_addr: socket.map(HttpInfo::remote_addr).or(*this.uri_addr),
            local_addr: socket.map(HttpInfo::local_addr),
        };
        let owner = ConnOwner::Client(Arc::clone(this.link));
        let authority = this.authority.take();
        let handler = Arc::clone(this.handler);
        Poll::Ready(Ok(StatsIo::new(io, handler, info, authority, owner)))
    }
}
