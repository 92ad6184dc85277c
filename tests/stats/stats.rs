//! `CombinedLayer` on a real tonic server and client over 127.0.0.1: the
//! exact event sequences for every RPC kind, errors, deadlines,
//! cancellation, handler counts and connection events.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prost::Message;
use support::{
    Echo, EchoClient, EchoOverride, EchoRequest, EchoResponse, EchoServer, EchoService,
    ResponseStream, wait_until,
};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Channel, Server};
use tonic::{Code, Request, Response, Status};
use tonic_hotpath::stats::{
    ClientSide, CombinedLayer, CombinedService, ConnEvent, ConnInfo, RpcEvent, RpcInfo, ServerSide,
    Side, StatsHandler,
};
use tower::ServiceBuilder;

/// A simplified event, comparable across runs.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ev {
    Begin,
    InHeader,
    OutHeader,
    InPayload(u32),
    OutPayload(u32),
    InTrailer,
    OutTrailer,
    End(Code, String),
}

impl Ev {
    fn is_inbound(&self) -> bool {
        matches!(self, Ev::InHeader | Ev::InPayload(_) | Ev::InTrailer)
    }

    fn is_outbound(&self) -> bool {
        matches!(self, Ev::OutHeader | Ev::OutPayload(_) | Ev::OutTrailer)
    }
}

/// Tagged RPC: (method, side, connection id given to `tag_rpc`, peer).
type Tagged = (String, Side, Option<u64>, Option<SocketAddr>);

/// Records every event, grouped by RPC id (its per-RPC state).
#[derive(Debug, Default)]
struct Recorder {
    next_rpc: AtomicU64,
    next_conn: AtomicU64,
    events: Mutex<Vec<(u64, Ev)>>,
    tagged: Mutex<BTreeMap<u64, Tagged>>,
    conns: Mutex<Vec<(u64, &'static str)>>,
}

impl StatsHandler for Recorder {
    type RpcState = u64;
    type ConnState = u64;

    fn tag_rpc(&self, info: &RpcInfo<'_>, conn: Option<&u64>) -> u64 {
        let id = self.next_rpc.fetch_add(1, Ordering::SeqCst);
        let tag = (
            info.method.to_owned(),
            info.side,
            conn.copied(),
            info.peer_addr,
        );
        self.tagged.lock().unwrap().insert(id, tag);
        id
    }

    fn handle_rpc(&self, id: &mut u64, event: &RpcEvent<'_>) {
        let ev = match event {
            RpcEvent::Begin { .. } => Ev::Begin,
            RpcEvent::InHeader(_) => Ev::InHeader,
            RpcEvent::OutHeader(_) => Ev::OutHeader,
            RpcEvent::InPayload(p) => {
                let length = p.length.expect("sent uncompressed");
                assert_eq!(p.wire_length, u64::from(length) + 5);
                Ev::InPayload(length)
            }
            RpcEvent::OutPayload(p) => Ev::OutPayload(p.length.expect("sent uncompressed")),
            RpcEvent::InTrailer(_) => Ev::InTrailer,
            RpcEvent::OutTrailer(_) => Ev::OutTrailer,
            RpcEvent::End(end) => {
                assert!(end.end_time >= end.begin_time);
                Ev::End(end.code, end.message.to_owned())
            }
            other => panic!("an event this test does not know: {other:?}"),
        };
        self.events.lock().unwrap().push((*id, ev));
    }

    fn tag_conn(&self, _info: &ConnInfo) -> u64 {
        self.next_conn.fetch_add(1, Ordering::SeqCst)
    }

    fn handle_conn(&self, id: &u64, event: &ConnEvent) {
        let kind = match event {
            ConnEvent::Begin { .. } => "begin",
            ConnEvent::End { .. } => "end",
            other => panic!("a connection event this test does not know: {other:?}"),
        };
        self.conns.lock().unwrap().push((*id, kind));
    }
}

impl Recorder {
    /// Events per RPC, in order.
    fn rpcs(&self) -> Vec<Vec<Ev>> {
        let mut by_rpc: BTreeMap<u64, Vec<Ev>> = BTreeMap::new();
        for (id, ev) in self.events.lock().unwrap().iter() {
            by_rpc.entry(*id).or_default().push(ev.clone());
        }
        by_rpc.into_values().collect()
    }

