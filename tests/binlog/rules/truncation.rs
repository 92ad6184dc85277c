//! Header and message truncation at their boundaries (grpc-go's
//! `truncateMetadata` and `truncateMessage`).

use prost::Message as _;
use tonic::metadata::MetadataValue;
use tonic::{Code, Request};

use super::{Rig, UNARY, cut_message, echo, memory_log, message};
use support::EchoRequest;

/// The request metadata of the truncation tests, in order: `x-a=1111`
/// (7 bytes), `grpc-trace-bin` (3 bytes, never counted), `x-bb=222222`
/// (10), `x-ccc=33` (7): 24 bytes counted.
fn truncation_request(text: &str) -> Request<EchoRequest> {
    let mut request = Request::new(echo(text));
    let metadata = request.metadata_mut();
    metadata.insert("x-a", MetadataValue::from_static("1111"));
    metadata.insert_bin("grpc-trace-bin", MetadataValue::from_bytes(&[0, 1, 2]));
    metadata.insert("x-bb", MetadataValue::from_static("222222"));
    metadata.insert("x-ccc", MetadataValue::from_static("33"));
    request
}

/// Under `*{h:N}`: the client header keeps the entries before the first
/// that does not fit (`grpc-trace-bin` kept without being counted), the
/// server header of the client (`date`, 33 bytes) is cut, trailers are
/// whole, messages have no data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_truncation_stops_at_the_first_entry_that_does_not_fit() {
    const TRACE: &str = r"grpc-trace-bin=\x00\x01\x02";
    let cases: [(u64, &str, bool); 5] = [
        (24, "x-a=1111 {T} x-bb=222222 x-ccc=33", false),
        (23, "x-a=1111 {T} x-bb=222222", true),
        // x-ccc (7) would fit the 9 bytes left, but x-bb did not.
        (16, "x-a=1111 {T}", true),
        // grpc-trace-bin is before the cut: kept, not counted.
        (7, "x-a=1111 {T}", true),
        // ... and after it: dropped with the rest.
        (6, "", true),
    ];
    for (limit, kept, truncated) in cases {
        let (log, sink) = memory_log(&format!("*{{h:{limit}}}"));
        let rig = Rig::start(&log).await;
        rig.client()
            .unary_echo(truncation_request("hello"))
            .await
            .unwrap();
        rig.ended(1).await;
        let status = rig
            .client()
            .unary_echo(truncation_request("trailers"))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::FailedPrecondition);
        rig.ended(2).await;
        let (authority, server_peer, client_peer) =
            (rig.addr, rig.server_peer(), rig.client_peer());
        rig.finish().await;

        let kept = kept.replace("{T}", TRACE);
        let cut = if truncated { " truncated" } else { "" };
        let header = format!("CLIENT_HEADER {UNARY} @{authority} [{kept}]{cut}");
        let trailer_md = "x-trailer-one=value one x-trailer-two=a longer second value";
        let hello = echo("hello").encode_to_vec().len();
        let trailers = echo("trailers").encode_to_vec().len();
        let (client, server) = sink.take().sides();
        assert_eq!(
            client,
            [
                vec![
                    header.clone(),
                    format!("CLIENT_MESSAGE {hello}  truncated"),
                    format!("SERVER_HEADER [] truncated {server_peer}"),
                    format!("SERVER_MESSAGE {hello}  truncated"),
                    format!("SERVER_TRAILER 0 \"\" [] {server_peer}"),
                ],
                vec![
                    header.clone(),
                    format!("CLIENT_MESSAGE {trailers}  truncated"),
                    format!(
                        "SERVER_TRAILER 9 \"with trailers\" [{trailer_md} date=*] {server_peer}"
                    ),
                ],
            ],
            "h:{limit}, client"
        );
        assert_eq!(
            server,
            [
                vec![
                    format!("{header} {client_peer}"),
                    format!("CLIENT_MESSAGE {hello}  truncated"),
                    "SERVER_HEADER []".to_owned(),
                    format!("SERVER_MESSAGE {hello}  truncated"),
                    "SERVER_TRAILER 0 \"\" []".to_owned(),
                ],
                vec![
                    format!("{header} {client_peer}"),
                    format!("CLIENT_MESSAGE {trailers}  truncated"),
                    format!("SERVER_TRAILER 9 \"with trailers\" [{trailer_md}]"),
                ],
            ],
            "h:{limit}, server"
        );
    }
}

