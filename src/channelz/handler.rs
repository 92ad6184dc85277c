//! The stats handlers that feed channelz: [`ServerEntry`] for a server,
//! [`ChannelEntry`] for a client channel.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tonic::Code;
use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};

use super::clock::unix_nanos;
use super::entity::CallEntity;
use super::registry::{SocketParent, registry};
use super::socket::{SocketEntity, StreamOrigin, TlsDetails};
use crate::stats::{ConnEvent, ConnInfo, End, RpcError, RpcEvent, RpcInfo, StatsHandler};

/// A connection's channelz socket, removed from the registry when the
/// connection closes. Empty when the connection is not tracked (the
/// registry was full, see
/// [`ChannelzService::MAX_SOCKETS`](super::ChannelzService::MAX_SOCKETS)).
#[derive(Debug, Default)]
pub struct ConnSocket(Option<Arc<SocketEntity>>);

impl ConnSocket {
    fn new(parent: SocketParent, info: &ConnInfo) -> Self {
        Self(registry().add_socket(parent, info.local_addr, info.peer_addr))
    }

    /// The socket's channelz id, when the connection is tracked.
    pub fn id(&self) -> Option<i64> {
        self.0.as_ref().map(|socket| socket.id)
    }

    /// Takes the socket out of the registry, once: at the connection's
    /// `End`, or when the state is dropped without one.
    fn close(&self) {
        if let Some(socket) = &self.0
            && socket.should_remove()
        {
            registry().remove_socket(socket.id);
        }
    }

    /// A connection event: the socket leaves when its connection ends.
    fn observe(&self, event: &ConnEvent) {
        if let ConnEvent::End { .. } = event {
            self.close();
        }
    }
}

/// How many layered services of a handler's layer are alive (see
/// [`StatsHandler::service_created`]): the handler's entity closes when
/// the last one goes.
#[derive(Debug, Default)]
struct LiveServices(AtomicUsize);

impl LiveServices {
    fn created(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a service gone; whether it was the last.
    fn dropped_last(&self) -> bool {
        self.0.fetch_sub(1, Ordering::AcqRel) == 1
    }
}

impl Drop for ConnSocket {
    fn drop(&mut self) {
        // Normally done at the connection's `End` already.
        self.close();
    }
}

/// The socket an RPC runs on, for counting its stream and messages.
#[derive(Debug, Default)]
pub struct RpcSocket(Option<Arc<SocketEntity>>);

impl RpcSocket {
    fn of(conn: Option<&ConnSocket>) -> Self {
        Self(conn.and_then(|conn| conn.0.clone()))
    }

    #[inline]
    fn payload(&self, event: &RpcEvent<'_>) {
        let Some(socket) = &self.0 else { return };
        match event {
            RpcEvent::InPayload(payload) => {
                socket.message_received(payload.time.map(unix_nanos));
            }
            RpcEvent::OutPayload(payload) => socket.message_sent(payload.time.map(unix_nanos)),
            _ => {}
        }
    }
}

/// One server's entry in channelz, kept up to date with its calls and
/// connections: a [`StatsHandler`] for a server [`CombinedLayer`](crate::stats::CombinedLayer),
/// added with `.with(..)` beside any other handler.
///
/// It registers a channelz server when created and closes it when the
/// service its layer made is dropped (the server stopped), or when the
/// handler is dropped if its layer never made one; the server leaves
/// channelz once its connections have closed too. Connections are its sockets when the server is served from
/// the layer's incoming stream (`layer.incoming_tcp(..)`, TCP with or
/// without TLS, Unix sockets); without it, only the calls are counted.
///
/// - **Calls** (`calls_started`, `calls_succeeded`, `calls_failed`, the last
///   start): every gRPC request the layer sees, succeeded when its status
///   is `OK`. grpc-go counts only calls to a registered method; a tower
///   layer cannot tell a route's own `UNIMPLEMENTED` from an unknown
///   method's, so those are counted (as failed) too.
/// - **Sockets**: streams started, succeeded (the status was sent) and
///   failed (the stream was reset or the connection broke first), as
///   grpc-go's transport counts them; messages sent and received with
///   their last times; the local and remote addresses; under TLS the
///   client's certificate (from tonic's `TlsConnectInfo`) and, when given
///   with [`local_certificate`](Self::local_certificate), the server's.
/// - **Not reported** (tonic does not expose them): keepalives, flow-control
///   windows, socket options, the cipher suite, addresses of Unix sockets.
///
/// ```
/// use tonic_hotpath::channelz::ServerEntry;
/// use tonic_hotpath::stats::CombinedLayer;
///
/// let channelz = ServerEntry::named("api");
/// let id = channelz.id();
/// let layer = CombinedLayer::server().with(channelz);
/// # let _ = (id, layer);
/// ```
#[derive(Debug)]
pub struct ServerEntry {
    entity: Arc<CallEntity>,
    local_certificate: Option<Arc<[u8]>>,
    services: LiveServices,
}

impl ServerEntry {
    /// A channelz server without a name (grpc-go's servers have none).
    pub fn new() -> Self {
        Self::named("")
    }