    fn ended(&self) -> usize {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, ev)| matches!(ev, Ev::End(..)))
            .count()
    }

    fn conn_events(&self) -> Vec<(u64, &'static str)> {
        self.conns.lock().unwrap().clone()
    }
}

/// Serves `echo` behind `layer`, with connection events from the same handler.
async fn spawn_server<H, E>(layer: CombinedLayer<H, ServerSide>, echo: E) -> SocketAddr
where
    H: StatsHandler,
    E: Echo,
{
    let (addr, incoming) = support::bind().await;
    let incoming = layer.incoming(incoming);
    tokio::spawn(
        Server::builder()
            .layer(layer)
            .add_service(EchoServer::new(echo))
            .serve_with_incoming(incoming),
    );
    addr
}

type Client<H> = EchoClient<CombinedService<Channel, H, tonic_hotpath::stats::ClientSide>>;

/// A client over a `Channel` whose connector (the layer's) reports
/// connection events.
async fn client<H: StatsHandler>(
    addr: SocketAddr,
    layer: CombinedLayer<H, ClientSide>,
) -> Client<H> {
    let channel = support::endpoint(addr)
        .connect_with_connector(layer.connector())
        .await
        .expect("connect");
    EchoClient::new(ServiceBuilder::new().layer(layer).service(channel))
}

fn request(message: &str) -> EchoRequest {
    EchoRequest {
        message: message.to_owned(),
    }
}

fn len_of(message: &str) -> u32 {
    request(message).encoded_len() as u32
}

fn ok() -> Ev {
    Ev::End(Code::Ok, String::new())
}

/// One server and one client, each with one recorder.
async fn pair<E: Echo>(echo: E) -> (Arc<Recorder>, Arc<Recorder>, Client<Arc<Recorder>>) {
    let server = Arc::new(Recorder::default());
    let client_rec = Arc::new(Recorder::default());
    let addr = spawn_server(CombinedLayer::server().with(Arc::clone(&server)), echo).await;
    let client = client(addr, CombinedLayer::client().with(Arc::clone(&client_rec))).await;
    (server, client_rec, client)
}

/// What an RPC carried, for building the exact expected event sequences.
struct Expect<'a> {
    /// Lengths of the request messages, in order.
    requests: &'a [u32],
    /// Lengths of the response messages, in order.
    responses: &'a [u32],
    /// `false` for a trailers-only response.
    response_headers: bool,
    end: Ev,
}

impl Expect<'_> {
    /// grpc-go's server order: InHeader, Begin, InPayload*, OutHeader,
    /// OutPayload*, OutTrailer, End.
    fn server(&self) -> Vec<Ev> {
        let mut events = vec![Ev::InHeader, Ev::Begin];
        events.extend(self.requests.iter().map(|&l| Ev::InPayload(l)));
        events.extend(self.response_headers.then_some(Ev::OutHeader));
        events.extend(self.responses.iter().map(|&l| Ev::OutPayload(l)));
        events.extend([Ev::OutTrailer, self.end.clone()]);
        events
    }

    /// grpc-go's client order: Begin, OutHeader, OutPayload*, InHeader,
    /// InPayload*, InTrailer, End.
    fn client(&self) -> Vec<Ev> {
        let mut events = vec![Ev::Begin, Ev::OutHeader];
        events.extend(self.requests.iter().map(|&l| Ev::OutPayload(l)));
        events.extend(self.response_headers.then_some(Ev::InHeader));
        events.extend(self.responses.iter().map(|&l| Ev::InPayload(l)));
        events.extend([Ev::InTrailer, self.end.clone()]);
        events
    }

    /// Waits for both sides' `End`, then checks each side's exact sequence.
    async fn check(&self, server: &Recorder, client: &Recorder) {
        wait_until("server End", || server.ended() == 1).await;
        wait_until("client End", || client.ended() == 1).await;
        assert_eq!(server.rpcs(), [self.server()]);
        assert_eq!(client.rpcs(), [self.client()]);
    }
}

