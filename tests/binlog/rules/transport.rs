//! Peers (IPv6, a Unix socket), compressed calls, and plain HTTP served
//! beside gRPC by the same layered server.

use std::sync::Arc;

use axum::routing::get;
use bytes::Bytes;
use http::StatusCode;
use tonic::codec::CompressionEncoding;
use tonic::service::Routes;
use tonic::transport::server::TcpIncoming;
use tower::ServiceBuilder;

use super::{Rig, RulesEcho, UNARY, echo, memory_log, message, spawn_server};
use crate::script::Ends;
use support::EchoClient;
use support::stacks::compress::{compressing_client, compressing_echo};
use support::stacks::{plain_http, uds};
use tonic_hotpath::stats::CombinedLayer;

/// A unary call's lines on each side, as the rig's peers give them.
fn unary_lines(rig: &Rig, text: &str) -> (Vec<String>, Vec<String>) {
    let header = format!("CLIENT_HEADER {UNARY} @{} []", rig.addr);
    let (server_peer, client_peer) = (rig.server_peer(), rig.client_peer());
    let client = vec![
        header.clone(),
        message("CLIENT_MESSAGE", text),
        format!("SERVER_HEADER [date=*] {server_peer}"),
        message("SERVER_MESSAGE", text),
        format!("SERVER_TRAILER 0 \"\" [] {server_peer}"),
    ];
    let server = vec![
        format!("{header} {client_peer}"),
        message("CLIENT_MESSAGE", text),
        "SERVER_HEADER []".to_owned(),
        message("SERVER_MESSAGE", text),
        "SERVER_TRAILER 0 \"\" []".to_owned(),
    ];
    (client, server)
}

// ---------------------------------------------------------------------
// 2. Peers.

/// Over `[::1]`: both sides log `TYPE_IPV6`, `::1` and the other's port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipv6_peers_are_logged_as_ipv6() {
    let incoming = match TcpIncoming::bind("[::1]:0".parse().unwrap()) {
        Ok(incoming) => incoming.with_nodelay(Some(true)),
        Err(error) => {
            eprintln!("skipped: this host has no IPv6 loopback ({error})");
            return;
        }
    };
    let addr = incoming.local_addr().unwrap();
    let (log, sink) = memory_log("*");
    let rig = Rig::on_tcp(&log, addr, incoming, None).await;
    rig.client().unary_echo(echo("v6")).await.unwrap();
    rig.ended(1).await;
    let remote = rig.echo.remote();
    assert!(remote.is_ipv6() && remote.ip().is_loopback(), "{remote}");
    let (client, server) = unary_lines(&rig, "v6");
    // Spelled out once, not only through the rig's formatting.
    assert!(client[2].ends_with(&format!("peer=IPV6 [::1]:{}", addr.port())));
    assert!(server[0].ends_with(&format!("peer=IPV6 [::1]:{}", remote.port())));
    rig.finish().await;
    assert_eq!(sink.take().sides(), (vec![client], vec![server]));
}

