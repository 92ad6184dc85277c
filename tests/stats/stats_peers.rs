//! `End` is the status the application saw, and payload events are only
//! for messages that arrived, against peers that misbehave: a raw HTTP/2
//! server (the `h2` crate on 127.0.0.1) that resets, sends GOAWAY, cuts the
//! connection or sends broken gRPC framing to a tonic client over a real
//! `Channel`, and clients that cancel calls on a real tonic server.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use support::{
    Echo, EchoClient, EchoOverride, EchoRequest, EchoResponse, EchoServer, EchoService,
    ResponseStream,
};
use tokio_stream::StreamExt;
use tonic::transport::{Channel, Server};
use tonic::{Code, Request, Response, Status};
use tonic_hotpath::stats::frame::FrameError;
use tonic_hotpath::stats::{
    CombinedLayer, CombinedService, Direction, RpcError, RpcEvent, ServerSide, StatsHandler,
};
use tower::ServiceBuilder;

/// A simplified event.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ev {
    InPayload(u32),
    End(Code, Option<RpcError>),
}

/// Records payload-in events and `End`s, per RPC (its state is its id).
#[derive(Debug, Default)]
struct Log {
    next: AtomicU64,
    events: Mutex<Vec<(u64, Ev)>>,
}

impl StatsHandler for Log {
    type RpcState = u64;
    type ConnState = ();

    fn tag_rpc(&self, _: &tonic_hotpath::stats::RpcInfo<'_>, _: Option<&()>) -> u64 {
        self.next.fetch_add(1, Ordering::SeqCst)
    }

    fn handle_rpc(&self, id: &mut u64, event: &RpcEvent<'_>) {
        let ev = match event {
            RpcEvent::InPayload(payload) => {
                Ev::InPayload(payload.length.expect("sent uncompressed"))
            }
            RpcEvent::End(end) => Ev::End(end.code, end.error.cloned()),
            _ => return,
        };
        self.events.lock().unwrap().push((*id, ev));
    }
}

impl Log {
    fn ends(&self) -> Vec<(Code, Option<RpcError>)> {
        let events = self.events.lock().unwrap();
        let ends = events.iter().filter_map(|(_, ev)| match ev {
            Ev::End(code, error) => Some((*code, error.clone())),
            Ev::InPayload(_) => None,
        });
        ends.collect()
    }

    fn payloads(&self) -> Vec<u32> {
        let events = self.events.lock().unwrap();
        let payloads = events.iter().filter_map(|(_, ev)| match ev {
            Ev::InPayload(length) => Some(*length),
            Ev::End(..) => None,
        });
        payloads.collect()
    }

