//! Per-call reports when calls go wrong on the stacks users build: a client
//! sending junk to a server with `CallMetricsLayer`, a proxy answering with
//! a bare HTTP status in front of a reading client, and a streaming call
//! the client cancels. No panic anywhere (counted by a panic hook, per
//! test thread: each `#[tokio::test]` runs its servers and clients on its
//! own thread), the server keeps serving, and the next call reports.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::ThreadId;

use bytes::Bytes;
use tonic::Code;
use tonic::service::Routes;
use tonic::transport::{Channel, Server};
use tonic_hotpath::orca::client::EndpointWeight;
use tonic_hotpath::orca::load_report_from;
use tonic_hotpath::orca::server::CallMetricsLayer;
use tower::ServiceExt;
use tower::layer::util::Identity;

use crate::orca_stacks::{OrcaEcho, expected, quick_group, reading, unary};
use support::h2_reply::{self, Reply};
use support::stacks::junk::{H2Reply, grpc_request, h2_connect, h2_send};
use support::stacks::{ServerTask, UNARY_PATH, echo_frame, frame, serve, spawn_echo};
use support::{EchoClient, EchoRequest, bind, wait_until};

const CLIENT_STREAMING_PATH: &str = "/hotpath.echo.Echo/ClientStreamingEcho";

/// Panics seen so far on the calling thread (the hook is installed on
/// first use and chains to the one before it).
fn panics_here() -> usize {
    static PANICS: OnceLock<Mutex<HashMap<ThreadId, usize>>> = OnceLock::new();
    let panics = PANICS.get_or_init(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let counts = PANICS.get().expect("set before the hook");
            *counts
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(std::thread::current().id())
                .or_default() += 1;
            previous(info);
        }));
        Mutex::default()
    });
    let counts = panics.lock().unwrap_or_else(|e| e.into_inner());
    counts
        .get(&std::thread::current().id())
        .copied()
        .unwrap_or(0)
}

/// A server of [`OrcaEcho`] behind `CallMetricsLayer` on TCP.
async fn orca_server(echo: &OrcaEcho) -> (std::net::SocketAddr, ServerTask) {
    let (addr, incoming) = bind().await;
    let task = spawn_echo(CallMetricsLayer::new(), echo.clone(), incoming);
    (addr, task)
}

/// A unary call through a reading client of `addr` gets its report, and
/// `endpoint` read it.
async fn next_call_reports(addr: std::net::SocketAddr, endpoint: &EndpointWeight) {
    let before = endpoint.reports();
    let mut client = EchoClient::new(reading(support::connect(addr).await, endpoint));
    assert_eq!(
        unary(&mut client, "next").await.report,
        Some(expected("next"))
    );
    assert_eq!(endpoint.reports(), before + 1);
    assert_eq!(endpoint.weight(), Some(200.0));
    assert_eq!(endpoint.malformed_reports(), 0);
}

/// A junk exchange was answered with a failing status (or a reset), and
/// any report it carries is well-formed.
fn assert_refused(what: &str, reply: &H2Reply) {
    let failed = reply.grpc_status().is_some_and(|code| code != 0);
    assert!(failed || reply.reset.is_some(), "{what}: {reply:?}");
    assert!(
        load_report_from(&reply.headers).is_ok(),
        "{what}: {reply:?}"
    );
    if let Some(trailers) = &reply.trailers {
        assert!(load_report_from(trailers).is_ok(), "{what}: {reply:?}");
    }
}

#[tokio::test]
async fn junk_clients_leave_the_server_serving_and_reporting() {
    let panics = panics_here();
    let echo = OrcaEcho::default();
    let (addr, server) = orca_server(&echo).await;
    let endpoint = quick_group().endpoint();
    next_call_reports(addr, &endpoint).await;

    let grpc = || grpc_request(UNARY_PATH, "application/grpc");
    let bad_flag = h2_send(addr, grpc(), frame(7, b"junk")).await;
    assert_refused("a bad frame flag", &bad_flag);
    // A frame declaring 4 GiB - 16 bytes, of which 5 come.
    let mut huge = vec![0, 0xff, 0xff, 0xff, 0xf0];
    huge.extend_from_slice(b"short");
    let huge = h2_send(addr, grpc(), Bytes::from(huge)).await;
    assert_refused("a huge declared length", &huge);
    let truncated = h2_send(addr, grpc(), echo_frame("cut").slice(..7)).await;
    assert_refused("a truncated frame", &truncated);

    // A client-streaming call reset midway, after its handler took the
    // recorder (so the layer holds a recorder when the call goes away).
    let connection = h2_connect(addr).await;
    let mut ready = connection.ready().await.expect("a stream");
    let request = grpc_request(CLIENT_STREAMING_PATH, "application/grpc");
    let (response, mut send) = ready.send_request(request, false).expect("send");
    send.send_data(echo_frame("first"), false)
        .expect("a message");
    let begun = &echo.streams_begun;
    wait_until("the handler to start", || begun.load(Ordering::SeqCst) == 1).await;
    send.send_reset(h2::Reason::CANCEL);
    let ended = &echo.streams_ended;
    wait_until("the handler to end", || ended.load(Ordering::SeqCst) == 1).await;
    drop((response, send, ready));

    next_call_reports(addr, &endpoint).await;
    assert!(!server.is_finished(), "the server still runs");
    assert_eq!(panics_here(), panics, "no panic on the server or client");
}

