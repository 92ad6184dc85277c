//! Smoke tests for `support::stacks`: each real stack works, without the
//! crate's layers (a pass-through `Identity` or a [`ProbeLayer`] where a
//! layer goes), so regression tests can put the crate's layers in the
//! same places and compare.

use support::stacks;

use std::net::SocketAddr;

use bytes::Bytes;
use http::{StatusCode, Version};
use hyper_util::client::legacy::connect::HttpConnector;
use stacks::compress::{ENCODINGS, compressing_client, compressing_routes, echo_sized};
use stacks::junk::{grpc_request, h2_send, http1_raw};
use stacks::plain_http::{get_request, http1, http2, post_json, request, spawn_grpc_and_axum};
use stacks::record::{ConnSeen, ProbeLayer, RecordingEcho};
use stacks::tls::{TestCerts, spawn_tls, tls_endpoint};
use stacks::web::{WebFormat, spawn_web_layer_inside, spawn_web_layer_outside, web_unary};
use stacks::{UNARY_PATH, client, echo_frame, frame, spawn_echo, uds};
use support::{EchoRequest, EchoService};
use tonic::Code;
use tonic::transport::{Channel, Server};
use tower::ServiceBuilder;
use tower::layer::util::Identity;

async fn echo(channel: Channel, message: &str) -> Result<String, tonic::Status> {
    let mut client = client(channel, Identity::new());
    let request = EchoRequest {
        message: message.to_owned(),
    };
    Ok(client.unary_echo(request).await?.into_inner().message)
}

fn loopback(addr: SocketAddr) -> bool {
    addr.ip().is_loopback()
}

#[tokio::test]
async fn axum_and_grpc_share_one_server_over_http1_and_http2() {
    let (addr, incoming) = support::bind().await;
    let probe = ProbeLayer::new();
    spawn_grpc_and_axum(probe.clone(), EchoService, incoming);

    for (version, reply) in [
        (Version::HTTP_11, http1(addr, get_request("/healthz")).await),
        (Version::HTTP_2, http2(addr, get_request("/healthz")).await),
    ] {
        assert_eq!((reply.version, reply.status), (version, StatusCode::OK));
        assert_eq!(reply.text(), "ok");
    }
    let json = r#"{"a":[1,2,3]}"#;
    for reply in [
        http1(addr, post_json("/json", json)).await,
        http2(addr, post_json("/json", json)).await,
    ] {
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.header("content-type"), Some("application/json"));
        assert_eq!(reply.text(), json);
    }
    let not_json = request(
        "POST",
        "/json",
        Some("text/plain"),
        Bytes::from_static(b"x"),
    );
    assert_eq!(
        http1(addr, not_json).await.status,
        StatusCode::UNSUPPORTED_MEDIA_TYPE
    );

    // gRPC on the same server: tonic's client, and a plain HTTP/2 request.
    assert_eq!(
        echo(support::connect(addr).await, "hi").await.unwrap(),
        "hi"
    );
    let grpc = request(
        "POST",
        UNARY_PATH,
        Some("application/grpc"),
        echo_frame("raw"),
    );
    let reply = http2(addr, grpc).await;
    let trailers = reply.trailers.expect("gRPC trailers");
    assert_eq!(trailers.get("grpc-status").unwrap(), "0");
    assert_eq!(&reply.body[..], &echo_frame("raw")[..]);

    // The layer saw every request, HTTP/1.1 and HTTP/2, with TCP info.
    let seen = probe.seen();
    assert_eq!(seen.len(), 7);
    assert_eq!(probe.seen_at("/healthz")[0].version, Version::HTTP_11);
    assert!(
        seen.iter()
            .all(|p| p.conn.tcp && loopback(p.conn.remote_addr.unwrap()))
    );
}

#[tokio::test]
async fn grpc_web_unary_in_both_content_types_with_the_layer_outside() {
    let (addr, incoming) = support::bind().await;
    let probe = ProbeLayer::new();
    spawn_web_layer_outside(probe.clone(), EchoService, incoming);
    for format in [WebFormat::Proto, WebFormat::Text] {
        let reply = web_unary(addr, format, "hello web").await;
        assert_eq!(reply.http.status, StatusCode::OK);
        let content_type = reply.http.header("content-type").unwrap();
        assert!(
            content_type.starts_with(format.content_type()),
            "{content_type}"
        );
        assert_eq!(reply.echo().message, "hello web");
        assert_eq!(reply.grpc_status(), Some(0));
        assert_eq!(reply.messages.len(), 1);
    }
    // Outside tonic-web, the layer sees grpc-web as sent, over HTTP/1.1.
    let types: Vec<_> = probe.seen().into_iter().map(|p| p.content_type).collect();
    assert_eq!(
        types,
        [
            Some("application/grpc-web+proto"),
            Some("application/grpc-web-text")
        ]
        .map(|t| t.map(str::to_owned))
    );
    assert!(probe.seen().iter().all(|p| p.version == Version::HTTP_11));
}

