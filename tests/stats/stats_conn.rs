//! Connections built from the layers, over real TCP on 127.0.0.1:
//! `TCP_NODELAY` from `incoming_tcp` and `connector()`, `ConnBegin` /
//! `ConnEnd` on both sides, client RPCs linked to their connection and
//! peer (also across a reconnect and on a lazy channel), and a server
//! layer that only takes its own connections' state.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use hyper_util::rt::TokioIo;
use support::{EchoClient, EchoRequest, EchoServer, EchoService, wait_until};
use tokio::net::{TcpListener, TcpStream};
use tokio_stream::StreamExt;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Server};
use tonic_hotpath::stats::{
    ClientSide, CombinedLayer, ConnEvent, ConnInfo, RpcInfo, ServerSide, Side, StatsHandler,
    StatsIo,
};
use tower::ServiceBuilder;

/// What `tag_rpc` was given: (connection id, peer, local).
type Tagged = (Option<u64>, Option<SocketAddr>, Option<SocketAddr>);

/// Numbers connections and records what each RPC was linked to.
#[derive(Debug, Default)]
struct Conns {
    next: AtomicU64,
    tagged_conns: Mutex<Vec<ConnInfo>>,
    conn_events: Mutex<Vec<(u64, &'static str)>>,
    rpcs: Mutex<Vec<Tagged>>,
}

impl StatsHandler for Conns {
    type RpcState = ();
    type ConnState = u64;

    fn tag_conn(&self, info: &ConnInfo) -> u64 {
        self.tagged_conns.lock().unwrap().push(*info);
        self.next.fetch_add(1, Ordering::SeqCst)
    }

    fn handle_conn(&self, id: &u64, event: &ConnEvent) {
        let kind = match event {
            ConnEvent::Begin { .. } => "begin",
            ConnEvent::End { .. } => "end",
            other => panic!("a connection event this test does not know: {other:?}"),
        };
        self.conn_events.lock().unwrap().push((*id, kind));
    }

    fn tag_rpc(&self, info: &RpcInfo<'_>, conn: Option<&u64>) {
        let tagged = (conn.copied(), info.peer_addr, info.local_addr);
        self.rpcs.lock().unwrap().push(tagged);
    }
}

impl Conns {
    fn conn_events(&self) -> Vec<(u64, &'static str)> {
        self.conn_events.lock().unwrap().clone()
    }

    fn rpcs(&self) -> Vec<Tagged> {
        self.rpcs.lock().unwrap().clone()
    }

    fn conn_infos(&self) -> Vec<ConnInfo> {
        self.tagged_conns.lock().unwrap().clone()
    }
}

fn request(message: &str) -> EchoRequest {
    EchoRequest {
        message: message.to_owned(),
    }
}

async fn listener() -> (SocketAddr, TcpListener) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    (listener.local_addr().expect("local addr"), listener)
}

/// Serves the echo service behind `layer`, with connections from
/// `layer.incoming_tcp(listener)`.
fn serve(layer: CombinedLayer<Arc<Conns>, ServerSide>, listener: TcpListener) {
    let incoming = layer.incoming_tcp(listener);
    tokio::spawn(
        Server::builder()
            .layer(layer)
            .add_service(EchoServer::new(EchoService))
            .serve_with_incoming(incoming),
    );
}

/// An echo server behind a layer of its own `Conns`.
async fn server() -> (SocketAddr, Arc<Conns>) {
    let conns = Arc::new(Conns::default());
    let (addr, listener) = listener().await;
    serve(CombinedLayer::server().with(Arc::clone(&conns)), listener);
    (addr, conns)
}

/// A client layer of its own `Conns` and a channel to `addr` made by the
/// layer's connector.
async fn connect(addr: SocketAddr) -> (Arc<Conns>, CombinedLayer<Arc<Conns>, ClientSide>, Channel) {
    let conns = Arc::new(Conns::default());
    let layer = CombinedLayer::client().with(Arc::clone(&conns));
    let channel = support::endpoint(addr)
        .connect_with_connector(layer.connector())
        .await
        .expect("connect");
    (conns, layer, channel)
}