    /// A channelz server named `name` (its `ServerRef.name`).
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            entity: registry().add_server(name.into()),
            local_certificate: None,
            services: LiveServices::default(),
        }
    }

    /// The server's certificate (DER) to report as every TLS socket's
    /// `local_certificate`: tonic does not tell a layer which certificate
    /// it presented.
    #[must_use]
    pub fn local_certificate(mut self, der: impl Into<Vec<u8>>) -> Self {
        self.local_certificate = Some(der.into().into());
        self
    }

    /// The server's channelz id.
    pub fn id(&self) -> i64 {
        self.entity.id
    }

    /// Registers `addr` as one of the server's listening sockets until the
    /// returned guard is dropped (tonic's incoming streams do not tell a
    /// layer where they listen).
    pub fn listen_socket(&self, addr: SocketAddr) -> ListenSocket {
        ListenSocket(ConnSocket(registry().add_socket(
            SocketParent::Listener(self.entity.id),
            Some(addr),
            None,
        )))
    }

    fn tls_details(&self, info: &RpcInfo<'_>) -> Option<TlsDetails> {
        let extensions = info.extensions?;
        let certs = if let Some(tls) = extensions.get::<TlsConnectInfo<TcpConnectInfo>>() {
            tls.peer_certs()
        } else {
            #[cfg(unix)]
            {
                use tonic::transport::server::UdsConnectInfo;
                extensions
                    .get::<TlsConnectInfo<UdsConnectInfo>>()?
                    .peer_certs()
            }
            #[cfg(not(unix))]
            return None;
        };
        Some(TlsDetails {
            remote_certificate: certs.and_then(|certs| certs.first().map(|cert| cert.to_vec())),
            local_certificate: self.local_certificate.as_deref().map(<[u8]>::to_vec),
        })
    }
}

impl Default for ServerEntry {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for ServerEntry {
    fn drop(&mut self) {
        registry().close_server(self.entity.id);
    }
}

/// A listening socket registered with [`ServerEntry::listen_socket`];
/// it leaves channelz when dropped.
#[derive(Debug)]
pub struct ListenSocket(ConnSocket);

impl ListenSocket {
    /// The socket's channelz id (`None` when the registry was full).
    pub fn id(&self) -> Option<i64> {
        self.0.id()
    }
}

/// Whether a server stream ended with its status sent (grpc-go counts it
/// succeeded) rather than reset or cut by the connection.
fn server_stream_succeeded(end: &End<'_>) -> bool {
    !matches!(end.error, Some(RpcError::Cancelled | RpcError::Body { .. }))
}

/// Whether a client stream ended with the server's end of stream received
/// (grpc-go's `eosReceived`): a status, or a response that ended without
/// one.
fn client_stream_succeeded(end: &End<'_>) -> bool {
    matches!(end.error, None | Some(RpcError::MissingStatus { .. }))
}

impl StatsHandler for ServerEntry {
    type RpcState = RpcSocket;
    type ConnState = ConnSocket;

    fn tag_rpc(&self, info: &RpcInfo<'_>, conn: Option<&ConnSocket>) -> RpcSocket {
        let rpc = RpcSocket::of(conn);
        if let Some(socket) = &rpc.0
            && socket.should_check_tls()
            && let Some(details) = self.tls_details(info)
        {
            socket.set_tls(details);
        }
        rpc
    }

    fn handle_rpc(&self, rpc: &mut RpcSocket, event: &RpcEvent<'_>) {
        match event {
            RpcEvent::Begin { time } => {
                let at = unix_nanos(*time);
                self.entity.calls.started(at);
                if let Some(socket) = &rpc.0 {
                    socket.stream_started(StreamOrigin::Remote, at);
                }
            }
            RpcEvent::End(end) => {
                self.entity.calls.ended(end.code == Code::Ok);
                if let Some(socket) = &rpc.0 {
                    socket.stream_ended(server_stream_succeeded(end));
                }
            }
            _ => rpc.payload(event),
        }
    }

