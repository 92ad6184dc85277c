//! `CombinedLayer` on the stacks servers really run, over real tonic
//! servers and clients on 127.0.0.1 (or a Unix socket): axum routes beside
//! gRPC (item 1 of issue #18), tonic-web in either order (item 2), and the
//! connection info every layer and the handler see behind the layer's
//! connection wrappers, for TCP, TLS with client certificates and Unix
//! sockets (item 6).

use support::stacks;
use support::stats_events;

use std::net::SocketAddr;
use std::sync::Arc;

use stacks::plain_http::{get_request, http1, http2, post_json, spawn_grpc_and_axum};
use stacks::record::{ConnSeen, ProbeLayer, RecordingEcho};
use stacks::tls::{TestCerts, spawn_tls, tls_endpoint};
use stacks::web::{WebFormat, spawn_web_layer_inside, spawn_web_layer_outside, web_unary};
use stacks::{client, spawn_echo, uds};
use stats_events::{Ev, EventLog};
use support::{EchoRequest, EchoService};
use tonic::Code;
use tonic_hotpath::stats::{CombinedLayer, Payload, Side};
use tower::ServiceBuilder;
use tower::layer::util::Identity;

/// The server's events of one successful unary echo of `message`: its
/// request and response are the same protobuf, `len` bytes.
fn unary_ok(len: u32) -> Vec<Ev> {
    vec![
        Ev::InHeader,
        Ev::Begin,
        Ev::InPayload(Payload::uncompressed(len)),
        Ev::OutHeader,
        Ev::OutPayload(Payload::uncompressed(len)),
        Ev::OutTrailer,
        Ev::End {
            code: Code::Ok,
            message: String::new(),
            error: None,
        },
    ]
}

/// The encoded length of an `EchoRequest` (or `EchoResponse`) of `message`.
fn echo_len(message: &str) -> u32 {
    use prost::Message;
    let request = EchoRequest {
        message: message.to_owned(),
    };
    request.encoded_len() as u32
}

/// Item 1: plain HTTP requests (axum routes on the same server, HTTP/1.1
/// and HTTP/2) pass through untouched, and the gRPC call beside them is
/// reported exactly.
#[tokio::test]
async fn axum_routes_beside_grpc_are_not_instrumented() {
    let log = Arc::new(EventLog::default());
    let (addr, incoming) = support::bind().await;
    let layer = CombinedLayer::server().with(Arc::clone(&log));
    spawn_grpc_and_axum(layer.clone(), EchoService, layer.incoming(incoming));

    for reply in [
        http1(addr, get_request("/healthz")).await,
        http2(addr, get_request("/healthz")).await,
    ] {
        assert_eq!(
            (reply.status.as_u16(), reply.text()),
            (200, "ok"),
            "{reply:?}"
        );
    }
    let json = r#"{"a":[1,2,3]}"#;
    for reply in [
        http1(addr, post_json("/json", json)).await,
        http2(addr, post_json("/json", json)).await,
    ] {
        assert_eq!(
            (reply.status.as_u16(), reply.text()),
            (200, json),
            "{reply:?}"
        );
    }
    assert_eq!(
        log.rpc_count(),
        0,
        "no RPC for plain HTTP: {:?}",
        log.rpcs()
    );

    let mut grpc = client(support::connect(addr).await, Identity::new());
    let reply = grpc.unary_echo(request("hello")).await.unwrap();
    assert_eq!(reply.into_inner().message, "hello");
    log.wait_for_ends(1).await;
    assert_eq!(log.rpcs(), [unary_ok(echo_len("hello"))]);
}

fn request(message: &str) -> EchoRequest {
    EchoRequest {
        message: message.to_owned(),
    }
}

/// Item 2: with the stats layer outside tonic-web it sees grpc-web
/// requests, which are not gRPC: they pass through, no event and never a
/// false error, in both grpc-web formats.
#[tokio::test]
async fn grpc_web_outside_the_stats_layer_passes_through() {
    let log = Arc::new(EventLog::default());
    let (addr, incoming) = support::bind().await;
    let layer = CombinedLayer::server().with(Arc::clone(&log));
    spawn_web_layer_outside(layer, EchoService, incoming);
    for format in [WebFormat::Proto, WebFormat::Text] {
        let reply = web_unary(addr, format, "web").await;
        assert_eq!(reply.grpc_status(), Some(0), "{format:?}: {reply:?}");
        assert_eq!(reply.echo().message, "web");
    }
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    assert_eq!(log.rpc_count(), 0, "{:?}", log.rpcs());
}