    /// Waits (up to [`support::PATIENCE`]) until every RPC the handler saw
    /// begin has ended, then checks no more come; returns the `End`s.
    async fn wait_until_all_ended(&self) -> Vec<(Code, Option<RpcError>)> {
        let deadline = support::deadline();
        while std::time::Instant::now() < deadline {
            let begun = self.next.load(Ordering::SeqCst) as usize;
            if self.ends().len() >= begun {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        let begun = self.next.load(Ordering::SeqCst) as usize;
        let ends = self.ends();
        assert_eq!(ends.len(), begun, "one End per RPC begun: {ends:?}");
        ends
    }

    /// Waits (up to [`support::PATIENCE`]) for `n` `End`s, then checks no
    /// more come.
    async fn wait_for_ends(&self, n: usize) -> Vec<(Code, Option<RpcError>)> {
        let deadline = support::deadline();
        while std::time::Instant::now() < deadline {
            if self.ends().len() >= n {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        let ends = self.ends();
        assert_eq!(ends.len(), n, "exactly {n} End(s): {ends:?}");
        ends
    }
}

type Client = EchoClient<CombinedService<Channel, Arc<Log>, tonic_hotpath::stats::ClientSide>>;

/// An `EchoClient` over a `Channel` to `addr` with a client layer logging
/// into the returned `Log`.
async fn client(addr: SocketAddr) -> (Arc<Log>, Client) {
    let log = Arc::new(Log::default());
    let channel = support::connect(addr).await;
    let layered = ServiceBuilder::new()
        .layer(CombinedLayer::client().with(Arc::clone(&log)))
        .service(channel);
    (log, EchoClient::new(layered))
}

fn request(message: &str) -> EchoRequest {
    EchoRequest {
        message: message.to_owned(),
    }
}

// ---- a misbehaving HTTP/2 server ----

/// What the raw server does with each request.
#[derive(Debug, Clone, Copy)]
enum Misbehaviour {
    /// Response headers far over the client's header list limit (16 KiB).
    OversizedHeaders,
    /// GOAWAY with ENHANCE_YOUR_CALM before answering.
    GoAwayCalm,
    /// RST_STREAM CANCEL before answering.
    ResetCancel,
    /// Drops the TCP connection before answering.
    CutBeforeHeaders,
    /// Sends response headers, then drops the TCP connection.
    CutAfterHeaders,
    /// Sends `body` as the response's data, then `grpc-status: 0`.
    Respond(&'static [u8]),
}

/// A message that promises 10 bytes and brings 3.
const TRUNCATED: &[u8] = &[0, 0, 0, 0, 10, 1, 2, 3];
/// A message whose compressed flag is 2.
const BAD_FLAG: &[u8] = &[2, 0, 0, 0, 0];
/// A prefix that claims a 4 GiB message, and 10 bytes of it.
const FOUR_GIB: &[u8] = &[0, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10];

/// Serves `misbehaviour` on 127.0.0.1 with the `h2` crate.
async fn misbehaving_server(misbehaviour: Misbehaviour) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            match misbehaviour {
                Misbehaviour::GoAwayCalm => tokio::spawn(go_away_calm(socket)),
                _ => tokio::spawn(misbehave(socket, misbehaviour)),
            };
        }
    });
    addr
}

fn grpc_headers() -> http::Response<()> {
    http::Response::builder()
        .status(200)
        .header("content-type", "application/grpc")
        .body(())
        .unwrap()
}

async fn misbehave(socket: tokio::net::TcpStream, misbehaviour: Misbehaviour) {
    let Ok(mut conn) = h2::server::handshake(socket).await else {
        return;
    };
    // Streams this server keeps open (dropping one would reset it).
    let mut open = Vec::new();
    while let Some(Ok((_request, mut respond))) = conn.accept().await {
        match misbehaviour {
            Misbehaviour::OversizedHeaders => {
                let mut response = grpc_headers();
                // Over 16 KiB, under what h2 treats as abuse (GOAWAY ENHANCE_YOUR_CALM).
                let big = "x".repeat(20 * 1024);
                let value = http::HeaderValue::from_str(&big).unwrap();
                response.headers_mut().insert("x-big", value);
                open.extend(respond.send_response(response, false));
            }
            Misbehaviour::GoAwayCalm => unreachable!("served by go_away_calm"),
            Misbehaviour::ResetCancel => respond.send_reset(h2::Reason::CANCEL),
            Misbehaviour::CutBeforeHeaders => return,
            Misbehaviour::CutAfterHeaders => {
                open.extend(respond.send_response(grpc_headers(), false));
                // Let the headers go out, then drop the connection.
                let _ = tokio::time::timeout(
                    Duration::from_millis(50),
                    std::future::poll_fn(|cx| conn.poll_closed(cx)),
                )
                .await;
                return;
            }
            Misbehaviour::Respond(body) => {
                let Ok(mut stream) = respond.send_response(grpc_headers(), false) else {
                    continue;
                };
                let _ = stream.send_data(Bytes::from_static(body), false);
                let mut trailers = HeaderMap::new();
                trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
                let _ = stream.send_trailers(trailers);
            }
        }
    }
}

/// Speaks just enough raw HTTP/2 to answer the first request with
/// GOAWAY(last stream 0, ENHANCE_YOUR_CALM), which refuses it. (The `h2`
/// crate's own GOAWAY covers every stream it has seen.)
async fn go_away_calm(mut socket: tokio::net::TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const SETTINGS: [u8; 9] = [0, 0, 0, 4, 0, 0, 0, 0, 0];
    const SETTINGS_ACK: [u8; 9] = [0, 0, 0, 4, 1, 0, 0, 0, 0];
    // Length 8, type GOAWAY, stream 0; last stream id 0; ENHANCE_YOUR_CALM.
    const GOAWAY: [u8; 17] = [0, 0, 8, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0b];
    let mut preface = [0u8; 24];
    if socket.read_exact(&mut preface).await.is_err() || socket.write_all(&SETTINGS).await.is_err()
    {
        return;
    }
    loop {
        let mut header = [0u8; 9];
        if socket.read_exact(&mut header).await.is_err() {
            return;
        }
        let len = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
        let mut payload = vec![0; len];
        if socket.read_exact(&mut payload).await.is_err() {
            return;
        }
        let (frame_type, flags) = (header[3], header[4]);
        let reply: &[u8] = match frame_type {
            4 if flags & 1 == 0 => &SETTINGS_ACK,
            1 => &GOAWAY,
            _ => continue,
        };
        if socket.write_all(reply).await.is_err() {
            return;
        }
        if frame_type == 1 {
            // Let the client read the GOAWAY before the connection closes.
            let mut rest = [0u8; 1024];
            let drain = async { while matches!(socket.read(&mut rest).await, Ok(n) if n > 0) {} };
            let _ = tokio::time::timeout(Duration::from_secs(1), drain).await;
            return;
        }
    }
}

/// One unary call to a server that misbehaves: the caller's status code
/// and the client's one `End`.
async fn unary_against(misbehaviour: Misbehaviour) -> (Code, (Code, Option<RpcError>)) {
    let addr = misbehaving_server(misbehaviour).await;
    let (log, mut client) = client(addr).await;
    let status = client.unary_echo(request("hi")).await.unwrap_err();
    drop(client);
    let ends = log.wait_for_ends(1).await;
    (status.code(), ends[0].clone())
}

/// Asserts the client's `End` has the code the caller got, and that code.
async fn end_is_what_the_caller_saw(
    misbehaviour: Misbehaviour,
    expected: Code,
) -> Option<RpcError> {
    let (caller, (end, error)) = unary_against(misbehaviour).await;
    eprintln!("{misbehaviour:?}: caller {caller:?}, End {end:?} {error:?}");
    assert_eq!(
        caller, expected,
        "{misbehaviour:?}: what tonic hands the caller"
    );
    assert_eq!(
        end, caller,
        "{misbehaviour:?}: End is what the caller saw ({error:?})"
    );
    error
}

#[tokio::test]
async fn oversized_response_headers_end_internal() {
    end_is_what_the_caller_saw(Misbehaviour::OversizedHeaders, Code::Internal).await;
}

#[tokio::test]
async fn goaway_enhance_your_calm_ends_resource_exhausted() {
    end_is_what_the_caller_saw(Misbehaviour::GoAwayCalm, Code::ResourceExhausted).await;
}

#[tokio::test]
async fn rst_stream_cancel_ends_cancelled() {
    end_is_what_the_caller_saw(Misbehaviour::ResetCancel, Code::Cancelled).await;
}

#[tokio::test]
async fn truncated_message_then_status_ok_ends_internal() {
    let error = end_is_what_the_caller_saw(Misbehaviour::Respond(TRUNCATED), Code::Internal).await;
    let expected = RpcError::Frame {
        direction: Direction::Inbound,
        error: FrameError::Truncated { missing: 7 },
    };
    assert_eq!(error, Some(expected));
}

#[tokio::test]
async fn bad_compressed_flag_ends_internal() {
    let error = end_is_what_the_caller_saw(Misbehaviour::Respond(BAD_FLAG), Code::Internal).await;
    let expected = RpcError::Frame {
        direction: Direction::Inbound,
        error: FrameError::BadFlag(2),
    };
    assert_eq!(error, Some(expected));
}

#[tokio::test]
async fn four_gib_length_prefix_ends_out_of_range_without_a_payload_event() {
    let addr = misbehaving_server(Misbehaviour::Respond(FOUR_GIB)).await;
    let (log, mut client) = client(addr).await;
    let status = client.unary_echo(request("hi")).await.unwrap_err();
    assert_eq!(status.code(), Code::OutOfRange, "{status:?}");
    let ends = log.wait_for_ends(1).await;
    let expected = RpcError::Frame {
        direction: Direction::Inbound,
        error: FrameError::TooLong {
            length: u32::MAX,
            limit: 4 * 1024 * 1024,
        },
    };
    assert_eq!(ends, [(Code::OutOfRange, Some(expected))]);
    assert_eq!(
        log.payloads(),
        [] as [u32; 0],
        "no payload for a message that never came"
    );
}

/// A cut connection is `Unavailable`, as in grpc-go (tonic itself hands
/// the caller `Unknown` "h2 protocol error: ... connection reset" or
/// similar): `End` says `Unavailable`, whatever the caller's code.
#[tokio::test]
async fn cut_connection_ends_unavailable() {
    for misbehaviour in [
        Misbehaviour::CutBeforeHeaders,
        Misbehaviour::CutAfterHeaders,
    ] {
        let (caller, (end, error)) = unary_against(misbehaviour).await;
        eprintln!("{misbehaviour:?}: caller {caller:?}, End {end:?} {error:?}");
        assert_eq!(end, Code::Unavailable, "{misbehaviour:?}: {error:?}");
    }
}

// ---- item 7 on the server: a 4 GiB prefix in a 15-byte request ----

#[tokio::test]
async fn four_gib_request_prefix_gives_no_payload_event_on_the_server() {
    let log = Arc::new(Log::default());
    let (addr, incoming) = support::bind().await;
    tokio::spawn(
        Server::builder()
            .layer(CombinedLayer::server().with(Arc::clone(&log)))
            .add_service(EchoServer::new(EchoService))
            .serve_with_incoming(incoming),
    );
    // A raw h2 client sends the 15 bytes as the request body.
    let socket = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut h2, connection) = h2::client::handshake(socket).await.unwrap();
    tokio::spawn(connection);
    let request = http::Request::builder()
        .method("POST")
        .uri(format!("http://{addr}/hotpath.echo.Echo/UnaryEcho"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let (response, mut body) = h2.send_request(request, false).unwrap();
    body.send_data(Bytes::from_static(FOUR_GIB), true).unwrap();
    let response = response.await.unwrap();
    let status = response.headers().get("grpc-status").unwrap();
    assert_eq!(status, &(Code::OutOfRange as i32).to_string());
    let ends = log.wait_for_ends(1).await;
    assert_eq!(log.payloads(), [] as [u32; 0]);
    let (code, error) = &ends[0];
    assert_eq!(*code, Code::OutOfRange, "what tonic answered");
    assert!(
        matches!(
            error,
            Some(RpcError::Frame {
                direction: Direction::Inbound,
                error: FrameError::TooLong {
                    length: u32::MAX,
                    ..
                }
            })
        ),
        "{error:?}"
    );
}

// ---- deadlines ----

/// Unary sleeps 10 s; server streaming sends one message, then nothing
/// for 10 s; client streaming reads its request stream to the end.
#[derive(Debug, Clone, Copy)]
struct Slow;

#[tonic::async_trait]
impl EchoOverride for Slow {
    async fn unary(&self, _: Request<EchoRequest>) -> Result<Response<EchoResponse>, Status> {
        tokio::time::sleep(Duration::from_secs(10)).await;
        Err(Status::internal("too late"))
    }

    async fn server_streaming(
        &self,
        _: Request<EchoRequest>,
    ) -> Result<Response<ResponseStream>, Status> {
        let first = tokio_stream::once(Ok(EchoResponse {
            message: "first".to_owned(),
        }));
        let stall = tokio_stream::pending();
        Ok(Response::new(Box::pin(first.chain(stall))))
    }
}

/// A server with `echo` behind a server layer and a client, each logging.
async fn pair<E: Echo>(echo: E) -> (Arc<Log>, Arc<Log>, Client) {
    let server_log = Arc::new(Log::default());
    let (addr, incoming) = support::bind().await;
    let layer: CombinedLayer<Arc<Log>, ServerSide> =
        CombinedLayer::server().with(Arc::clone(&server_log));
    tokio::spawn(
        Server::builder()
            // h2's guard against rapid resets closes a connection (GOAWAY)
            // once 20 streams the client reset wait to be accepted: a
            // loaded machine reaches it when a test cancels dozens of
            // calls at once, and the calls still open fail with a broken
            // pipe. The tests here cancel on purpose: no guard.
            .http2_max_pending_accept_reset_streams(Some(usize::MAX))
            .layer(layer)
            .add_service(EchoServer::new(echo))
            .serve_with_incoming(incoming),
    );
    let (client_log, client) = client(addr).await;
    (server_log, client_log, client)
}

#[tokio::test]
async fn unary_deadline_ends_deadline_exceeded_on_the_client() {
    let (server_log, client_log, mut client) = pair(Slow).await;
    let mut call = Request::new(request("sleep"));
    call.set_timeout(Duration::from_millis(100));
    let status = client.unary_echo(call).await.unwrap_err();
    // tonic hands the caller `Cancelled` ("Timeout expired"); grpc-go
    // reports the deadline.
    assert_eq!(status.code(), Code::Cancelled, "{status:?}");
    let client_end = client_log.wait_for_ends(1).await;
    assert_eq!(client_end[0].0, Code::DeadlineExceeded);
    let server_end = server_log.wait_for_ends(1).await;
    // The server's own timer and the client's reset race (in grpc-go too):
    // the server ends `DeadlineExceeded` when its timer fires first,
    // `Cancelled` when the client's reset arrives first.
    assert!(
        matches!(server_end[0].0, Code::DeadlineExceeded | Code::Cancelled),
        "{server_end:?}"
    );
}

/// A streaming call the client gives up on once its deadline has passed
/// (tonic enforces deadlines only up to the response headers; here the
/// application does, after the deadline, as grpc-go's context would):
/// `DeadlineExceeded` on both sides.
#[tokio::test]
async fn streaming_deadline_ends_deadline_exceeded_on_both_sides() {
    let (server_log, client_log, mut client) = pair(Slow).await;
    let mut call = Request::new(request("x"));
    call.set_timeout(Duration::from_millis(100));
    let mut stream = client
        .server_streaming_echo(call)
        .await
        .unwrap()
        .into_inner();
    assert_eq!(stream.next().await.unwrap().unwrap().message, "first");
    let stalled = tokio::time::timeout(Duration::from_millis(250), stream.next()).await;
    assert!(stalled.is_err(), "the server sends nothing more");
    drop(stream);
    let client_end = client_log.wait_for_ends(1).await;
    assert_eq!(client_end[0].0, Code::DeadlineExceeded);
    let server_end = server_log.wait_for_ends(1).await;
    assert_eq!(server_end[0].0, Code::DeadlineExceeded);
}

// ---- item 5: a client cancel is `Cancelled` on the server ----

/// Cancels `ROUNDS` calls of each kind mid-stream (the client drops the
/// call while the server is still reading its request, running its
/// handler or writing its response): every server `End` is `Cancelled`,
/// never the status tonic writes to the already reset stream ("Missing
/// request message.", or OK from a handler whose request stream tonic
/// ended cleanly on the reset). (Not bidi: a tonic client that drops a bidi
/// response while its request stream is still open does not reset the
/// stream, so the server sees no cancel.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_cancelled_call_ends_cancelled_on_the_server() {
    const ROUNDS: usize = 30;
    let (server_log, _client_log, client) = pair(Slow).await;
    let mut calls = tokio::task::JoinSet::new();
    for round in 0..ROUNDS {
        // Client streaming: one message, then the request stream stalls.
        let mut c = client.clone();
        calls.spawn(async move {
            let requests = tokio_stream::once(request("a")).chain(tokio_stream::pending());
            let call = c.client_streaming_echo(requests);
            let _ = tokio::time::timeout(Duration::from_millis(20 + round as u64 % 7), call).await;
        });
        // Server streaming: the first message, then the call is dropped.
        let mut c = client.clone();
        calls.spawn(async move {
            let mut replies = c
                .server_streaming_echo(request("c"))
                .await
                .unwrap()
                .into_inner();
            assert_eq!(replies.next().await.unwrap().unwrap().message, "first");
        });
        // Unary: dropped while the handler sleeps.
        let mut c = client.clone();
        calls.spawn(async move {
            let call = c.unary_echo(request("d"));
            let _ = tokio::time::timeout(Duration::from_millis(10 + round as u64 % 5), call).await;
        });
    }
    while let Some(joined) = calls.join_next().await {
        joined.unwrap();
    }
    // Under load a call dropped after 10-20 ms may never reach the server
    // (nothing to report there); every call that did must end Cancelled.
    // The server-streaming calls always reach it (their first reply is read).
    let ends = server_log.wait_until_all_ended().await;
    assert!(ends.len() >= ROUNDS, "{} Ends: {ends:?}", ends.len());
    let not_cancelled: Vec<_> = ends
        .iter()
        .filter(|(code, _)| *code != Code::Cancelled)
        .collect();
    assert!(not_cancelled.is_empty(), "{not_cancelled:?}");
}