#[tokio::test]
async fn grpc_web_unary_in_both_content_types_with_the_layer_inside() {
    let (addr, incoming) = support::bind().await;
    let probe = ProbeLayer::new();
    spawn_web_layer_inside(probe.clone(), EchoService, incoming);
    for format in [WebFormat::Proto, WebFormat::Text] {
        let reply = web_unary(addr, format, "inside").await;
        assert_eq!(reply.echo().message, "inside");
        assert_eq!(reply.grpc_status(), Some(0));
    }
    // Inside tonic-web, the layer sees the translated gRPC request.
    let seen = probe.seen();
    assert_eq!(seen.len(), 2);
    assert!(
        seen.iter()
            .all(|p| p.content_type.as_deref() == Some("application/grpc"))
    );
    // Plain gRPC over HTTP/2 passes through tonic-web too.
    assert_eq!(
        echo(support::connect(addr).await, "h2").await.unwrap(),
        "h2"
    );
}

#[tokio::test]
async fn mtls_handler_sees_peer_certs_and_the_remote_address() {
    let certs = TestCerts::generate();
    let (addr, incoming) = support::bind().await;
    let (recorder, probe) = (RecordingEcho::default(), ProbeLayer::new());
    spawn_tls(
        probe.clone(),
        recorder.clone(),
        certs.server_mtls(),
        incoming,
    );

    let endpoint = tls_endpoint(addr, certs.client_mtls());
    let channel = endpoint.connect().await.expect("mTLS connect");
    assert_eq!(echo(channel, "tls").await.unwrap(), "tls");
    // The same over a caller's connector (tonic runs TLS over its IO).
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    let channel = endpoint
        .connect_with_connector(http)
        .await
        .expect("connect");
    assert_eq!(echo(channel, "tls2").await.unwrap(), "tls2");

    for seen in recorder.seen() {
        let conn = seen.conn;
        // tonic inserts the inner IO's info beside the TLS info.
        assert!(conn.tls_tcp && conn.tcp && !conn.uds, "{conn:?}");
        assert_eq!(conn.peer_certs, Some(1));
        assert!(loopback(conn.remote_addr.expect("remote address")));
        assert_eq!(conn.local_addr, Some(addr));
    }
    assert_eq!(recorder.seen().len(), 2);
    let probed: Vec<ConnSeen> = probe.seen().into_iter().map(|p| p.conn).collect();
    let handled: Vec<ConnSeen> = recorder.seen().into_iter().map(|s| s.conn).collect();
    assert_eq!(probed, handled);
}

#[tokio::test]
async fn mtls_refuses_a_client_without_a_trusted_certificate() {
    let certs = TestCerts::generate();
    let (addr, incoming) = support::bind().await;
    let recorder = RecordingEcho::default();
    spawn_tls(
        Identity::new(),
        recorder.clone(),
        certs.server_mtls(),
        incoming,
    );

    let untrusted = TestCerts::untrusted_client().identity();
    for tls in [certs.client_tls(), certs.client_tls().identity(untrusted)] {
        // TLS 1.3: the client may finish its handshake before the server
        // rejects it, so the refusal shows at connect or at the first RPC.
        let refused = match tls_endpoint(addr, tls).connect().await {
            Err(_) => true,
            Ok(channel) => echo(channel, "no").await.is_err(),
        };
        assert!(
            refused,
            "a client without a trusted certificate got through"
        );
    }
    assert!(recorder.seen().is_empty());
    // A TLS client with the certificate still gets through.
    let channel = tls_endpoint(addr, certs.client_mtls()).connect().await;
    assert_eq!(echo(channel.unwrap(), "yes").await.unwrap(), "yes");
}

#[tokio::test]
async fn uds_handler_sees_uds_connect_info() {
    let (path, incoming) = uds::bind();
    let (recorder, probe) = (RecordingEcho::default(), ProbeLayer::new());
    spawn_echo(probe.clone(), recorder.clone(), incoming);

    let channel = uds::channel(path.path()).await;
    assert_eq!(echo(channel, "unix").await.unwrap(), "unix");
    let channel = uds::channel_with(uds::connector(path.path())).await;
    assert_eq!(echo(channel, "unix2").await.unwrap(), "unix2");

    let seen = recorder.seen();
    assert_eq!(seen.len(), 2);
    for conn in seen.iter().map(|s| &s.conn) {
        assert!(conn.uds && !conn.tcp && !conn.tls_tcp, "{conn:?}");
        assert_eq!((conn.remote_addr, conn.peer_certs), (None, None));
    }
    assert!(probe.seen().iter().all(|p| p.conn.uds));
}