#[tokio::test]
async fn unary_event_sequence_on_both_sides() {
    let (server, client_rec, mut client) = pair(EchoService).await;
    let reply = client.unary_echo(request("hello")).await.unwrap();
    assert_eq!(reply.into_inner().message, "hello");
    let n = len_of("hello");
    Expect {
        requests: &[n],
        responses: &[n],
        response_headers: true,
        end: ok(),
    }
    .check(&server, &client_rec)
    .await;
    let tagged = server.tagged.lock().unwrap().clone();
    let (method, side, conn, peer) = tagged[&0].clone();
    assert_eq!(method, "/hotpath.echo.Echo/UnaryEcho");
    assert_eq!(side, Side::Server);
    assert_eq!(conn, Some(0), "tag_rpc sees the connection's state");
    assert!(peer.is_some_and(|p| p.ip().is_loopback()));
    let client_tag = client_rec.tagged.lock().unwrap()[&0].clone();
    assert_eq!(client_tag.0, "/hotpath.echo.Echo/UnaryEcho");
    assert_eq!(client_tag.1, Side::Client);
    assert_eq!(client_tag.2, Some(0), "client tag_rpc sees the connection");
    assert!(
        client_tag
            .3
            .is_some_and(|p| p.ip().is_loopback() && p.port() != 0)
    );
}

#[tokio::test]
async fn server_streaming_event_sequence() {
    let (server, client_rec, mut client) = pair(EchoService).await;
    let mut stream = client
        .server_streaming_echo(request("a bb ccc"))
        .await
        .unwrap()
        .into_inner();
    let mut words = Vec::new();
    while let Some(reply) = stream.next().await {
        words.push(reply.unwrap().message);
    }
    assert_eq!(words, ["a", "bb", "ccc"]);
    Expect {
        requests: &[len_of("a bb ccc")],
        responses: &[len_of("a"), len_of("bb"), len_of("ccc")],
        response_headers: true,
        end: ok(),
    }
    .check(&server, &client_rec)
    .await;
}

#[tokio::test]
async fn client_streaming_event_sequence() {
    let (server, client_rec, mut client) = pair(EchoService).await;
    let messages = ["x", "yy", "zzz"];
    let outbound = tokio_stream::iter(messages.map(request));
    let reply = client.client_streaming_echo(outbound).await.unwrap();
    assert_eq!(reply.into_inner().message, "x yy zzz");
    let sent: Vec<u32> = messages.iter().map(|m| len_of(m)).collect();
    Expect {
        requests: &sent,
        responses: &[len_of("x yy zzz")],
        response_headers: true,
        end: ok(),
    }
    .check(&server, &client_rec)
    .await;
}

/// Bidi interleaving follows real timing: check each direction's order and
/// the overall invariants.
fn assert_bidi(events: &[Ev], side: Side, sent: &[u32], received: &[u32]) {
    // grpc-go: the server's InHeader comes before Begin.
    let first = match side {
        Side::Server => [Ev::InHeader, Ev::Begin],
        Side::Client => [Ev::Begin, Ev::OutHeader],
    };
    assert_eq!(events[..2], first);
    assert_eq!(events.last(), Some(&ok()));
    assert_eq!(
        events.iter().filter(|e| matches!(e, Ev::End(..))).count(),
        1
    );
    let inbound: Vec<Ev> = events.iter().filter(|e| e.is_inbound()).cloned().collect();
    let outbound: Vec<Ev> = events.iter().filter(|e| e.is_outbound()).cloned().collect();
    let (recv_payloads, sent_payloads): (Vec<Ev>, Vec<Ev>) = (
        received.iter().map(|&l| Ev::InPayload(l)).collect(),
        sent.iter().map(|&l| Ev::OutPayload(l)).collect(),
    );
    match side {
        Side::Server => {
            assert_eq!(inbound[0], Ev::InHeader);
            assert_eq!(inbound[1..], recv_payloads[..]);
            assert_eq!(outbound[0], Ev::OutHeader);
            assert_eq!(outbound[1..outbound.len() - 1], sent_payloads[..]);
            assert_eq!(outbound.last(), Some(&Ev::OutTrailer));
        }
        Side::Client => {
            assert_eq!(outbound[0], Ev::OutHeader);
            assert_eq!(outbound[1..], sent_payloads[..]);
            assert_eq!(inbound[0], Ev::InHeader);
            assert_eq!(inbound[1..inbound.len() - 1], recv_payloads[..]);
            assert_eq!(inbound.last(), Some(&Ev::InTrailer));
        }
    }
}