/// A proxy on 127.0.0.1 in front of `backend`: it forwards every call
/// while `mode` is 0, and otherwise answers with the bare HTTP status
/// `mode` (no body, no `grpc-status`), as a load balancer with no healthy
/// backend does.
async fn proxy(backend: Channel, mode: Arc<AtomicU16>) -> std::net::SocketAddr {
    let forward = tower::service_fn(move |request: http::Request<axum::body::Body>| {
        let (backend, status) = (backend.clone(), mode.load(Ordering::SeqCst));
        async move {
            let response = if status == 0 {
                match backend.oneshot(request.map(tonic::body::Body::new)).await {
                    Ok(response) => response.map(axum::body::Body::new),
                    Err(_) => bare(502),
                }
            } else {
                bare(status)
            };
            Ok::<_, Infallible>(response)
        }
    });
    let routes = Routes::from(axum::Router::new().fallback_service(forward));
    let (addr, incoming) = bind().await;
    serve(Server::builder(), Identity::new(), routes, incoming);
    addr
}

fn bare(status: u16) -> http::Response<axum::body::Body> {
    let mut response = http::Response::new(axum::body::Body::empty());
    *response.status_mut() = http::StatusCode::from_u16(status).expect("a status");
    response
}

/// A unary call that must fail.
async fn refused(client: &mut EchoClient<crate::orca_stacks::Reading>) -> tonic::Status {
    let request = EchoRequest {
        message: "refused".to_owned(),
    };
    client.unary_echo(request).await.expect_err("a bare status")
}

#[tokio::test]
async fn a_bare_http_status_from_a_proxy_reads_as_no_report() {
    let echo = OrcaEcho::default();
    let (backend, _server) = orca_server(&echo).await;
    let mode = Arc::new(AtomicU16::new(0));
    let addr = proxy(support::connect(backend).await, Arc::clone(&mode)).await;
    let endpoint = quick_group().endpoint();
    // Forwarded: the report crosses the proxy intact.
    next_call_reports(addr, &endpoint).await;

    let mut client = EchoClient::new(reading(support::connect(addr).await, &endpoint));
    for status in [503, 502] {
        mode.store(status, Ordering::SeqCst);
        let refused = refused(&mut client).await;
        assert_eq!(refused.code(), Code::Unavailable, "{status}: {refused:?}");
        assert_eq!(endpoint.reports(), 1, "{status}: no report read");
        assert_eq!(endpoint.malformed_reports(), 0, "{status}");
        assert_eq!(endpoint.weight(), Some(200.0), "{status}: unchanged");
    }

    // The same from a raw h2 peer: a bare status, an empty body, and
    // trailers without a status.
    for reply in [
        Reply::bare(503),
        Reply {
            body: vec![Bytes::new()],
            ..Reply::bare(503)
        },
        Reply {
            trailers: Some(vec![("x-proxy", "1")]),
            ..Reply::bare(503)
        },
    ] {
        let peer = h2_reply::serve(reply.clone()).await;
        let mut client = EchoClient::new(reading(support::connect(peer).await, &endpoint));
        let refused = refused(&mut client).await;
        assert_eq!(refused.code(), Code::Unavailable, "{reply:?}");
        assert_eq!(endpoint.reports(), 1, "{reply:?}");
        assert_eq!(endpoint.malformed_reports(), 0, "{reply:?}");
        assert_eq!(endpoint.weight(), Some(200.0), "{reply:?}");
    }

    // Forwarding again: reports again.
    mode.store(0, Ordering::SeqCst);
    next_call_reports(addr, &endpoint).await;
}

/// A server-streaming call the client drops after the first response,
/// while the server's stream would go on forever: hyper resets the stream
/// (`RST_STREAM CANCEL`), the server drops the layer's body and, inside
/// it, the handler's stream. (A bidi call whose request stream is still
/// open is not reset by dropping its responses: hyper's request pipe keeps
/// the h2 stream alive, so that is no cancellation to test.)
#[tokio::test]
async fn a_cancelled_stream_drops_cleanly_and_later_calls_report() {
    let panics = panics_here();
    let echo = OrcaEcho::default();
    let (addr, server) = orca_server(&echo).await;
    let endpoint = quick_group().endpoint();
    let mut client = EchoClient::new(reading(support::connect(addr).await, &endpoint));
    for round in 1..=2 {
        let request = EchoRequest {
            message: "first then forever".to_owned(),
        };
        let mut responses = client
            .server_streaming_echo(request)
            .await
            .expect("the call starts")
            .into_inner();
        let echoed = responses.message().await.expect("a response").expect("one");
        assert_eq!(echoed.message, "first");
        drop(responses);
        let dropped = &echo.responses_dropped;
        let what = "the server to drop the response stream";
        wait_until(what, || dropped.load(Ordering::SeqCst) == round).await;
        assert_eq!(
            endpoint.reports(),
            round as u64 - 1,
            "no trailers, no report"
        );
        assert_eq!(endpoint.malformed_reports(), 0);

        next_call_reports(addr, &endpoint).await;
    }
    assert!(!server.is_finished(), "the server still runs");
    assert_eq!(panics_here(), panics, "no panic on the server or client");
}