/// Over a Unix socket: the server logs its client as `TYPE_UNIX` (an
/// unnamed socket: no path); the client, which knows no IP address of
/// its server, logs no peer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unix_socket_client_is_a_unix_peer() {
    let (log, sink) = memory_log("*");
    let (path, incoming) = uds::bind();
    let server_ends = Arc::new(Ends::default());
    let routes = Routes::new(compressing_echo(RulesEcho::default()));
    let (stop, server) = spawn_server(&log, &server_ends, routes, incoming);
    let client_ends = Arc::new(Ends::default());
    let layer = CombinedLayer::client()
        .with(log.clone())
        .with(Arc::clone(&client_ends));
    let channel = uds::channel_with(layer.connector_with(uds::connector(path.path()))).await;
    let mut client = EchoClient::new(ServiceBuilder::new().layer(layer).service(channel));
    client.unary_echo(echo("unix")).await.unwrap();
    support::wait_until("the call's end on both sides", || {
        client_ends.count() == 1 && server_ends.count() == 1
    })
    .await;
    drop(client);
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
    log.shutdown().unwrap();

    let header = format!("CLIENT_HEADER {UNARY} @uds.invalid []");
    let (client, server) = sink.take().sides();
    assert_eq!(
        client,
        [[
            header.clone(),
            message("CLIENT_MESSAGE", "unix"),
            "SERVER_HEADER [date=*]".to_owned(),
            message("SERVER_MESSAGE", "unix"),
            "SERVER_TRAILER 0 \"\" []".to_owned(),
        ]]
    );
    assert_eq!(
        server,
        [[
            format!("{header} peer=UNIX \"\" 0"),
            message("CLIENT_MESSAGE", "unix"),
            "SERVER_HEADER []".to_owned(),
            message("SERVER_MESSAGE", "unix"),
            "SERVER_TRAILER 0 \"\" []".to_owned(),
        ]]
    );
}

// ---------------------------------------------------------------------
// 9. Compression.

/// zstd and deflate both ways: each side logs the messages uncompressed,
/// with their uncompressed length.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compressed_messages_are_logged_uncompressed() {
    let text = "compressed".repeat(50);
    for (encoding, name) in [
        (CompressionEncoding::Zstd, "zstd"),
        (CompressionEncoding::Deflate, "deflate"),
    ] {
        let (log, sink) = memory_log("*");
        let rig = Rig::start(&log).await;
        let reply = compressing_client(rig.layered.clone(), encoding)
            .unary_echo(echo(&text))
            .await
            .unwrap();
        assert_eq!(
            reply.metadata().get("grpc-encoding").unwrap(),
            name,
            "the response came compressed"
        );
        assert_eq!(reply.into_inner().message, text);
        rig.ended(1).await;
        let (client, server) = unary_lines(&rig, &text);
        rig.finish().await;
        // The encoded request: tag, 2-byte length, 500 bytes.
        assert!(
            client[1].starts_with("CLIENT_MESSAGE 503 "),
            "{}",
            client[1]
        );
        assert_eq!(sink.take().sides(), (vec![client], vec![server]), "{name}");
    }
}

// ---------------------------------------------------------------------
// 10. Plain HTTP beside gRPC.

/// axum routes served by the same layered server: their requests (HTTP/1.1
/// and HTTP/2) log nothing, even on a path shaped as a method's
/// (`/web/status`, which `*` would select); the gRPC call beside them is
/// logged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_beside_grpc_logs_nothing() {
    let (log, sink) = memory_log("*");
    let (addr, incoming) = support::bind().await;
    let routes = plain_http::axum_routes().route("/web/status", get(|| async { "up" }));
    let rig = Rig::on_tcp(&log, addr, incoming, Some(routes)).await;
    for (path, text) in [("/healthz", "ok"), ("/web/status", "up")] {
        let get = || plain_http::request("GET", path, None, Bytes::new());
        for reply in [
            plain_http::http1(addr, get()).await,
            plain_http::http2(addr, get()).await,
        ] {
            assert_eq!((reply.status, reply.text()), (StatusCode::OK, text));
        }
    }
    let json = Bytes::from_static(b"{\"a\":1}");
    let post = plain_http::request("POST", "/json", Some("application/json"), json.clone());
    let reply = plain_http::http1(addr, post).await;
    assert_eq!((reply.status, reply.body), (StatusCode::OK, json));

    rig.client().unary_echo(echo("grpc")).await.unwrap();
    rig.ended(1).await;
    let (client, server) = unary_lines(&rig, "grpc");
    rig.finish().await;
    assert_eq!(sink.take().sides(), (vec![client], vec![server]));
    let counts = log.counts();
    assert_eq!((counts.written, counts.dropped, counts.failed), (10, 0, 0));
}
