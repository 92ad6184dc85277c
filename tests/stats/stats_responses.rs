//! `End` is the status the caller saw, for responses that are not what a
//! tonic server sends (issue #18 items 4 and 5): a proxy answering with a
//! bare HTTP status, a status in the response headers, a body the client
//! cannot decode; and on the server (items 9 and 10), messages over 4 MiB
//! and tower layers inside the stats layer that fail the call.
//! Real tonic clients and servers on 127.0.0.1; the misbehaving peer is a
//! raw `h2` server.

use support::h2_reply;
use support::stacks;
use support::stats_events;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use h2_reply::Reply;
use stats_events::{EventLog, LoggedClient, logged_client};
use support::{EchoClient, EchoOverride, EchoRequest, EchoServer, EchoService};
use tonic::transport::Server;
use tonic::{Code, Request, Response, Status};
use tonic_hotpath::stats::frame::FrameError;
use tonic_hotpath::stats::{CombinedLayer, CompressionError, Direction, Payload, RpcError};
use tower::ServiceBuilder;

/// A client of `addr` behind a client stats layer, with tonic's default
/// 4 MiB limit, and its log.
async fn client(addr: std::net::SocketAddr) -> (Arc<EventLog>, LoggedClient) {
    logged_client(addr, 4 << 20).await
}

fn request(message: &str) -> EchoRequest {
    EchoRequest {
        message: message.to_owned(),
    }
}

/// One unary call answered with `reply`: what the caller got, and the
/// client's one `End` (code, message, error).
async fn call_answered_with(reply: Reply) -> (Status, (Code, String, Option<RpcError>)) {
    let addr = h2_reply::serve(reply).await;
    let (log, mut client) = client(addr).await;
    let status = client.unary_echo(request("hi")).await.unwrap_err();
    let end = log.wait_for_ends(1).await.remove(0);
    (status, end)
}

/// Item 4: a proxy or load balancer answering with a bare HTTP status and
/// no `grpc-status`: `End` has the code (and message) tonic hands the
/// caller, mapped from the HTTP status, with the status in its error.
#[tokio::test]
async fn bare_http_status_ends_with_the_code_tonic_maps_it_to() {
    for (http, expected) in [
        (503, Code::Unavailable),
        (502, Code::Unavailable),
        (504, Code::Unavailable),
        (429, Code::Unavailable),
        (404, Code::Unimplemented),
        (401, Code::Unauthenticated),
        (403, Code::PermissionDenied),
        (400, Code::Internal),
        (500, Code::Unknown),
        (200, Code::Unknown),
    ] {
        let (caller, (code, message, error)) = call_answered_with(Reply::bare(http)).await;
        assert_eq!(caller.code(), expected, "{http}: {caller:?}");
        assert_eq!(code, expected, "{http}: End is what the caller saw");
        assert_eq!(message, caller.message(), "{http}");
        assert_eq!(error, Some(RpcError::MissingStatus { http_status: http }));
    }
}

/// Item 4: the same with an empty DATA frame ending the stream, and with
/// empty trailers that carry no status.
#[tokio::test]
async fn http_status_without_grpc_status_in_body_or_trailers() {
    let empty_body = Reply {
        body: vec![Bytes::new()],
        ..Reply::bare(503)
    };
    let empty_trailers = Reply {
        trailers: Some(vec![("x-proxy", "1")]),
        ..Reply::bare(503)
    };
    for reply in [empty_body, empty_trailers] {
        let (caller, (code, ..)) = call_answered_with(reply.clone()).await;
        assert_eq!(caller.code(), Code::Unavailable, "{reply:?}");
        assert_eq!(code, Code::Unavailable, "{reply:?}");
    }
}

/// Item 4: a proxy's error page is read as gRPC framing by tonic, which
/// fails on its first byte (`Internal`): so does `End`.
#[tokio::test]
async fn proxy_error_page_ends_internal() {
    let page = Reply {
        body: vec![Bytes::from_static(b"upstream connect error")],
        ..Reply::bare(503).header("content-type", "text/plain")
    };
    let (caller, (code, _, error)) = call_answered_with(page).await;
    assert_eq!(caller.code(), Code::Internal, "{caller:?}");
    assert_eq!(code, Code::Internal);
    let expected = RpcError::Frame {
        direction: Direction::Inbound,
        error: FrameError::BadFlag(b'u'),
    };
    assert_eq!(error, Some(expected));
}