/// `TCP_NODELAY` as read back from the sockets the server and the channel
/// actually use: on with `incoming_tcp` and `connector()`, off with a
/// plain `TcpIncoming` (the control: the reading is real).
#[tokio::test]
async fn nodelay_is_on_for_incoming_tcp_and_connector() {
    let server_nodelay = Arc::new(Mutex::new(Vec::new()));
    let client_nodelay = Arc::new(Mutex::new(Vec::new()));

    for defaults in [true, false] {
        let layer = CombinedLayer::server().with(Arc::new(Conns::default()));
        let (addr, listener) = listener().await;
        let incoming = if defaults {
            layer.incoming_tcp(listener)
        } else {
            layer.incoming(TcpIncoming::from(listener))
        };
        let seen = Arc::clone(&server_nodelay);
        let incoming = incoming.map(move |accepted| {
            let io: &StatsIo<TcpStream, _> = accepted.as_ref().expect("accepted");
            let nodelay = io.get_ref().nodelay().expect("read TCP_NODELAY");
            seen.lock().unwrap().push(nodelay);
            accepted
        });
        tokio::spawn(
            Server::builder()
                .layer(layer)
                .add_service(EchoServer::new(EchoService))
                .serve_with_incoming(incoming),
        );

        let client_layer = CombinedLayer::client().with(Arc::new(Conns::default()));
        let seen = Arc::clone(&client_nodelay);
        let connector = ServiceBuilder::new()
            .map_response(move |io: StatsIo<TokioIo<TcpStream>, Arc<Conns>>| {
                let nodelay = io.get_ref().inner().nodelay().expect("read TCP_NODELAY");
                seen.lock().unwrap().push(nodelay);
                io
            })
            .service(client_layer.connector());
        let channel = support::endpoint(addr)
            .connect_with_connector(connector)
            .await
            .expect("connect");
        let mut client =
            EchoClient::new(ServiceBuilder::new().layer(client_layer).service(channel));
        client.unary_echo(request("nodelay")).await.expect("rpc");
    }
    assert_eq!(*server_nodelay.lock().unwrap(), [true, false]);
    assert_eq!(*client_nodelay.lock().unwrap(), [true, true]);
}

/// Both sides see `ConnBegin` and `ConnEnd` once, with each other's
/// addresses; every client RPC is tagged with the connection and the
/// server's address, every server RPC with the connection and the
/// client's address.
#[tokio::test]
async fn both_sides_link_rpcs_to_their_connection() {
    let (addr, server) = server().await;
    let (client_conns, layer, channel) = connect(addr).await;
    let mut client = EchoClient::new(ServiceBuilder::new().layer(layer).service(channel));
    client.unary_echo(request("a")).await.expect("rpc a");
    client.unary_echo(request("b")).await.expect("rpc b");

    let [client_info] = client_conns.conn_infos()[..] else {
        panic!("one client connection: {:?}", client_conns.conn_infos());
    };
    let [server_info] = server.conn_infos()[..] else {
        panic!("one server connection: {:?}", server.conn_infos());
    };
    assert_eq!(client_info.side, Side::Client);
    assert_eq!(server_info.side, Side::Server);
    assert_eq!(client_info.peer_addr, Some(addr));
    assert_eq!(server_info.local_addr, Some(addr));
    let client_addr = client_info.local_addr.expect("client local addr");
    assert_eq!(server_info.peer_addr, Some(client_addr));

    let on_client = (Some(0), Some(addr), Some(client_addr));
    assert_eq!(client_conns.rpcs(), [on_client, on_client]);
    let on_server = (Some(0), Some(client_addr), Some(addr));
    assert_eq!(server.rpcs(), [on_server, on_server]);

    drop(client);
    wait_until("client ConnEnd", || client_conns.conn_events().len() == 2).await;
    wait_until("server ConnEnd", || server.conn_events().len() == 2).await;
    let once = vec![(0, "begin"), (0, "end")];
    assert_eq!(client_conns.conn_events(), once);
    assert_eq!(server.conn_events(), once);
}