#[tokio::test]
async fn each_encoding_round_trips_a_64_kib_message() {
    let (addr, incoming) = support::bind().await;
    let recorder = RecordingEcho::default();
    let routes = compressing_routes(recorder.clone());
    stacks::serve(Server::builder(), Identity::new(), routes, incoming);
    let channel = support::connect(addr).await;

    for encoding in ENCODINGS {
        let mut client = compressing_client(channel.clone(), encoding);
        let response = echo_sized(&mut client, 64 * 1024).await.expect("echo");
        let name = encoding.to_string();
        let sent = response
            .metadata()
            .get("grpc-encoding")
            .map(|v| v.to_str().unwrap());
        assert_eq!(sent, Some(name.as_str()), "the response's encoding");
        assert_eq!(
            response.into_inner().message,
            stacks::compress::message_of_size(65536)
        );
        assert_eq!(recorder.last().encoding.as_deref(), Some(name.as_str()));
    }
}

#[tokio::test]
async fn the_probe_sees_tcp_tls_and_uds_connect_info_at_each_position() {
    // Two probes stacked around a pass-through layer see what the handler sees.
    async fn check(kind: fn(&ConnSeen) -> bool, probes: [ProbeLayer; 2], recorder: RecordingEcho) {
        let handled = recorder.last().conn;
        assert!(kind(&handled), "{handled:?}");
        for probe in probes {
            assert_eq!(probe.seen().pop().unwrap().conn, handled);
        }
    }
    let stack = |p: &[ProbeLayer; 2]| {
        ServiceBuilder::new()
            .layer(p[0].clone())
            .layer(Identity::new())
            .layer(p[1].clone())
            .into_inner()
    };

    let (probes, recorder) = (
        [ProbeLayer::new(), ProbeLayer::new()],
        RecordingEcho::default(),
    );
    let (addr, incoming) = support::bind().await;
    spawn_echo(stack(&probes), recorder.clone(), incoming);
    echo(support::connect(addr).await, "tcp").await.unwrap();
    check(|c| c.tcp && !c.tls_tcp, probes, recorder).await;

    let certs = TestCerts::generate();
    let (probes, recorder) = (
        [ProbeLayer::new(), ProbeLayer::new()],
        RecordingEcho::default(),
    );
    let (addr, incoming) = support::bind().await;
    spawn_tls(
        stack(&probes),
        recorder.clone(),
        certs.server_mtls(),
        incoming,
    );
    let channel = tls_endpoint(addr, certs.client_mtls())
        .connect()
        .await
        .unwrap();
    echo(channel, "tls").await.unwrap();
    check(|c| c.tls_tcp && c.peer_certs == Some(1), probes, recorder).await;

    let (probes, recorder) = (
        [ProbeLayer::new(), ProbeLayer::new()],
        RecordingEcho::default(),
    );
    let (path, incoming) = uds::bind();
    spawn_echo(stack(&probes), recorder.clone(), incoming);
    echo(uds::channel(path.path()).await, "uds").await.unwrap();
    check(|c| c.uds && !c.tcp, probes, recorder).await;
}

#[tokio::test]
async fn junk_requests_get_answers() {
    let (addr, incoming) = support::bind().await;
    spawn_grpc_and_axum(Identity::new(), EchoService, incoming);

    // A valid request first: the raw client itself works.
    let ok = h2_send(
        addr,
        grpc_request(UNARY_PATH, "application/grpc"),
        echo_frame("x"),
    )
    .await;
    assert_eq!(
        (ok.status, ok.grpc_status()),
        (Some(StatusCode::OK), Some(0))
    );

    // A frame with flag 2 (neither plain nor compressed): trailers-only INTERNAL.
    let bad_flag = h2_send(
        addr,
        grpc_request(UNARY_PATH, "application/grpc"),
        frame(2, b""),
    )
    .await;
    assert_eq!(bad_flag.status, Some(StatusCode::OK), "{bad_flag:?}");
    assert_eq!(
        bad_flag.grpc_status(),
        Some(Code::Internal as i32),
        "{bad_flag:?}"
    );
    assert!(bad_flag.trailers.is_none() && bad_flag.body.is_empty());

    // A frame whose header promises more bytes than the stream carries.
    let mut truncated = echo_frame("truncated").to_vec();
    truncated.truncate(8);
    let short = h2_send(
        addr,
        grpc_request(UNARY_PATH, "application/grpc"),
        truncated.into(),
    )
    .await;
    assert_eq!(
        short.grpc_status(),
        Some(Code::Internal as i32),
        "{short:?}"
    );

    // A non-gRPC content type on the gRPC path: tonic does not check it and
    // answers as usual.
    let text = h2_send(
        addr,
        grpc_request(UNARY_PATH, "text/plain"),
        echo_frame("x"),
    )
    .await;
    assert_eq!(text.grpc_status(), Some(0), "{text:?}");
    assert_eq!(text.body, echo_frame("x"));

    // Raw HTTP/1.1: a valid request, then junk.
    let health = http1_raw(
        addr,
        b"GET /healthz HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n",
    );
    let health = health.await;
    assert_eq!(health.status(), Some(200), "{}", health.text());
    assert!(health.text().ends_with("ok"));
    let junk = http1_raw(addr, b"NOT HTTP AT ALL\r\n\r\n").await;
    assert!(junk.closed);
    assert_eq!(junk.status(), Some(400), "{}", junk.text());
}
