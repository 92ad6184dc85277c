//! Which entries a call gives: half-close with and without declared
//! client-streaming methods, a client's passed deadline with and without
//! declared server-streaming methods, unknown services and methods
//! against a handler's own `UNIMPLEMENTED`, and calls the filter does not
//! select.

use std::time::Duration;

use tonic::{Code, Request};

use super::{
    BIDI, CLIENT_STREAMING, MemorySink, Rig, SERVER_STREAMING, UNARY, builder, call_path, echo,
    kinds, memory_log, message,
};
use tonic_hotpath::binlog::BinaryLog;

// ---------------------------------------------------------------------
// 3. Half-close.

/// The calls of the half-close test, one after the other: a
/// client-streaming call with one request, a unary call, a bidi call with
/// none. Each side's calls, as lines.
async fn half_close_calls(log: &BinaryLog, sink: &MemorySink) -> [Vec<Vec<String>>; 2] {
    let rig = Rig::start(log).await;
    let reply = rig
        .client()
        .client_streaming_echo(tokio_stream::iter([echo("one")]))
        .await
        .unwrap();
    assert_eq!(reply.into_inner().message, "one");
    rig.ended(1).await;
    rig.client().unary_echo(echo("two")).await.unwrap();
    rig.ended(2).await;
    let replies = rig
        .client()
        .bidirectional_streaming_echo(tokio_stream::empty())
        .await
        .unwrap()
        .into_inner()
        .message()
        .await
        .unwrap();
    assert!(replies.is_none());
    rig.ended(3).await;
    rig.finish().await;
    let (client, server) = sink.take().sides();
    [client, server]
}

/// A call's kinds with its half-close (which carries nothing) put where
/// grpc-go has it, after the last client message: a tonic server sends
/// its header as soon as the handler returns a response stream, before
/// it reads the end of the requests (the interop test's "bidi server
/// interleaving").
fn kinds_in_order(call: &[String]) -> Vec<String> {
    let mut kinds = kinds(call);
    if let Some(at) = kinds.iter().position(|k| k == "CLIENT_HALF_CLOSE") {
        assert_eq!(call[at], "CLIENT_HALF_CLOSE", "no payload, no peer");
        kinds.remove(at);
        let after = kinds
            .iter()
            .rposition(|k| k == "CLIENT_MESSAGE" || k == "CLIENT_HEADER")
            .unwrap();
        kinds.insert(after + 1, "CLIENT_HALF_CLOSE".to_owned());
    }
    kinds
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_close_follows_the_declared_methods() {
    let with_half_close = [
        "CLIENT_HEADER",
        "CLIENT_MESSAGE",
        "CLIENT_HALF_CLOSE",
        "SERVER_HEADER",
        "SERVER_MESSAGE",
        "SERVER_TRAILER",
    ];
    let unary = [
        "CLIENT_HEADER",
        "CLIENT_MESSAGE",
        "SERVER_HEADER",
        "SERVER_MESSAGE",
        "SERVER_TRAILER",
    ];
    let empty_bidi = [
        "CLIENT_HEADER",
        "CLIENT_HALF_CLOSE",
        "SERVER_HEADER",
        "SERVER_TRAILER",
    ];

    // Declared: as grpc-go, from the method's kind.
    let sink = MemorySink::default();
    let log = builder("*", sink.clone())
        .client_streaming([CLIENT_STREAMING, BIDI])
        .build()
        .unwrap();
    for (side, calls) in ["client", "server"]
        .into_iter()
        .zip(half_close_calls(&log, &sink).await)
    {
        let calls: Vec<Vec<String>> = calls.iter().map(|c| kinds_in_order(c)).collect();
        assert_eq!(
            calls,
            [&with_half_close[..], &unary, &empty_bidi],
            "declared, {side}"
        );
    }

    // Undeclared: one request is taken for a unary call's.
    let (log, sink) = memory_log("*");
    for (side, calls) in ["client", "server"]
        .into_iter()
        .zip(half_close_calls(&log, &sink).await)
    {
        let calls: Vec<Vec<String>> = calls.iter().map(|c| kinds_in_order(c)).collect();
        assert_eq!(
            calls,
            [&unary[..], &unary, &empty_bidi],
            "undeclared, {side}"
        );
    }
}

// ---------------------------------------------------------------------
// 11. A client's passed deadline.

/// A server-streaming call with a 100 ms deadline to a stream that sends
/// nothing, held until its deadline passed, then dropped. The timer is
/// armed once the response's headers are back, after the client's layer
/// read the deadline from `grpc-timeout`: the call ends
/// `DEADLINE_EXCEEDED`. The client's entries, as lines.
async fn silent_watch_past_its_deadline(log: &BinaryLog, sink: &MemorySink) -> Vec<String> {
    let rig = Rig::start(log).await;
    let mut request = Request::new(echo("silent"));
    request.set_timeout(Duration::from_millis(100));
    let stream = rig
        .client()
        .server_streaming_echo(request)
        .await
        .unwrap()
        .into_inner();
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(stream);
    rig.ended(1).await;
    rig.finish().await;
    let (mut client, _) = sink.take().sides();
    assert_eq!(client.len(), 1);
    client.remove(0)
}

/// Nothing in the traffic of a watch with no news tells it from a unary
/// call: declared, it logs CANCEL as grpc-go's streams do; undeclared, the
/// trailer with `DEADLINE_EXCEEDED` of a unary call. (A stream that got a
/// message before its deadline logs CANCEL undeclared: the interop test's
/// call 8.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_passed_deadline_follows_the_declared_server_streams() {
    let sink = MemorySink::default();
    let log = builder("*", sink.clone())
        .server_streaming([SERVER_STREAMING, BIDI])
        .build()
        .unwrap();
    let call = silent_watch_past_its_deadline(&log, &sink).await;
    assert_eq!(
        kinds(&call),
        ["CLIENT_HEADER", "CLIENT_MESSAGE", "SERVER_HEADER", "CANCEL"],
        "declared: {call:#?}"
    );

    let (log, sink) = memory_log("*");
    let call = silent_watch_past_its_deadline(&log, &sink).await;
    assert_eq!(
        kinds(&call),
        [
            "CLIENT_HEADER",
            "CLIENT_MESSAGE",
            "SERVER_HEADER",
            "SERVER_TRAILER"
        ],
        "undeclared: {call:#?}"
    );
    assert!(
        call[3].starts_with("SERVER_TRAILER 4 \"\" [] peer="),
        "{}",
        call[3]
    );
}

