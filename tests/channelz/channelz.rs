//! channelz over real servers and clients on 127.0.0.1: the counts a
//! channelz client reads after a mixed workload (OK, errors, a cancel, a
//! deadline, streams), on the server, the channel, its subchannel and both
//! sockets; TLS details; the admin services.

use support::stacks;

use std::time::Duration;

use support::channelz::*;
use tokio_stream::StreamExt;
use tonic::Code;
use tonic::transport::Server;
use tonic_hotpath::channelz::{ServerEntry, proto};

use support::stacks::tls::{TestCerts, tls_endpoint};

#[tokio::test]
async fn counts_are_exact_after_a_mixed_workload() {
    let server = spawn_server(Server::builder(), ServerEntry::new()).await;
    let admin = spawn_admin().await;
    let (mut echo, channel_id, subchannel_id) =
        channel_client(support::endpoint(server.addr)).await;

    // 5 OK and 3 failed unary calls.
    for _ in 0..5 {
        echo.unary_echo(request("hello")).await.expect("OK call");
    }
    for _ in 0..3 {
        let status = echo.unary_echo(request("fail")).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument);
    }
    // 2 server-streaming calls of 3 messages each.
    for _ in 0..2 {
        let mut stream = echo
            .server_streaming_echo(request("a b c"))
            .await
            .expect("stream")
            .into_inner();
        let mut received = 0;
        while let Some(message) = stream.next().await {
            message.expect("message");
            received += 1;
        }
        assert_eq!(received, 3);
    }
    // 1 client-streaming call of 4 messages.
    let words = tokio_stream::iter(["a", "b", "c", "d"].map(request));
    echo.client_streaming_echo(words)
        .await
        .expect("client stream");
    // 1 call cancelled by the client (its future dropped).
    let cancelled =
        tokio::time::timeout(Duration::from_millis(200), echo.unary_echo(request("slow"))).await;
    assert!(cancelled.is_err(), "the slow call was cut short");
    // 1 call past its deadline (grpc-timeout).
    let mut late = tonic::Request::new(request("slow"));
    late.set_timeout(Duration::from_millis(100));
    let status = echo.unary_echo(late).await.unwrap_err();
    assert_eq!(
        status.code(),
        Code::Cancelled,
        "tonic's client-side timeout"
    );

    let mut channelz = channelz_client(admin).await;
    // 13 calls: 8 OK (5 unary, 2 server streams, 1 client stream), 5
    // failed (3 INVALID_ARGUMENT, the cancel, the deadline).
    let want = (13, 8, 5);
    let got = eventually(&want, || {
        let mut channelz = channelz.clone();
        async move { server_calls(&fetch_server(&mut channelz, server.id).await) }
    })
    .await;
    assert_eq!(got, want, "server calls (started, succeeded, failed)");

    let channel = channelz
        .get_channel(proto::GetChannelRequest { channel_id })
        .await
        .expect("GetChannel")
        .into_inner()
        .channel
        .expect("channel");
    let data = channel.data.as_ref().expect("channel data");
    assert_eq!(channel_calls(data), want, "channel calls");
    assert_eq!(data.target, format!("http://{}/", server.addr));
    assert!(after_start(&data.last_call_started_timestamp));
    assert_eq!(data.state, None, "tonic does not expose connectivity");
    // The creation events grpc-go logs.
    let trace = data.trace.as_ref().expect("channel trace");
    let events: Vec<&str> = trace
        .events
        .iter()
        .map(|e| e.description.as_str())
        .collect();
    let target = format!("http://{}/", server.addr);
    assert_eq!(
        events,
        [
            format!("Channel created for target {target:?}").as_str(),
            format!("Subchannel(id:{subchannel_id}) created").as_str()
        ]
    );
    assert_eq!(trace.num_events_logged, 2);
    assert_eq!(
        trace.events[1].child_ref,
        Some(proto::channel_trace_event::ChildRef::SubchannelRef(
            proto::SubchannelRef {
                subchannel_id,
                name: String::new()
            }
        ))
    );
    let subchannel_ref = &channel.subchannel_ref;
    assert_eq!(subchannel_ref.len(), 1);
    assert_eq!(subchannel_ref[0].subchannel_id, subchannel_id);

    let subchannel = channelz
        .get_subchannel(proto::GetSubchannelRequest { subchannel_id })
        .await
        .expect("GetSubchannel")
        .into_inner()
        .subchannel
        .expect("subchannel");
    assert_eq!(
        channel_calls(subchannel.data.as_ref().expect("subchannel data")),
        want,
        "subchannel calls: every call had the connection"
    );
    assert_eq!(subchannel.socket_ref.len(), 1, "one connection");
    let client_socket = socket(&mut channelz, subchannel.socket_ref[0].socket_id).await;

    let server_sockets = server_sockets(&mut channelz, server.id, 1).await;
    assert_eq!(server_sockets.len(), 1, "one connection");
    let server_socket = &server_sockets[0];

    // Streams: 13 started; succeeded = the status crossed the wire (the 11
    // that were not cut short); failed = the cancel and the deadline, which
    // reset the stream. Messages: 5 + 3 + 2 + 4 + 2 requests, 5 + 6 + 1
    // responses.
    assert_eq!(
        socket_counts(&client_socket),
        [13, 11, 2, 16, 12],
        "client socket"
    );
    let want_server = [13, 11, 2, 12, 16];
    let got = eventually(&want_server, || {
        let mut channelz = channelz.clone();
        let id = server_socket.r#ref.as_ref().unwrap().socket_id;
        async move { socket_counts(&socket(&mut channelz, id).await) }
    })
    .await;
    assert_eq!(got, want_server, "server socket");

    // Addresses: each side's local is the other's remote.
    let client_local = tcp_addr(client_socket.local.as_ref()).expect("client local address");
    assert_eq!(tcp_addr(client_socket.remote.as_ref()), Some(server.addr));
    assert_eq!(tcp_addr(server_socket.local.as_ref()), Some(server.addr));
    assert_eq!(tcp_addr(server_socket.remote.as_ref()), Some(client_local));
    assert_eq!(client_socket.security, None, "plain TCP");

    // Timestamps: set when the event happened, the Unix epoch when it
    // never did (grpc-go's convention: the fields are always present).
    let client_data = client_socket.data.as_ref().unwrap();
    assert!(after_start(
        &client_data.last_local_stream_created_timestamp
    ));
    assert!(is_epoch(&client_data.last_remote_stream_created_timestamp));
    assert!(after_start(&client_data.last_message_sent_timestamp));
    assert!(after_start(&client_data.last_message_received_timestamp));
    let server_data = server_socket.data.as_ref().unwrap();
    assert!(after_start(
        &server_data.last_remote_stream_created_timestamp
    ));
    assert!(is_epoch(&server_data.last_local_stream_created_timestamp));
    assert!(after_start(&server_data.last_message_received_timestamp));
}

