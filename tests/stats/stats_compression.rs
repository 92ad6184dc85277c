//! Compressed messages through `CombinedLayer` (issue #18 items 3 and 5),
//! over a real tonic server and client on 127.0.0.1 with gzip, deflate
//! and zstd on both sides: every payload event carries the uncompressed
//! length and the length on the wire, as grpc-go's `InPayload` /
//! `OutPayload` do; a message that cannot be decompressed is an error on
//! `End` with the code its receiver gave, not a size.

use support::h2_reply;
use support::stacks;
use support::stats_events;

use std::sync::Arc;

use bytes::Bytes;
use h2_reply::Reply;
use prost::Message;
use stacks::compress::{
    ENCODINGS, compressing_client, compressing_routes, layered_pair, message_of_size,
};
use stats_events::{EventLog, LoggedClient, logged_client};
use support::{EchoRequest, EchoService};
use tonic::Code;
use tonic::codec::CompressionEncoding;
use tonic::transport::Server;
use tonic_hotpath::stats::compression::Encoding;
use tonic_hotpath::stats::{
    CombinedLayer, CompressionError, Direction, Payload, RpcError, StatsHandler,
};
use tower::ServiceBuilder;

/// The crate's name for tonic's encoding.
fn ours(encoding: CompressionEncoding) -> Encoding {
    match encoding {
        CompressionEncoding::Gzip => Encoding::Gzip,
        CompressionEncoding::Deflate => Encoding::Deflate,
        CompressionEncoding::Zstd => Encoding::Zstd,
        other => panic!("an encoding this test does not know: {other:?}"),
    }
}

/// The payload of an echo message of `message` sent compressed with
/// `encoding`, as tonic compresses it.
fn compressed_payload(encoding: CompressionEncoding, message: &str) -> Payload<'static> {
    let encoded = EchoRequest {
        message: message.to_owned(),
    }
    .encode_to_vec();
    let compressed = support::compression::compress(ours(encoding), &encoded);
    Payload::compressed(encoded.len() as u32, compressed.len() as u32)
}

/// An echo server that accepts and sends every encoding, and a client that
/// compresses with `encoding`, each behind a stats layer that logs.
async fn compressing_pair(
    encoding: CompressionEncoding,
) -> (
    Arc<EventLog>,
    Arc<EventLog>,
    support::EchoClient<
        tonic_hotpath::stats::CombinedService<
            tonic::transport::Channel,
            Arc<EventLog>,
            tonic_hotpath::stats::ClientSide,
        >,
    >,
) {
    let server_log = Arc::new(EventLog::default());
    let client_log = Arc::new(EventLog::default());
    let layered = layered_pair(Arc::clone(&server_log), Arc::clone(&client_log)).await;
    (
        server_log,
        client_log,
        compressing_client(layered, encoding),
    )
}

/// Item 3: a 64 KiB message, and a 1 MiB one (many chunks on the wire),
/// each way, in every encoding: both sides report the uncompressed length
/// and the exact compressed length.
#[tokio::test]
async fn compressed_messages_report_both_lengths_on_both_sides() {
    for encoding in ENCODINGS {
        let (server_log, client_log, mut client) = compressing_pair(encoding).await;
        for size in [64 * 1024, 1024 * 1024] {
            let reply = client
                .unary_echo(EchoRequest {
                    message: message_of_size(size),
                })
                .await
                .unwrap();
            let sent_as = reply
                .metadata()
                .get("grpc-encoding")
                .unwrap()
                .to_str()
                .unwrap();
            assert_eq!(sent_as, encoding.to_string());
        }
        server_log.wait_for_ends(2).await;
        client_log.wait_for_ends(2).await;
        let expected: Vec<Payload> = [64 * 1024, 1024 * 1024]
            .iter()
            .map(|&size| compressed_payload(encoding, &message_of_size(size)))
            .collect();
        for payload in &expected {
            assert!(
                Some(payload.compressed_length) < payload.length,
                "{payload:?}"
            );
        }
        let in_then_out = |log: &EventLog, inbound_first: bool| -> Vec<Payload> {
            let payloads = log.payloads();
            assert!(
                payloads.chunks(2).all(|pair| pair[0].0 == inbound_first),
                "{encoding:?}: {payloads:?}"
            );
            payloads.into_iter().map(|(_, payload)| payload).collect()
        };
        let each_twice: Vec<Payload> = expected.iter().flat_map(|p| [*p, *p]).collect();
        assert_eq!(
            in_then_out(&server_log, true),
            each_twice,
            "{encoding:?} server"
        );
        assert_eq!(
            in_then_out(&client_log, false),
            each_twice,
            "{encoding:?} client"
        );
        let codes: Vec<Code> = client_log.ends().into_iter().map(|end| end.0).collect();
        assert_eq!(codes, [Code::Ok, Code::Ok], "{encoding:?}");
    }
}