// ---------------------------------------------------------------------
// 4. Unknown services and methods; a handler's own UNIMPLEMENTED.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_methods_are_logged_by_the_client_only() {
    let (log, sink) = memory_log("*");
    let rig = Rig::start(&log).await;
    // tonic's router fallback (axum's) answers with a `content-length`;
    // the generated service's, with none.
    let paths = [
        ("/other.Service/Method", "content-length=0 date=*"),
        ("/hotpath.echo.Echo/Nope", "date=*"),
    ];
    for (n, (path, _)) in paths.into_iter().enumerate() {
        let status = call_path(rig.layered.clone(), path, "x").await;
        assert_eq!(status.code(), Code::Unimplemented, "{path}");
        assert_eq!(status.message(), "", "{path}: tonic's own answer");
        rig.ended(n as u64 + 1).await;
    }
    let status = rig.client().unary_echo(echo("not yet")).await.unwrap_err();
    assert_eq!(status.code(), Code::Unimplemented);
    assert_eq!(status.message(), "not yet");
    rig.ended(3).await;
    let (authority, server_peer, client_peer) = (rig.addr, rig.server_peer(), rig.client_peer());
    rig.finish().await;

    let (client, server) = sink.take().sides();
    assert_eq!(client.len(), 3, "{client:#?}");
    for (call, (path, trailer_metadata)) in client.iter().zip(paths) {
        // The request races tonic's trailers-only answer.
        let mut call = call.clone();
        if call.len() == 3 {
            assert_eq!(call.remove(1), message("CLIENT_MESSAGE", "x"), "{path}");
        }
        assert_eq!(
            call,
            [
                format!("CLIENT_HEADER {path} @{authority} []"),
                format!("SERVER_TRAILER 12 \"\" [{trailer_metadata}] {server_peer}"),
            ],
            "{path}"
        );
    }
    let header = format!("CLIENT_HEADER {UNARY} @{authority} []");
    assert_eq!(
        client[2],
        [
            header.clone(),
            message("CLIENT_MESSAGE", "not yet"),
            format!("SERVER_TRAILER 12 \"not yet\" [date=*] {server_peer}"),
        ]
    );
    assert_eq!(
        server,
        [[
            format!("{header} {client_peer}"),
            message("CLIENT_MESSAGE", "not yet"),
            "SERVER_TRAILER 12 \"not yet\" []".to_owned(),
        ]],
        "the server logs the handler's UNIMPLEMENTED only"
    );
}

// ---------------------------------------------------------------------
// 5. Calls the filter does not select.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn excluded_methods_log_nothing_and_count_nothing() {
    let (log, sink) = memory_log("hotpath.echo.Echo/*,-hotpath.echo.Echo/UnaryEcho");
    let rig = Rig::start(&log).await;
    // A selected call first: the log is live.
    let mut replies = rig
        .client()
        .server_streaming_echo(echo("a b"))
        .await
        .unwrap()
        .into_inner();
    while replies.message().await.unwrap().is_some() {}
    drop(replies);
    rig.ended(1).await;
    let logged = 2 * 6; // header, message, header, 2 messages, trailer
    support::wait_until("the selected call's entries", || {
        log.counts().written == logged
    })
    .await;
    let before = log.counts();
    for n in 2..=4 {
        rig.client().unary_echo(echo("excluded")).await.unwrap();
        rig.ended(n).await;
    }
    rig.finish().await;
    assert_eq!(log.counts(), before, "the excluded calls");
    let (client, server) = sink.take().sides();
    assert_eq!(client.len(), 1, "{client:#?}");
    assert_eq!(server.len(), 1, "{server:#?}");
    assert!(client[0][0].starts_with("CLIENT_HEADER /hotpath.echo.Echo/ServerStreamingEcho "));

    // A filter that selects nothing of this service.
    let (log, sink) = memory_log("other.Service/*,-hotpath.echo.Echo/BidirectionalStreamingEcho");
    let rig = Rig::start(&log).await;
    rig.client().unary_echo(echo("unselected")).await.unwrap();
    rig.ended(1).await;
    rig.client()
        .client_streaming_echo(tokio_stream::iter([echo("a")]))
        .await
        .unwrap();
    rig.ended(2).await;
    rig.finish().await;
    assert_eq!(log.counts(), Default::default());
    assert!(sink.take().0.is_empty());
}