/// Whether a timestamp is set and within the last hour.
fn after_start(stamp: &Option<prost_types::Timestamp>) -> bool {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    stamp.is_some_and(|stamp| (now - 3600..=now + 1).contains(&stamp.seconds))
}

/// Whether a timestamp is set to the Unix epoch ("never").
fn is_epoch(stamp: &Option<prost_types::Timestamp>) -> bool {
    stamp.is_some_and(|stamp| stamp.seconds == 0 && stamp.nanos == 0)
}

#[tokio::test]
async fn unknown_ids_are_not_found_with_grpc_go_messages() {
    let admin = spawn_admin().await;
    let mut channelz = channelz_client(admin).await;
    let id = i64::MAX - 7;
    let status = channelz
        .get_server(proto::GetServerRequest { server_id: id })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    assert_eq!(status.message(), format!("requested server {id} not found"));
    let status = channelz
        .get_channel(proto::GetChannelRequest { channel_id: id })
        .await
        .unwrap_err();
    assert_eq!(
        (status.code(), status.message()),
        (
            Code::NotFound,
            format!("requested channel {id} not found").as_str()
        )
    );
    let status = channelz
        .get_subchannel(proto::GetSubchannelRequest { subchannel_id: id })
        .await
        .unwrap_err();
    assert_eq!(
        (status.code(), status.message()),
        (
            Code::NotFound,
            format!("requested sub channel {id} not found").as_str()
        )
    );
    let status = channelz
        .get_socket(proto::GetSocketRequest {
            socket_id: id,
            summary: false,
        })
        .await
        .unwrap_err();
    assert_eq!(
        (status.code(), status.message()),
        (
            Code::NotFound,
            format!("requested socket {id} not found").as_str()
        )
    );
    // grpc-go answers an unknown server's sockets with an empty last page.
    let reply = channelz
        .get_server_sockets(proto::GetServerSocketsRequest {
            server_id: id,
            start_socket_id: 0,
            max_results: 0,
        })
        .await
        .expect("GetServerSockets")
        .into_inner();
    assert!(reply.socket_ref.is_empty() && reply.end);
}

