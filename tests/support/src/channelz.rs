//! Shared support for the channelz tests: a scripted echo service, a
//! server fed to a [`ServerEntry`] on the layer's incoming stream, a
//! client channel fed to a [`ChannelEntry`] through the layer's
//! connector, and a channelz client of the admin services, served apart
//! (so that queries are not calls of the server under test).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpListener;
use tonic::service::Routes;
use tonic::transport::{Channel, Endpoint, Server};
use tonic::{Request, Response, Status};
use tonic_hotpath::channelz::proto::channelz_client::ChannelzClient;
use tonic_hotpath::channelz::{Admin, ChannelEntry, ServerEntry, proto};
use tonic_hotpath::stats::{CombinedLayer, CombinedService};

use crate::{Echo, EchoClient, EchoOverride, EchoRequest, EchoResponse, EchoServer, EchoService};

/// The echo service, with unary messages that script the outcome:
/// `fail` answers `INVALID_ARGUMENT`, `slow` waits 30 s (for cancels and
/// deadlines); anything else is echoed. Streaming methods are
/// [`EchoService`]'s.
#[derive(Debug, Clone, Copy, Default)]
pub struct ScriptedEcho;

#[tonic::async_trait]
impl EchoOverride for ScriptedEcho {
    async fn unary(&self, request: Request<EchoRequest>) -> Result<Response<EchoResponse>, Status> {
        match request.get_ref().message.as_str() {
            "fail" => Err(Status::invalid_argument("scripted failure")),
            "slow" => {
                tokio::time::sleep(Duration::from_secs(30)).await;
                EchoService.unary_echo(request).await
            }
            _ => EchoService.unary_echo(request).await,
        }
    }
}

/// An echo request carrying `message` (see [`ScriptedEcho`]).
pub fn request(message: &str) -> EchoRequest {
    EchoRequest {
        message: message.to_owned(),
    }
}

/// A server under test: its address, channelz id and task.
pub struct TestServer {
    pub addr: SocketAddr,
    pub id: i64,
    pub task: tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
}

/// Serves [`ScriptedEcho`] behind a stats layer with a [`ServerEntry`]
/// (configured by `handler`) on 127.0.0.1:0, connections counted through
/// the layer's incoming stream; `server` is the builder (TLS or not).
pub async fn spawn_server(server: Server, handler: ServerEntry) -> TestServer {
    let id = handler.id();
    let layer = CombinedLayer::server().with(handler);
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    let task = tokio::spawn(
        server
            .layer(layer.clone())
            .add_routes(Routes::new(EchoServer::new(ScriptedEcho)))
            .serve_with_incoming(layer.incoming_tcp(listener)),
    );
    TestServer { addr, id, task }
}

/// The admin services (channelz, reflection, health) on a server of their
/// own, without any stats layer; returns its address.
pub async fn spawn_admin() -> SocketAddr {
    let (addr, incoming) = crate::bind().await;
    let routes = Admin::new()
        .with_health(tonic_hotpath::channelz::HealthReporter::new())
        .into_routes()
        .expect("admin routes");
    tokio::spawn(
        Server::builder()
            .add_routes(routes)
            .serve_with_incoming(incoming),
    );
    addr
}

/// A channelz client of the admin server at `addr`.
pub async fn channelz_client(addr: SocketAddr) -> ChannelzClient<Channel> {
    ChannelzClient::new(crate::connect(addr).await)
}

/// An echo client through a stats layer with a [`ChannelEntry`] for
/// `endpoint`, its connection made by the layer's connector; returns the
/// client and the channel's id and subchannel id.
pub async fn channel_client(
    endpoint: Endpoint,
) -> (
    EchoClient<CombinedService<Channel, ChannelEntry, tonic_hotpath::stats::ClientSide>>,
    i64,
    i64,
) {
    let handler = ChannelEntry::new(endpoint.uri().to_string());
    let (id, sub) = (handler.id(), handler.subchannel_id());
    let layer = CombinedLayer::client().with(handler);
    let channel = endpoint
        .connect_with_connector(layer.connector())
        .await
        .expect("connect");
    (crate::stacks::client(channel, layer), id, sub)
}

/// The server `id` as channelz reports it.
pub async fn fetch_server(client: &mut ChannelzClient<Channel>, id: i64) -> proto::Server {
    client
        .get_server(proto::GetServerRequest { server_id: id })
        .await
        .expect("GetServer")
        .into_inner()
        .server
        .expect("server set")
}

/// The ids of every socket of server `id`, walking the pages `page` at a
/// time.
pub async fn server_socket_ids(
    client: &mut ChannelzClient<Channel>,
    id: i64,
    page: i64,
) -> Vec<i64> {
    let mut ids = Vec::new();
    let mut start = 0;
    loop {
        let reply = client
            .get_server_sockets(proto::GetServerSocketsRequest {
                server_id: id,
                start_socket_id: start,
                max_results: page,
            })
            .await
            .expect("GetServerSockets")
            .into_inner();
        for reference in &reply.socket_ref {
            ids.push(reference.socket_id);
            start = reference.socket_id + 1;
        }
        if reply.end {
            return ids;
        }
    }
}