/// Item 3 on streams: each of the small messages of a server-streaming
/// reply is measured on its own.
#[tokio::test]
async fn each_streamed_message_is_measured() {
    use tokio_stream::StreamExt;
    let (server_log, client_log, mut client) = compressing_pair(CompressionEncoding::Gzip).await;
    let words = "alpha beta gamma";
    let request = EchoRequest {
        message: words.to_owned(),
    };
    let stream = client
        .server_streaming_echo(request)
        .await
        .unwrap()
        .into_inner();
    let replies: Vec<_> = stream.collect().await;
    assert_eq!(replies.len(), 3);
    server_log.wait_for_ends(1).await;
    client_log.wait_for_ends(1).await;
    let received: Vec<Payload> = client_log
        .payloads()
        .into_iter()
        .filter(|(inbound, _)| *inbound)
        .map(|(_, payload)| payload)
        .collect();
    let expected: Vec<Payload> = words
        .split(' ')
        .map(|word| compressed_payload(CompressionEncoding::Gzip, word))
        .collect();
    assert_eq!(received, expected);
}

/// A client of `addr` that accepts gzip responses up to `limit` bytes,
/// behind a stats layer told the same limit.
async fn gzip_client(addr: std::net::SocketAddr, limit: u32) -> (Arc<EventLog>, LoggedClient) {
    let (log, client) = logged_client(addr, limit).await;
    (log, client.accept_compressed(CompressionEncoding::Gzip))
}

/// Whether `error` says an inbound message did not decompress.
fn is_corrupt(error: &Option<RpcError>) -> bool {
    matches!(
        error,
        Some(RpcError::Compression {
            direction: Direction::Inbound,
            error: CompressionError::Corrupt { .. },
        })
    )
}

/// A gzip-compressed response frame of `data`.
fn gzip_frame(data: &[u8]) -> Bytes {
    stacks::frame(1, &support::compression::compress(Encoding::Gzip, data))
}

/// Item 5: a response message that does not decompress: tonic hands the
/// caller `Internal`, and `End` says so, with the compression error and
/// no payload event, although `grpc-status: 0` follows.
#[tokio::test]
async fn a_response_that_does_not_decompress_ends_internal() {
    let corrupt = stacks::frame(1, b"not gzip at all");
    let reply = Reply::grpc_ok(vec![corrupt]).header("grpc-encoding", "gzip");
    let addr = h2_reply::serve(reply).await;
    let (log, mut client) = gzip_client(addr, 4 << 20).await;
    let caller = client.unary_echo(EchoRequest::default()).await.unwrap_err();
    assert_eq!(caller.code(), Code::Internal, "{caller:?}");
    let (code, _, error) = log.wait_for_ends(1).await.remove(0);
    assert_eq!(code, Code::Internal);
    assert!(is_corrupt(&error), "{error:?}");
    assert!(log.payloads().iter().all(|(inbound, _)| !inbound));
}

/// Item 5: a response that is small on the wire but decompresses past the
/// client's limit: tonic hands the caller `ResourceExhausted`; so does
/// `End`.
#[tokio::test]
async fn a_response_over_the_limit_decompressed_ends_resource_exhausted() {
    let bomb = EchoRequest {
        message: "a".repeat(5 << 20),
    }
    .encode_to_vec();
    let reply = Reply::grpc_ok(vec![gzip_frame(&bomb)]).header("grpc-encoding", "gzip");
    let addr = h2_reply::serve(reply).await;
    let (log, mut client) = gzip_client(addr, 4 << 20).await;
    let caller = client.unary_echo(EchoRequest::default()).await.unwrap_err();
    assert_eq!(caller.code(), Code::ResourceExhausted, "{caller:?}");
    let (code, _, error) = log.wait_for_ends(1).await.remove(0);
    assert_eq!(code, Code::ResourceExhausted);
    let expected = RpcError::Compression {
        direction: Direction::Inbound,
        error: CompressionError::TooLarge { limit: 4 << 20 },
    };
    assert_eq!(error, Some(expected));
}

/// A request message flagged compressed whose bytes are not gzip.
const NOT_GZIP: &[u8] = b"not gzip at all";

/// Serves the echo routes (every encoding accepted) under `layer`, and
/// sends them one unary request declaring `grpc-encoding: gzip` whose
/// message is [`NOT_GZIP`].
async fn send_not_gzip<H: StatsHandler>(
    layer: CombinedLayer<H, tonic_hotpath::stats::ServerSide>,
) -> stacks::junk::H2Reply {
    let (addr, incoming) = support::bind().await;
    stacks::serve(
        Server::builder(),
        layer,
        compressing_routes(EchoService),
        incoming,
    );
    let mut request = stacks::junk::grpc_request(stacks::UNARY_PATH, "application/grpc");
    request
        .headers_mut()
        .insert("grpc-encoding", http::HeaderValue::from_static("gzip"));
    stacks::junk::h2_send(addr, request, stacks::frame(1, NOT_GZIP)).await
}