/// tonic's client takes a `grpc-status` in the response headers as the
/// call's status, whatever body follows.
#[tokio::test]
async fn grpc_status_in_headers_before_a_body_is_the_status() {
    let reply = Reply {
        headers: vec![
            ("content-type", "application/grpc"),
            ("grpc-status", "14"),
            ("grpc-message", "draining"),
        ],
        ..Reply::grpc_ok(vec![stacks::echo_frame("late")])
    };
    let (caller, (code, message, _)) = call_answered_with(reply).await;
    assert_eq!(caller.code(), Code::Unavailable, "{caller:?}");
    assert_eq!((code, message.as_str()), (Code::Unavailable, "draining"));
}

/// Item 5: a response compressed with an encoding the client does not
/// accept (an unknown one, or gzip when the client accepts none): tonic
/// fails the call `Unimplemented` before reading it; so does `End`.
#[tokio::test]
async fn unaccepted_response_encoding_ends_unimplemented() {
    for encoding in ["snappy", "gzip"] {
        let reply = Reply::grpc_ok(vec![stacks::frame(1, b"compressed?")])
            .header("grpc-encoding", encoding);
        let (caller, (code, message, error)) = call_answered_with(reply).await;
        assert_eq!(caller.code(), Code::Unimplemented, "{encoding}: {caller:?}");
        assert_eq!(code, Code::Unimplemented, "{encoding}");
        assert_eq!(message, caller.message(), "{encoding}");
        let expected = RpcError::Compression {
            direction: Direction::Inbound,
            error: CompressionError::UnsupportedEncoding {
                encoding: encoding.to_owned(),
            },
        };
        assert_eq!(error, Some(expected));
    }
}

/// Item 5: a message with its compressed flag set but no `grpc-encoding`
/// on the response: tonic fails it `Internal`, no payload event.
#[tokio::test]
async fn compressed_flag_without_encoding_ends_internal() {
    let addr = h2_reply::serve(Reply::grpc_ok(vec![stacks::frame(1, b"abc")])).await;
    let (log, mut client) = client(addr).await;
    let caller = client.unary_echo(request("hi")).await.unwrap_err();
    assert_eq!(caller.code(), Code::Internal, "{caller:?}");
    let (code, _, error) = log.wait_for_ends(1).await.remove(0);
    assert_eq!(code, Code::Internal);
    let expected = RpcError::Compression {
        direction: Direction::Inbound,
        error: CompressionError::MissingEncoding,
    };
    assert_eq!(error, Some(expected));
    assert!(log.payloads().iter().all(|(inbound, _)| !inbound));
}

/// Item 5, the case a tower layer cannot tell: a well-framed response
/// message that is not valid protobuf for the method. tonic hands the
/// caller `Internal` ("failed to decode Protobuf message") and drops the
/// response right after the message, exactly as a streaming caller that
/// stops early does: `End` reports `Cancelled` (documented on `End::code`).
#[tokio::test]
async fn undecodable_protobuf_is_reported_as_a_cancel() {
    let junk = stacks::frame(0, &[0xff, 0xff, 0xff]);
    let (caller, (code, _, error)) = call_answered_with(Reply::grpc_ok(vec![junk])).await;
    assert_eq!(caller.code(), Code::Internal, "{caller:?}");
    assert_eq!((code, error), (Code::Cancelled, Some(RpcError::Cancelled)));
}

/// A server that accepts 8 MiB messages, its layer told so, and a client
/// that accepts `client_limit` bytes, its layer told so.
async fn big_message_pair(client_limit: u32) -> (Arc<EventLog>, Arc<EventLog>, LoggedClient) {
    let server_log = Arc::new(EventLog::default());
    let (addr, incoming) = support::bind().await;
    tokio::spawn(
        Server::builder()
            .layer(
                CombinedLayer::server()
                    .with(Arc::clone(&server_log))
                    .max_message_len(8 << 20),
            )
            .add_service(EchoServer::new(EchoService).max_decoding_message_size(8 << 20))
            .serve_with_incoming(incoming),
    );
    let (client_log, client) = logged_client(addr, client_limit).await;
    (server_log, client_log, client)
}