/// Item 2: inside tonic-web, the stats layer sees the gRPC call tonic-web
/// made of each grpc-web call, and reports it exactly.
#[tokio::test]
async fn grpc_web_inside_the_stats_layer_is_reported_exactly() {
    let log = Arc::new(EventLog::default());
    let (addr, incoming) = support::bind().await;
    let layer = CombinedLayer::server().with(Arc::clone(&log));
    spawn_web_layer_inside(layer, EchoService, incoming);
    for format in [WebFormat::Proto, WebFormat::Text] {
        let reply = web_unary(addr, format, "web").await;
        assert_eq!(reply.grpc_status(), Some(0), "{format:?}: {reply:?}");
    }
    log.wait_for_ends(2).await;
    let len = echo_len("web");
    assert_eq!(log.rpcs(), [unary_ok(len), unary_ok(len)]);
}

/// Item 6: behind the layer's connection wrapper, a TLS server with client
/// certificates: the handler still sees the peer certificates and the
/// remote address, layers above and below the stats layer see tonic's
/// `TcpConnectInfo` and `TlsConnectInfo<TcpConnectInfo>` exactly as
/// without it, and the stats handler links the RPC to its connection.
#[tokio::test]
async fn mtls_connection_info_is_unchanged_behind_the_stats_layer() {
    let certs = TestCerts::generate();
    // Without the stats layer: what tonic gives.
    let (outer, inner) = (ProbeLayer::new(), ProbeLayer::new());
    let (addr, incoming) = support::bind().await;
    let stack = ServiceBuilder::new()
        .layer(outer.clone())
        .layer(inner.clone())
        .into_inner();
    let without = mtls_call(&certs, stack, incoming, addr).await;
    assert_eq!(without.peer_certs, Some(1), "{without:?}");
    assert!(without.tls_tcp && without.tcp, "{without:?}");

    // With it, served through its connection wrapper.
    let log = Arc::new(EventLog::default());
    let stats = CombinedLayer::server().with(Arc::clone(&log));
    let (outer_with, inner_with) = (ProbeLayer::new(), ProbeLayer::new());
    let (addr, incoming) = support::bind().await;
    let stack = ServiceBuilder::new()
        .layer(outer_with.clone())
        .layer(stats.clone())
        .layer(inner_with.clone())
        .into_inner();
    let with = mtls_call(&certs, stack, stats.incoming(incoming), addr).await;
    let kind = |seen: &ConnSeen| {
        let (local, remote) = (seen.local_addr.is_some(), seen.remote_addr.is_some());
        (
            seen.tcp,
            seen.tls_tcp,
            seen.uds,
            seen.peer_certs,
            local,
            remote,
        )
    };
    assert_eq!(
        kind(&with),
        kind(&without),
        "handler: {with:?} vs {without:?}"
    );
    assert_eq!(with.local_addr, Some(addr));
    for (probe, reference) in [(outer_with, outer), (inner_with, inner)] {
        let (seen, reference) = (probe.seen(), reference.seen());
        assert_eq!(seen.len(), 1);
        assert_eq!(kind(&seen[0].conn), kind(&reference[0].conn), "{seen:?}");
    }
    log.wait_for_ends(1).await;
    let tagged = log.tagged();
    assert_eq!(
        tagged[0].conn,
        Some(0),
        "the RPC is linked to its connection"
    );
    assert_eq!(tagged[0].peer_addr, with.remote_addr);
    assert_eq!(tagged[0].local_addr, Some(addr));
    assert_eq!(log.conns()[0].1.peer_addr, with.remote_addr);
}

/// One unary call over mTLS to an echo server behind `stack` on
/// `incoming` (bound at `addr`): what the handler saw of the connection.
async fn mtls_call<L, I>(certs: &TestCerts, stack: L, incoming: I, addr: SocketAddr) -> ConnSeen
where
    L: stacks::ServerLayer<tonic::service::Routes>,
    I: stacks::Incoming,
{
    let echo = RecordingEcho::default();
    spawn_tls(stack, echo.clone(), certs.server_mtls(), incoming);
    let channel = tls_endpoint(addr, certs.client_mtls())
        .connect()
        .await
        .unwrap();
    let mut grpc = client(channel, Identity::new());
    grpc.unary_echo(request("tls")).await.unwrap();
    echo.last().conn
}