/// Item 5 on the server: a request message that does not decompress gives
/// no `InPayload`; the call ends with what the server answered (tonic's
/// decoder refuses it: `Internal`) and the compression error.
#[tokio::test]
async fn a_request_that_does_not_decompress_is_an_error_on_the_server() {
    let log = Arc::new(EventLog::default());
    let reply = send_not_gzip(CombinedLayer::server().with(Arc::clone(&log))).await;
    assert_eq!(
        reply.grpc_status(),
        Some(Code::Internal as i32),
        "{reply:?}"
    );
    let (code, _, error) = log.wait_for_ends(1).await.remove(0);
    assert_eq!(code, Code::Internal);
    assert!(is_corrupt(&error), "{error:?}");
    assert!(log.payloads().iter().all(|(inbound, _)| !inbound));
}

/// An [`EventLog`] behind a handler that does not ask for uncompressed
/// sizes (`UNCOMPRESSED_SIZES` left `false`): what a layer of A66 metrics
/// or channelz handlers does with compressed messages.
#[derive(Debug, Default, Clone)]
struct Unasked(Arc<EventLog>);

impl StatsHandler for Unasked {
    type RpcState = u64;
    type ConnState = u64;

    fn tag_rpc(&self, info: &tonic_hotpath::stats::RpcInfo<'_>, conn: Option<&u64>) -> u64 {
        self.0.tag_rpc(info, conn)
    }

    fn handle_rpc(&self, id: &mut u64, event: &tonic_hotpath::stats::RpcEvent<'_>) {
        self.0.handle_rpc(id, event);
    }
}

/// No handler asks for uncompressed sizes: the layer decompresses nothing
/// it sends, nor what the server receives. Those payloads carry the exact
/// compressed length and no uncompressed one; the client still judges the
/// responses it receives (their status is its decoder's verdict), so
/// theirs are measured.
#[tokio::test]
async fn unasked_compressed_messages_carry_exact_compressed_lengths_only() {
    for encoding in ENCODINGS {
        let server_log = Unasked::default();
        let (addr, incoming) = support::bind().await;
        let server = CombinedLayer::server().with(server_log.clone());
        stacks::serve(
            Server::builder(),
            server.clone(),
            compressing_routes(EchoService),
            server.incoming(incoming),
        );
        let client_log = Unasked::default();
        let layered = ServiceBuilder::new()
            .layer(CombinedLayer::client().with(client_log.clone()))
            .service(support::connect(addr).await);
        let mut client = compressing_client(layered, encoding);
        let message = message_of_size(64 * 1024);
        client
            .unary_echo(EchoRequest {
                message: message.clone(),
            })
            .await
            .unwrap();
        server_log.0.wait_for_ends(1).await;
        client_log.0.wait_for_ends(1).await;
        let measured = compressed_payload(encoding, &message);
        let unmeasured = Payload::compressed_unmeasured(measured.compressed_length);
        let payloads = |log: &Unasked| -> Vec<(bool, Payload<'static>)> { log.0.payloads() };
        assert_eq!(
            payloads(&server_log),
            [(true, unmeasured), (false, unmeasured)],
            "{encoding:?} server"
        );
        assert_eq!(
            payloads(&client_log),
            [(false, unmeasured), (true, measured)],
            "{encoding:?} client"
        );
    }
}

/// Unasked, the client still gives a response it cannot decompress the
/// status tonic hands the caller (`Internal`), with the error.
#[tokio::test]
async fn unasked_a_response_that_does_not_decompress_still_ends_internal() {
    let corrupt = stacks::frame(1, b"not gzip at all");
    let reply = Reply::grpc_ok(vec![corrupt]).header("grpc-encoding", "gzip");
    let addr = h2_reply::serve(reply).await;
    let log = Unasked::default();
    let layered = ServiceBuilder::new()
        .layer(CombinedLayer::client().with(log.clone()))
        .service(support::connect(addr).await);
    let mut client = support::EchoClient::new(layered).accept_compressed(CompressionEncoding::Gzip);
    let caller = client.unary_echo(EchoRequest::default()).await.unwrap_err();
    assert_eq!(caller.code(), Code::Internal, "{caller:?}");
    let (code, _, error) = log.0.wait_for_ends(1).await.remove(0);
    assert_eq!(code, Code::Internal);
    assert!(is_corrupt(&error), "{error:?}");
}

/// Unasked, a server that receives a request it cannot decompress ends
/// with what it answered (tonic's decoder refuses it: `Internal`); the
/// message, not decompressed by the layer, is reported with its
/// compressed length, and `End` carries no compression error.
#[tokio::test]
async fn unasked_a_request_that_does_not_decompress_ends_as_the_server_answered() {
    let log = Unasked::default();
    let reply = send_not_gzip(CombinedLayer::server().with(log.clone())).await;
    assert_eq!(
        reply.grpc_status(),
        Some(Code::Internal as i32),
        "{reply:?}"
    );
    let (code, _, error) = log.0.wait_for_ends(1).await.remove(0);
    assert_eq!(code, Code::Internal);
    assert_eq!(error, None);
    let received = Payload::compressed_unmeasured(NOT_GZIP.len() as u32);
    assert_eq!(log.0.payloads(), [(true, received)]);
}