/// Every socket of server `id`, walking the pages `page` at a time.
///
/// A connection may close between the listing and the fetch of its
/// socket (channelz removes it at once, as grpc-go's does): such a socket
/// is left out, and checked to be gone from a fresh listing too, so that
/// a socket listed but not found stays an error.
pub async fn server_sockets(
    client: &mut ChannelzClient<Channel>,
    id: i64,
    page: i64,
) -> Vec<proto::Socket> {
    let mut sockets = Vec::new();
    let mut gone = Vec::new();
    for socket_id in server_socket_ids(client, id, page).await {
        match try_socket(client, socket_id).await {
            Some(socket) => sockets.push(socket),
            None => gone.push(socket_id),
        }
    }
    if !gone.is_empty() {
        let listed = server_socket_ids(client, id, page).await;
        assert!(
            gone.iter().all(|socket_id| !listed.contains(socket_id)),
            "sockets {gone:?} were not found, yet are still listed: {listed:?}"
        );
    }
    sockets
}

/// The socket `id`.
pub async fn socket(client: &mut ChannelzClient<Channel>, id: i64) -> proto::Socket {
    try_socket(client, id)
        .await
        .unwrap_or_else(|| panic!("GetSocket: socket {id} not found"))
}

/// The socket `id`, or `None` when channelz answers `NOT_FOUND`.
pub async fn try_socket(client: &mut ChannelzClient<Channel>, id: i64) -> Option<proto::Socket> {
    match client
        .get_socket(proto::GetSocketRequest {
            socket_id: id,
            summary: false,
        })
        .await
    {
        Ok(reply) => Some(reply.into_inner().socket.expect("socket set")),
        Err(status) if status.code() == tonic::Code::NotFound => None,
        Err(status) => panic!("GetSocket {id}: {status:?}"),
    }
}

/// The call counts of a server's, channel's or subchannel's data:
/// (started, succeeded, failed).
pub fn server_calls(server: &proto::Server) -> (i64, i64, i64) {
    let data = server.data.as_ref().expect("server data");
    (data.calls_started, data.calls_succeeded, data.calls_failed)
}

/// As [`server_calls`], for channel data.
pub fn channel_calls(data: &proto::ChannelData) -> (i64, i64, i64) {
    (data.calls_started, data.calls_succeeded, data.calls_failed)
}

/// A socket's (streams started, succeeded, failed, messages sent,
/// received).
pub fn socket_counts(socket: &proto::Socket) -> [i64; 5] {
    let data = socket.data.as_ref().expect("socket data");
    [
        data.streams_started,
        data.streams_succeeded,
        data.streams_failed,
        data.messages_sent,
        data.messages_received,
    ]
}

/// The IP address and port of a channelz address.
pub fn tcp_addr(address: Option<&proto::Address>) -> Option<SocketAddr> {
    match address?.address.as_ref()? {
        proto::address::Address::TcpipAddress(tcp) => {
            let ip: std::net::IpAddr = match tcp.ip_address.len() {
                4 => <[u8; 4]>::try_from(tcp.ip_address.as_slice()).ok()?.into(),
                16 => <[u8; 16]>::try_from(tcp.ip_address.as_slice()).ok()?.into(),
                _ => return None,
            };
            Some(SocketAddr::new(ip, u16::try_from(tcp.port).ok()?))
        }
        _ => None,
    }
}

/// Polls `read` (up to [`PATIENCE`](crate::PATIENCE)) until it
/// returns `want`; returns the last value read.
pub async fn eventually<T, F, Fut>(want: &T, mut read: F) -> T
where
    T: PartialEq + std::fmt::Debug,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let mut last = read().await;
    let deadline = crate::deadline();
    while std::time::Instant::now() < deadline {
        if &last == want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        last = read().await;
    }
    last
}

/// How many sockets channelz lists for server `id` (one page, asked of
/// the channelz service in process, so that the query opens no
/// connection of its own).
pub async fn server_socket_count(id: i64) -> usize {
    use tonic_hotpath::channelz::ChannelzService;
    use tonic_hotpath::channelz::proto::channelz_server::Channelz;
    let request = proto::GetServerSocketsRequest {
        server_id: id,
        start_socket_id: 0,
        max_results: i64::MAX,
    };
    let reply = ChannelzService
        .get_server_sockets(Request::new(request))
        .await
        .expect("GetServerSockets")
        .into_inner();
    assert!(reply.end, "one page holds every socket");
    reply.socket_ref.len()
}