#[tokio::test]
async fn bidi_event_order_per_direction() {
    let (server, client_rec, mut client) = pair(EchoService).await;
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let mut replies = client
        .bidirectional_streaming_echo(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let messages = ["one", "two2", "three"];
    for message in messages {
        tx.send(request(message)).await.unwrap();
        let reply = replies.next().await.unwrap().unwrap();
        assert_eq!(reply.message, message);
    }
    drop(tx);
    assert!(replies.next().await.is_none());
    wait_until("server End", || server.ended() == 1).await;
    wait_until("client End", || client_rec.ended() == 1).await;
    let lens: Vec<u32> = messages.iter().map(|m| len_of(m)).collect();
    assert_bidi(&server.rpcs()[0], Side::Server, &lens, &lens);
    assert_bidi(&client_rec.rpcs()[0], Side::Client, &lens, &lens);
}

/// Unary answers `NotFound` (trailers-only; "sleep" first waits 10 s);
/// server streaming sends one message and then fails with `NotFound`
/// (status in trailers), or for "forever" sends "tick" every 5 ms forever.
#[derive(Debug, Clone, Copy)]
struct Failing;

#[tonic::async_trait]
impl EchoOverride for Failing {
    async fn unary(&self, request: Request<EchoRequest>) -> Result<Response<EchoResponse>, Status> {
        if request.get_ref().message == "sleep" {
            tokio::time::sleep(Duration::from_secs(10)).await;
        }
        Err(Status::not_found("no such echo"))
    }

    async fn server_streaming(
        &self,
        request: Request<EchoRequest>,
    ) -> Result<Response<ResponseStream>, Status> {
        if request.get_ref().message == "forever" {
            let ticks = tokio_stream::wrappers::IntervalStream::new(tokio::time::interval(
                Duration::from_millis(5),
            ))
            .map(|_| {
                Ok(EchoResponse {
                    message: "tick".to_owned(),
                })
            });
            return Ok(Response::new(Box::pin(ticks)));
        }
        let items = vec![
            Ok(EchoResponse {
                message: "first".to_owned(),
            }),
            Err(Status::not_found("gone midway")),
        ];
        Ok(Response::new(Box::pin(tokio_stream::iter(items))))
    }
}

#[tokio::test]
async fn trailers_only_not_found_on_both_sides() {
    let (server, client_rec, mut client) = pair(Failing).await;
    let status = client.unary_echo(request("hi")).await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    Expect {
        requests: &[len_of("hi")],
        responses: &[],
        response_headers: false,
        end: Ev::End(Code::NotFound, "no such echo".to_owned()),
    }
    .check(&server, &client_rec)
    .await;
}

#[tokio::test]
async fn not_found_in_trailers_after_a_message() {
    let (server, client_rec, mut client) = pair(Failing).await;
    let mut stream = client
        .server_streaming_echo(request("x"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(stream.next().await.unwrap().unwrap().message, "first");
    let status = stream.next().await.unwrap().unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    drop(stream);
    Expect {
        requests: &[len_of("x")],
        responses: &[len_of("first")],
        response_headers: true,
        end: Ev::End(Code::NotFound, "gone midway".to_owned()),
    }
    .check(&server, &client_rec)
    .await;
}

#[tokio::test]
async fn deadline_exceeded_ends_once_on_both_sides() {
    let (server, client_rec, mut client) = pair(Failing).await;
    let mut call = Request::new(request("sleep"));
    call.set_timeout(Duration::from_millis(100));
    let status = client.unary_echo(call).await.unwrap_err();
    // tonic's client reports its own timeout as `Cancelled("Timeout expired")`.
    assert!(
        matches!(status.code(), Code::Cancelled | Code::DeadlineExceeded),
        "{status:?}"
    );
    wait_until("server End", || server.ended() == 1).await;
    wait_until("client End", || client_rec.ended() == 1).await;
    let client_events = &client_rec.rpcs()[0];
    assert_eq!(
        client_events[..3],
        [Ev::Begin, Ev::OutHeader, Ev::OutPayload(len_of("sleep"))]
    );
    assert!(
        matches!(
            client_events.last(),
            Some(Ev::End(Code::DeadlineExceeded, _))
        ),
        "{client_events:?}"
    );
    let server_events = &server.rpcs()[0];
    assert!(
        matches!(
            server_events.last(),
            Some(Ev::End(Code::DeadlineExceeded | Code::Cancelled, _))
        ),
        "{server_events:?}"
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(server.ended(), 1);
    assert_eq!(client_rec.ended(), 1);
}

#[tokio::test]
async fn client_dropping_mid_stream_gives_one_cancelled_server_end() {
    let (server, client_rec, mut client) = pair(Failing).await;
    let mut ticks = client
        .server_streaming_echo(request("forever"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ticks.next().await.unwrap().unwrap().message, "tick");
    assert_eq!(ticks.next().await.unwrap().unwrap().message, "tick");
    // Drop the call while the server is still streaming.
    drop(ticks);
    wait_until("server End", || server.ended() == 1).await;
    wait_until("client End", || client_rec.ended() == 1).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(server.ended(), 1);
    assert_eq!(client_rec.ended(), 1);
    assert_eq!(server.rpcs()[0][..2], [Ev::InHeader, Ev::Begin]);
    assert_eq!(client_rec.rpcs()[0][..2], [Ev::Begin, Ev::OutHeader]);
    for events in [&server.rpcs()[0], &client_rec.rpcs()[0]] {
        assert!(
            matches!(events.last(), Some(Ev::End(Code::Cancelled, _))),
            "{events:?}"
        );
        assert!(!events.contains(&Ev::OutTrailer) && !events.contains(&Ev::InTrailer));
    }
}

/// Runs the same RPCs through a server and client layer built by `stack`,
/// returning each handler's per-RPC events for the server and client.
async fn run_with<HS: StatsHandler, HC: StatsHandler>(
    server_layer: CombinedLayer<HS, ServerSide>,
    client_layer: CombinedLayer<HC, ClientSide>,
    expected_ends: &[&Arc<Recorder>],
) {
    let addr = spawn_server(server_layer, EchoService).await;
    let mut client = client(addr, client_layer).await;
    client.unary_echo(request("same")).await.unwrap();
    let mut stream = client
        .server_streaming_echo(request("p q"))
        .await
        .unwrap()
        .into_inner();
    while stream.next().await.is_some() {}
    for recorder in expected_ends {
        wait_until("both RPCs ended", || recorder.ended() == 2).await;
    }
}

#[tokio::test]
async fn one_two_and_eight_handlers_see_identical_events() {
    let reference_server = Arc::new(Recorder::default());
    let reference_client = Arc::new(Recorder::default());
    run_with(
        CombinedLayer::server().with(Arc::clone(&reference_server)),
        CombinedLayer::client().with(Arc::clone(&reference_client)),
        &[&reference_server, &reference_client],
    )
    .await;
    let expected_server = reference_server.rpcs();
    let expected_client = reference_client.rpcs();
    assert_eq!(expected_server.len(), 2);

    let s: Vec<Arc<Recorder>> = (0..8).map(|_| Arc::new(Recorder::default())).collect();
    let c: Vec<Arc<Recorder>> = (0..8).map(|_| Arc::new(Recorder::default())).collect();
    run_with(
        CombinedLayer::server()
            .with(Arc::clone(&s[0]))
            .with(Arc::clone(&s[1])),
        CombinedLayer::client()
            .with(Arc::clone(&c[0]))
            .with(Arc::clone(&c[1])),
        &[&s[0], &s[1], &c[0], &c[1]],
    )
    .await;
    let s8: Vec<Arc<Recorder>> = (0..8).map(|_| Arc::new(Recorder::default())).collect();
    let c8: Vec<Arc<Recorder>> = (0..8).map(|_| Arc::new(Recorder::default())).collect();
    let server8 = CombinedLayer::server()
        .with(Arc::clone(&s8[0]))
        .with(Arc::clone(&s8[1]))
        .with(Arc::clone(&s8[2]))
        .with(Arc::clone(&s8[3]))
        .with(Arc::clone(&s8[4]))
        .with(Arc::clone(&s8[5]))
        .with(Arc::clone(&s8[6]))
        .with(Arc::clone(&s8[7]));
    let client8 = CombinedLayer::client()
        .with(Arc::clone(&c8[0]))
        .with(Arc::clone(&c8[1]))
        .with(Arc::clone(&c8[2]))
        .with(Arc::clone(&c8[3]))
        .with(Arc::clone(&c8[4]))
        .with(Arc::clone(&c8[5]))
        .with(Arc::clone(&c8[6]))
        .with(Arc::clone(&c8[7]));
    let all8: Vec<&Arc<Recorder>> = s8.iter().chain(c8.iter()).collect();
    run_with(server8, client8, &all8).await;

    for recorder in s[..2].iter().chain(s8.iter()) {
        assert_eq!(recorder.rpcs(), expected_server);
    }
    for recorder in c[..2].iter().chain(c8.iter()) {
        assert_eq!(recorder.rpcs(), expected_client);
    }
}

#[tokio::test]
async fn zero_handlers_leave_the_service_unchanged() {
    use tower::Layer;
    let routes = EchoServer::new(EchoService);
    // The layer's service type is the inner service itself.
    let same: EchoServer<EchoService> = CombinedLayer::server().layer(routes);
    let channel_layer = CombinedLayer::client();
    let (addr, incoming) = support::bind().await;
    tokio::spawn(
        Server::builder()
            .layer(CombinedLayer::server())
            .add_service(same)
            .serve_with_incoming(incoming),
    );
    let channel: Channel = channel_layer.layer(support::connect(addr).await);
    let reply = EchoClient::new(channel).unary_echo(request("zero")).await;
    assert_eq!(reply.unwrap().into_inner().message, "zero");
}

#[tokio::test]
async fn connection_begin_and_end_once_per_connection() {
    let server = Arc::new(Recorder::default());
    let client_rec = Arc::new(Recorder::default());
    let addr = spawn_server(
        CombinedLayer::server().with(Arc::clone(&server)),
        EchoService,
    )
    .await;
    for round in 0..2 {
        let mut c = client(addr, CombinedLayer::client().with(Arc::clone(&client_rec))).await;
        c.unary_echo(request("a")).await.unwrap();
        c.unary_echo(request("b")).await.unwrap();
        drop(c);
        let conns = round + 1;
        wait_until("server ConnEnd", || server.conn_events().len() == 2 * conns).await;
        wait_until("client ConnEnd", || {
            client_rec.conn_events().len() == 2 * conns
        })
        .await;
    }
    let expected = vec![(0, "begin"), (0, "end"), (1, "begin"), (1, "end")];
    assert_eq!(server.conn_events(), expected);
    assert_eq!(client_rec.conn_events(), expected);
    // Each RPC was tagged with its own connection's state.
    let conns: Vec<Option<u64>> = server
        .tagged
        .lock()
        .unwrap()
        .values()
        .map(|t| t.2)
        .collect();
    assert_eq!(conns, [Some(0), Some(0), Some(1), Some(1)]);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(server.conn_events().len(), 4);
}