/// Item 9: the layer's message limit (tonic's 4 MiB decoding default)
/// applies to what each side receives, not what it sends: a 5 MiB request
/// is counted by the client that sends it and a 5 MiB reply by the server
/// that sends it, both with a 4 MiB limit on what they receive.
#[tokio::test]
async fn messages_over_4_mib_are_counted_when_sent() {
    let (server_log, client_log, mut client) = big_message_pair(4 << 20).await;
    let message = "x".repeat(5 << 20);
    let len = echo_len(&message);
    let reply = client.unary_echo(request(&message)).await;
    // The 5 MiB reply is over the client's 4 MiB: that is the next test.
    assert_eq!(reply.unwrap_err().code(), Code::OutOfRange);
    let server_end = server_log.wait_for_ends(1).await;
    assert_eq!(server_end[0].0, Code::Ok, "{server_end:?}");
    let both_ways = [
        (true, Payload::uncompressed(len)),
        (false, Payload::uncompressed(len)),
    ];
    assert_eq!(server_log.payloads(), both_ways);
    client_log.wait_for_ends(1).await;
    assert_eq!(client_log.payloads(), [(false, Payload::uncompressed(len))]);

    // A client that accepts 8 MiB, its layer told so: the reply counts.
    let (_, client_log, mut client) = big_message_pair(8 << 20).await;
    let reply = client.unary_echo(request(&message)).await.unwrap();
    assert_eq!(reply.into_inner().message.len(), 5 << 20);
    let client_end = client_log.wait_for_ends(1).await;
    assert_eq!(client_end[0].0, Code::Ok, "{client_end:?}");
    assert_eq!(
        client_log.payloads(),
        both_ways.map(|(inbound, p)| (!inbound, p))
    );
}

/// Item 9: an inbound message over the receiver's limit ends with the
/// code tonic gives (`OutOfRange`), and gives no payload event.
#[tokio::test]
async fn a_message_over_the_receivers_limit_ends_out_of_range() {
    let (server_log, client_log, mut client) = big_message_pair(4 << 20).await;
    let message = "x".repeat(5 << 20);
    let caller = client.unary_echo(request(&message)).await.unwrap_err();
    assert_eq!(caller.code(), Code::OutOfRange, "{caller:?}");
    let (code, _, error) = client_log.wait_for_ends(1).await.remove(0);
    assert_eq!(code, Code::OutOfRange);
    let expected = RpcError::Frame {
        direction: Direction::Inbound,
        error: FrameError::TooLong {
            length: echo_len(&message),
            limit: 4 << 20,
        },
    };
    assert_eq!(error, Some(expected));
    assert_eq!(client_log.payloads().len(), 1, "only the request");
    server_log.wait_for_ends(1).await;
}

/// The encoded length of an `EchoRequest`/`EchoResponse` of `message`.
fn echo_len(message: &str) -> u32 {
    use prost::Message;
    request(message).encoded_len() as u32
}

/// A unary handler that counts the calls it entered and never answers.
#[derive(Debug, Clone, Default)]
struct Stuck(Arc<AtomicUsize>);

#[tonic::async_trait]
impl EchoOverride for Stuck {
    async fn unary(
        &self,
        _: Request<EchoRequest>,
    ) -> Result<Response<support::EchoResponse>, Status> {
        self.0.fetch_add(1, Ordering::SeqCst);
        std::future::pending().await
    }
}

/// Item 10: tower layers inside the stats layer that fail the call with an
/// error instead of a response: `End` has the code the client is sent for
/// it (tonic's `RecoverError`): load shedding is `ResourceExhausted`; a
/// tower timeout is no status for tonic, so hyper resets the stream and
/// the client reads `Internal`.
#[tokio::test]
async fn tower_layers_inside_the_stats_layer_end_with_what_the_client_gets() {
    let log = Arc::new(EventLog::default());
    let (addr, incoming) = support::bind().await;
    // The timeout only has to outlast the second call's trip to the load
    // shedder while the first holds the one slot: generous for a loaded
    // machine, since the first call is in its handler before the second
    // is sent.
    let stack = ServiceBuilder::new()
        .layer(CombinedLayer::server().with(Arc::clone(&log)))
        .load_shed()
        .concurrency_limit(1)
        .timeout(Duration::from_secs(5))
        .into_inner();
    let stuck = Stuck::default();
    tokio::spawn(
        Server::builder()
            .layer(stack)
            .add_service(EchoServer::new(stuck.clone()))
            .serve_with_incoming(incoming),
    );
    let mut first = EchoClient::new(support::connect(addr).await);
    let mut second = first.clone();
    let slow = tokio::spawn(async move { first.unary_echo(request("slow")).await });
    support::wait_until("the first call in its handler", || {
        stuck.0.load(Ordering::SeqCst) == 1
    })
    .await;
    let shed = second.unary_echo(request("shed")).await.unwrap_err();
    let timed_out = slow.await.unwrap().unwrap_err();
    assert_eq!(shed.code(), Code::ResourceExhausted, "{shed:?}");
    assert_eq!(timed_out.code(), Code::Internal, "{timed_out:?}");
    let mut ends: Vec<_> = log.wait_for_ends(2).await;
    ends.sort_by_key(|(code, ..)| *code as i32);
    assert_eq!(ends[0].0, Code::ResourceExhausted);
    assert_eq!(ends[0].1, shed.message());
    assert_eq!(ends[1].0, Code::Internal);
    assert!(
        matches!(ends[1].2, Some(RpcError::Service { .. })),
        "{ends:?}"
    );
}