/// The server goes away and comes back on the same address: the RPC that
/// begins while the channel has no connection is linked to none; the
/// reconnect gives a new `ConnBegin`, and later RPCs are linked to it.
#[tokio::test]
async fn rpcs_after_a_reconnect_are_linked_to_the_new_connection() {
    let server_layer = CombinedLayer::server().with(Arc::new(Conns::default()));
    let (addr, listener) = listener().await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let first_server = tokio::spawn(
        Server::builder()
            .layer(server_layer.clone())
            .add_service(EchoServer::new(EchoService))
            .serve_with_incoming_shutdown(server_layer.incoming_tcp(listener), async {
                let _ = stopped.await;
            }),
    );

    let (client_conns, layer, channel) = connect(addr).await;
    let mut client = EchoClient::new(ServiceBuilder::new().layer(layer).service(channel));
    client.unary_echo(request("first")).await.expect("rpc 1");

    // Graceful shutdown: GOAWAY, the connection closes, the listener too.
    stop.send(()).expect("server running");
    first_server.await.expect("server task").expect("serve");
    wait_until("client ConnEnd", || client_conns.conn_events().len() == 2).await;
    let listener = TcpListener::bind(addr).await.expect("rebind the address");
    serve(server_layer, listener);

    client.unary_echo(request("second")).await.expect("rpc 2");
    client.unary_echo(request("third")).await.expect("rpc 3");

    let [_, second_conn] = client_conns.conn_infos()[..] else {
        panic!("two client connections: {:?}", client_conns.conn_infos());
    };
    let client_addr = second_conn.local_addr;
    assert!(client_addr.is_some());
    let rpcs = client_conns.rpcs();
    assert_eq!(rpcs.len(), 3);
    assert_eq!((rpcs[0].0, rpcs[0].1), (Some(0), Some(addr)));
    assert_eq!(
        rpcs[1],
        (None, None, None),
        "no connection open as rpc 2 began"
    );
    assert_eq!(rpcs[2], (Some(1), Some(addr), client_addr));
    assert_eq!(
        client_conns.conn_events(),
        [(0, "begin"), (0, "end"), (1, "begin")]
    );
}

/// A lazy channel connects on its first RPC, after that RPC was tagged.
#[tokio::test]
async fn lazy_channel_links_rpcs_once_connected() {
    let (addr, _) = server().await;
    let client_conns = Arc::new(Conns::default());
    let layer = CombinedLayer::client().with(Arc::clone(&client_conns));
    let channel = support::endpoint(addr).connect_with_connector_lazy(layer.connector());
    let mut client = EchoClient::new(ServiceBuilder::new().layer(layer).service(channel));
    assert!(
        client_conns.conn_events().is_empty(),
        "lazy: no connection yet"
    );
    client.unary_echo(request("first")).await.expect("rpc 1");
    client.unary_echo(request("second")).await.expect("rpc 2");

    let rpcs = client_conns.rpcs();
    assert_eq!(rpcs[0], (None, None, None));
    assert_eq!((rpcs[1].0, rpcs[1].1), (Some(0), Some(addr)));
    assert_eq!(client_conns.conn_events(), [(0, "begin")]);
}

/// Two server layers of the same handler type: only the one that built
/// the incoming stream gets the connection's state; the other still sees
/// the addresses.
#[tokio::test]
async fn a_server_layer_takes_only_its_own_connections_state() {
    let own = Arc::new(Conns::default());
    let other = Arc::new(Conns::default());
    let own_layer = CombinedLayer::server().with(Arc::clone(&own));
    let other_layer = CombinedLayer::server().with(Arc::clone(&other));
    let (addr, listener) = listener().await;
    let incoming = own_layer.incoming_tcp(listener);
    tokio::spawn(
        Server::builder()
            .layer(other_layer)
            .layer(own_layer)
            .add_service(EchoServer::new(EchoService))
            .serve_with_incoming(incoming),
    );
    let mut client = EchoClient::new(support::connect(addr).await);
    client.unary_echo(request("x")).await.expect("rpc");

    let [(own_conn, own_peer, _)] = own.rpcs()[..] else {
        panic!("one rpc: {:?}", own.rpcs());
    };
    let [(other_conn, other_peer, _)] = other.rpcs()[..] else {
        panic!("one rpc: {:?}", other.rpcs());
    };
    assert_eq!(own_conn, Some(0));
    assert_eq!(other_conn, None, "not its connection");
    assert!(own_peer.is_some());
    assert_eq!(other_peer, own_peer);
    assert!(other.conn_events().is_empty());
}

/// The client layer wraps stacks over a channel (tower's `Buffer`, tonic's
/// `InterceptedService`, `MapErr` to a boxed error) as well as the channel
/// itself ([`ClientTransport`](tonic_hotpath::stats::ClientTransport)), and
/// the link still reaches the RPCs through them.
#[tokio::test]
async fn client_layer_wraps_stacks_over_a_channel() {
    let (addr, _) = server().await;
    let (client_conns, layer, channel) = connect(addr).await;
    let stack = ServiceBuilder::new()
        .layer(layer)
        .buffer(16)
        .map_err(tonic::codegen::StdError::from)
        .layer(tonic::service::InterceptorLayer::new(Ok))
        .service(channel);
    let mut client = EchoClient::new(stack);
    client.unary_echo(request("stacked")).await.expect("rpc");
    let [(conn, peer, _)] = client_conns.rpcs()[..] else {
        panic!("one rpc: {:?}", client_conns.rpcs());
    };
    assert_eq!((conn, peer), (Some(0), Some(addr)));
}