    fn tag_conn(&self, info: &ConnInfo) -> ConnSocket {
        ConnSocket::new(SocketParent::Server(self.entity.id), info)
    }

    fn handle_conn(&self, conn: &ConnSocket, event: &ConnEvent) {
        conn.observe(event);
    }

    fn service_created(&self) {
        self.services.created();
    }

    fn service_dropped(&self) {
        if self.services.dropped_last() {
            registry().close_server(self.entity.id);
        }
    }
}

/// One client channel's entry in channelz (and its subchannel's), kept
/// up to date with its calls and connections: a [`StatsHandler`] for a
/// client [`CombinedLayer`](crate::stats::CombinedLayer).
///
/// It registers a top channel for `target` with one subchannel (a tonic
/// `Channel` to one endpoint keeps one connection at a time) and closes
/// both when the service its layer made is dropped (or the handler, if
/// the layer never made one). Connections are the subchannel's sockets when the
/// channel was built with the layer's connector (`layer.connector()`);
/// without it, only the calls are counted.
///
/// - **Calls**: on the channel, every gRPC call, succeeded when its status
///   is `OK`; on the subchannel, the calls that had a connection when they
///   began (a call waiting for the first connection of a lazy channel is
///   counted on the channel only).
/// - **Sockets**: streams started, succeeded (the server's end of stream
///   arrived) and failed (reset, cancelled, deadline, broken connection),
///   messages sent and received with their last times, addresses.
/// - **Not reported**: the connectivity state (tonic does not expose its
///   transitions), keepalives, flow-control windows, socket options, TLS
///   details of client connections (tonic's client TLS wraps the
///   connector's connection out of a layer's sight).
///
/// ```
/// use tonic_hotpath::channelz::ChannelEntry;
/// use tonic_hotpath::stats::CombinedLayer;
///
/// let channelz = ChannelEntry::new("dns:///users.internal:50051");
/// let layer = CombinedLayer::client().with(channelz);
/// # let _ = layer;
/// ```
#[derive(Debug)]
pub struct ChannelEntry {
    channel: Arc<CallEntity>,
    subchannel: Arc<CallEntity>,
    services: LiveServices,
}

impl ChannelEntry {
    /// A channel to `target` (its `ChannelData.target`, e.g. the endpoint's
    /// URI).
    pub fn new(target: impl AsRef<str>) -> Self {
        let (channel, subchannel) = registry().add_channel(target.as_ref());
        Self {
            channel,
            subchannel,
            services: LiveServices::default(),
        }
    }

    /// The channel's channelz id.
    pub fn id(&self) -> i64 {
        self.channel.id
    }

    /// Its subchannel's channelz id.
    pub fn subchannel_id(&self) -> i64 {
        self.subchannel.id
    }
}

impl Drop for ChannelEntry {
    fn drop(&mut self) {
        registry().close_channel(self.channel.id);
    }
}

impl StatsHandler for ChannelEntry {
    type RpcState = RpcSocket;
    type ConnState = ConnSocket;

    fn tag_rpc(&self, _: &RpcInfo<'_>, conn: Option<&ConnSocket>) -> RpcSocket {
        RpcSocket::of(conn)
    }

    fn handle_rpc(&self, rpc: &mut RpcSocket, event: &RpcEvent<'_>) {
        match event {
            RpcEvent::Begin { time } => {
                let at = unix_nanos(*time);
                self.channel.calls.started(at);
                if let Some(socket) = &rpc.0 {
                    self.subchannel.calls.started(at);
                    socket.stream_started(StreamOrigin::Local, at);
                }
            }
            RpcEvent::End(end) => {
                let ok = end.code == Code::Ok;
                self.channel.calls.ended(ok);
                if let Some(socket) = &rpc.0 {
                    self.subchannel.calls.ended(ok);
                    socket.stream_ended(client_stream_succeeded(end));
                }
            }
            _ => rpc.payload(event),
        }
    }

    fn tag_conn(&self, info: &ConnInfo) -> ConnSocket {
        ConnSocket::new(SocketParent::Subchannel(self.subchannel.id), info)
    }

    fn handle_conn(&self, conn: &ConnSocket, event: &ConnEvent) {
        conn.observe(event);
    }

    fn service_created(&self) {
        self.services.created();
    }

    fn service_dropped(&self) {
        if self.services.dropped_last() {
            registry().close_channel(self.channel.id);
        }
    }
}