/// Item 6: a plain TCP server served through `layer.incoming`: a layer
/// outside the stats layer still finds tonic's `TcpConnectInfo` (an
/// IP-keyed limiter there sees the address).
#[tokio::test]
async fn tcp_connect_info_reaches_layers_outside_the_stats_layer() {
    let log = Arc::new(EventLog::default());
    let stats = CombinedLayer::server().with(Arc::clone(&log));
    let outer = ProbeLayer::new();
    let echo = RecordingEcho::default();
    let (addr, incoming) = support::bind().await;
    let stack = ServiceBuilder::new()
        .layer(outer.clone())
        .layer(stats.clone())
        .into_inner();
    spawn_echo(stack, echo.clone(), stats.incoming(incoming));
    let mut grpc = client(support::connect(addr).await, Identity::new());
    grpc.unary_echo(request("tcp")).await.unwrap();
    let seen = outer.seen();
    assert!(seen[0].conn.tcp, "{seen:?}");
    assert_eq!(seen[0].conn.local_addr, Some(addr));
    assert_eq!(seen[0].conn.remote_addr, echo.last().conn.remote_addr);
    assert!(echo.last().conn.remote_addr.is_some());
    log.wait_for_ends(1).await;
    assert_eq!(log.tagged()[0].conn, Some(0));
}

/// Item 6: Unix sockets on both sides: the server's incoming stream and the
/// client's connector are the layers' own wrappers; the handler still sees
/// `UdsConnectInfo`, both sides deliver connection events and link their
/// RPCs to their connections.
#[tokio::test]
async fn unix_sockets_through_the_layers_connection_wrappers() {
    let server_log = Arc::new(EventLog::default());
    let client_log = Arc::new(EventLog::default());
    let server = CombinedLayer::server().with(Arc::clone(&server_log));
    let echo = RecordingEcho::default();
    let (path, incoming) = uds::bind();
    spawn_echo(server.clone(), echo.clone(), server.incoming(incoming));

    let client_layer = CombinedLayer::client().with(Arc::clone(&client_log));
    let channel = uds::channel_with(client_layer.connector_with(uds::connector(path.path()))).await;
    let mut grpc = client(channel, client_layer);
    for message in ["a", "b"] {
        grpc.unary_echo(request(message)).await.unwrap();
    }
    assert!(echo.last().conn.uds, "{:?}", echo.last());
    server_log.wait_for_ends(2).await;
    client_log.wait_for_ends(2).await;
    for (log, side) in [(&server_log, Side::Server), (&client_log, Side::Client)] {
        let tagged = log.tagged();
        assert!(
            tagged.iter().all(|t| t.side == side && t.conn == Some(0)),
            "{side:?}: {tagged:?}"
        );
        assert_eq!(log.conn_events(), [(0, "tagged"), (0, "begin")], "{side:?}");
    }
    drop(grpc);
    support::wait_until("the connections to end", || {
        server_log.conn_events().contains(&(0, "end"))
            && client_log.conn_events().contains(&(0, "end"))
    })
    .await;
}

/// Item 6, the client side: a TLS channel made with the client layer's
/// connector (tonic runs TLS over the connector's connection): connection
/// events, and every RPC linked to the connection, with the server's
/// address.
#[tokio::test]
async fn tls_client_connector_links_rpcs_to_the_tls_connection() {
    let certs = TestCerts::generate();
    let (addr, incoming) = support::bind().await;
    let echo = RecordingEcho::default();
    spawn_tls(Identity::new(), echo.clone(), certs.server_mtls(), incoming);
    let log = Arc::new(EventLog::default());
    let layer = CombinedLayer::client().with(Arc::clone(&log));
    let channel = tls_endpoint(addr, certs.client_mtls())
        .connect_with_connector(layer.connector())
        .await
        .unwrap();
    let mut grpc = client(channel, layer);
    for message in ["a", "b"] {
        grpc.unary_echo(request(message)).await.unwrap();
    }
    assert_eq!(echo.last().conn.peer_certs, Some(1), "mTLS went through");
    log.wait_for_ends(2).await;
    for tagged in log.tagged() {
        assert_eq!((tagged.conn, tagged.peer_addr), (Some(0), Some(addr)));
    }
    assert_eq!(log.conn_events(), [(0, "tagged"), (0, "begin")]);
}