/// `*{h}`: headers whole, messages with no data but their length, cut
/// only when they had bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_only_keeps_message_lengths() {
    let (log, sink) = memory_log("*{h}");
    let rig = Rig::start(&log).await;
    for (n, text) in ["hello", ""].into_iter().enumerate() {
        rig.client()
            .unary_echo(truncation_request(text))
            .await
            .unwrap();
        rig.ended(n as u64 + 1).await;
    }
    let (authority, server_peer, client_peer) = (rig.addr, rig.server_peer(), rig.client_peer());
    rig.finish().await;

    let header = format!(
        "CLIENT_HEADER {UNARY} @{authority} \
         [x-a=1111 grpc-trace-bin=\\x00\\x01\\x02 x-bb=222222 x-ccc=33]"
    );
    let (client, server) = sink.take().sides();
    let client_call = |messages: [&str; 2]| {
        vec![
            header.clone(),
            format!("CLIENT_{}", messages[0]),
            format!("SERVER_HEADER [date=*] {server_peer}"),
            format!("SERVER_{}", messages[1]),
            format!("SERVER_TRAILER 0 \"\" [] {server_peer}"),
        ]
    };
    let server_call = |messages: [&str; 2]| {
        vec![
            format!("{header} {client_peer}"),
            format!("CLIENT_{}", messages[0]),
            "SERVER_HEADER []".to_owned(),
            format!("SERVER_{}", messages[1]),
            "SERVER_TRAILER 0 \"\" []".to_owned(),
        ]
    };
    // "hello" is 7 bytes; "" encodes to none.
    let cut = ["MESSAGE 7  truncated"; 2];
    let empty = ["MESSAGE 0 "; 2];
    assert_eq!(client, [client_call(cut), client_call(empty)]);
    assert_eq!(server, [server_call(cut), server_call(empty)]);
}

/// `*{m:12}`: a 12-byte message whole, a 13-byte one cut to 12; headers
/// get no bytes (the client's server header loses its `date`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_truncation_at_the_limit_and_one_past_it() {
    const FITS: &str = "0123456789"; // 12 bytes encoded
    const PAST: &str = "0123456789a"; // 13
    assert_eq!(echo(FITS).encode_to_vec().len(), 12);
    let (log, sink) = memory_log("*{m:12}");
    let rig = Rig::start(&log).await;
    for (n, text) in [FITS, PAST].into_iter().enumerate() {
        rig.client().unary_echo(echo(text)).await.unwrap();
        rig.ended(n as u64 + 1).await;
    }
    let (authority, server_peer, client_peer) = (rig.addr, rig.server_peer(), rig.client_peer());
    rig.finish().await;

    let header = format!("CLIENT_HEADER {UNARY} @{authority} []");
    let (client, server) = sink.take().sides();
    let client_call = |messages: [String; 2]| {
        let [request, response] = messages;
        vec![
            header.clone(),
            request,
            format!("SERVER_HEADER [] truncated {server_peer}"),
            response,
            format!("SERVER_TRAILER 0 \"\" [] {server_peer}"),
        ]
    };
    let server_call = |messages: [String; 2]| {
        let [request, response] = messages;
        vec![
            format!("{header} {client_peer}"),
            request,
            "SERVER_HEADER []".to_owned(),
            response,
            "SERVER_TRAILER 0 \"\" []".to_owned(),
        ]
    };
    let whole = || {
        [
            message("CLIENT_MESSAGE", FITS),
            message("SERVER_MESSAGE", FITS),
        ]
    };
    let cut = || {
        [
            cut_message("CLIENT_MESSAGE", PAST, 12),
            cut_message("SERVER_MESSAGE", PAST, 12),
        ]
    };
    assert_eq!(client, [client_call(whole()), client_call(cut())]);
    assert_eq!(server, [server_call(whole()), server_call(cut())]);
}