#[tokio::test]
async fn mtls_sockets_carry_the_client_certificate_and_the_given_server_certificate() {
    let certs = TestCerts::generate();
    let server_der = der_of(&certs.server.cert);
    let handler = ServerEntry::named("mtls").local_certificate(server_der.clone());
    let tls_server = spawn_server(
        Server::builder().tls_config(certs.server_mtls()).unwrap(),
        handler,
    )
    .await;
    let admin = spawn_admin().await;
    let endpoint = tls_endpoint(tls_server.addr, certs.client_mtls());
    let (mut echo, _, _) = channel_client(endpoint).await;
    echo.unary_echo(request("over TLS"))
        .await
        .expect("TLS call");

    let mut channelz = channelz_client(admin).await;
    let described = fetch_server(&mut channelz, tls_server.id).await;
    assert_eq!(described.r#ref.as_ref().unwrap().name, "mtls");
    let sockets = server_sockets(&mut channelz, tls_server.id, 0).await;
    assert_eq!(sockets.len(), 1);
    let Some(proto::security::Model::Tls(tls)) =
        sockets[0].security.as_ref().and_then(|s| s.model.clone())
    else {
        panic!(
            "a TLS socket reports its TLS security: {:?}",
            sockets[0].security
        );
    };
    assert_eq!(tls.remote_certificate, der_of(&certs.client.cert));
    assert_eq!(tls.local_certificate, server_der);
    assert_eq!(tls.cipher_suite, None, "tonic does not expose it");
}

/// The DER bytes of a PEM certificate.
fn der_of(pem: &str) -> Vec<u8> {
    use base64::Engine;
    let body: String = pem
        .lines()
        .filter(|line| !line.starts_with("-----"))
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .expect("PEM base64")
}

#[tokio::test]
async fn a_closed_connection_leaves_and_a_dropped_server_follows() {
    let server = spawn_server(Server::builder(), ServerEntry::new()).await;
    let admin = spawn_admin().await;
    let mut channelz = channelz_client(admin).await;
    let socket_id = {
        let (mut echo, channel_id, _) = channel_client(support::endpoint(server.addr)).await;
        echo.unary_echo(request("once")).await.expect("call");
        let sockets = server_sockets(&mut channelz, server.id, 0).await;
        assert_eq!(sockets.len(), 1);
        let _ = channel_id;
        sockets[0].r#ref.as_ref().unwrap().socket_id
    };
    // The client (and its channel handler) dropped: its connection closes.
    let gone = eventually(&true, || {
        let mut channelz = channelz.clone();
        async move {
            channelz
                .get_socket(proto::GetSocketRequest {
                    socket_id,
                    summary: false,
                })
                .await
                .is_err_and(|status| status.code() == Code::NotFound)
        }
    })
    .await;
    assert!(gone, "the closed connection's socket left channelz");
    assert!(server_sockets(&mut channelz, server.id, 0).await.is_empty());
    // The server still counts what it served.
    assert_eq!(
        server_calls(&fetch_server(&mut channelz, server.id).await),
        (1, 1, 0)
    );

    // Stopping the server drops its layer and handler: it leaves.
    server.task.abort();
    let gone = eventually(&true, || {
        let mut channelz = channelz.clone();
        async move {
            channelz
                .get_server(proto::GetServerRequest {
                    server_id: server.id,
                })
                .await
                .is_err_and(|status| status.code() == Code::NotFound)
        }
    })
    .await;
    assert!(gone, "a stopped server left channelz");
}

#[tokio::test]
async fn unix_socket_connections_are_counted_without_addresses() {
    use tonic_hotpath::channelz::ChannelEntry;
    use tonic_hotpath::stats::CombinedLayer;

    let handler = ServerEntry::new();
    let server_id = handler.id();
    let layer = CombinedLayer::server().with(handler);
    let (path, incoming) = stacks::uds::bind();
    stacks::spawn_echo(layer.clone(), ScriptedEcho, layer.incoming(incoming));
    let channel_handler = ChannelEntry::new("unix:///uds.invalid");
    let subchannel_id = channel_handler.subchannel_id();
    let client_layer = CombinedLayer::client().with(channel_handler);
    let channel =
        stacks::uds::channel_with(client_layer.connector_with(stacks::uds::connector(path.path())))
            .await;
    let mut echo = stacks::client(channel, client_layer);
    echo.unary_echo(request("over a Unix socket"))
        .await
        .unwrap();
    echo.unary_echo(request("fail")).await.unwrap_err();

    let admin = spawn_admin().await;
    let mut channelz = channelz_client(admin).await;
    let want = (2, 1, 1);
    let got = eventually(&want, || {
        let mut channelz = channelz.clone();
        async move { server_calls(&fetch_server(&mut channelz, server_id).await) }
    })
    .await;
    assert_eq!(got, want);
    let sockets = server_sockets(&mut channelz, server_id, 0).await;
    assert_eq!(sockets.len(), 1);
    assert_eq!(socket_counts(&sockets[0]), [2, 2, 0, 1, 2]);
    assert_eq!(
        (sockets[0].local.clone(), sockets[0].remote.clone()),
        (None, None)
    );
    let subchannel = channelz
        .get_subchannel(proto::GetSubchannelRequest { subchannel_id })
        .await
        .unwrap()
        .into_inner()
        .subchannel
        .unwrap();
    let client_socket = socket(&mut channelz, subchannel.socket_ref[0].socket_id).await;
    assert_eq!(socket_counts(&client_socket), [2, 2, 0, 2, 1]);
}

/// On a multi-threaded runtime idle per-RPC records on the worker threads
/// keep the layer's handler alive after the server stops: the handlers
/// close their entities when the layered service is dropped instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_server_and_a_dropped_channel_leave_on_a_multi_threaded_runtime() {
    let server = spawn_server(Server::builder(), ServerEntry::new()).await;
    let admin = spawn_admin().await;
    let channelz = channelz_client(admin).await;
    let (echo, channel_id, _) = channel_client(support::endpoint(server.addr)).await;
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..20 {
        let mut echo = echo.clone();
        calls.spawn(async move { echo.unary_echo(request("many threads")).await.unwrap() });
    }
    calls.join_all().await;
    drop(echo);
    server.task.abort();
    let server_id = server.id;
    let gone = eventually(&(true, true), || {
        let mut channelz = channelz.clone();
        async move {
            let server = channelz
                .get_server(proto::GetServerRequest { server_id })
                .await
                .is_err_and(|status| status.code() == Code::NotFound);
            let channel = channelz
                .get_channel(proto::GetChannelRequest { channel_id })
                .await
                .is_err_and(|status| status.code() == Code::NotFound);
            (server, channel)
        }
    })
    .await;
    assert_eq!(gone, (true, true), "(server gone, channel gone)");
}
