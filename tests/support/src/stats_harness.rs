//! Shared by the stats allocation tests and benches: a no-op handler, the
//! per-thread counting allocator, and the server stack driven in process (tonic
//! `Routes` + layers, a real gRPC request body, the response body driven
//! to its trailers).

use bytes::{BufMut, Bytes, BytesMut};
use http::{Request, Response};
use http_body::Body;
use http_body_util::BodyExt;
use prost::Message;
use tonic_hotpath::stats::StatsHandler;
use tower::{Service, ServiceExt};

use crate::EchoRequest;

/// A handler that observes nothing (every method is the no-op default)
/// and so asks for no payload times.
#[derive(Debug, Default, Clone, Copy)]
pub struct Noop;

impl StatsHandler for Noop {
    type RpcState = ();
    type ConnState = ();
    const PAYLOAD_TIMES: bool = false;
}

/// A no-op handler that keeps the default: payload events carry times.
#[derive(Debug, Default, Clone, Copy)]
pub struct Timed;

impl StatsHandler for Timed {
    type RpcState = ();
    type ConnState = ();
}

use crate::alloc_count::allocations_so_far;

/// The unary echo path.
pub const UNARY_PATH: &str = "/hotpath.echo.Echo/UnaryEcho";

/// One length-prefixed `EchoRequest` as a gRPC request body.
pub fn unary_body(message: &str) -> Bytes {
    let request = EchoRequest {
        message: message.to_owned(),
    };
    let mut wire = BytesMut::with_capacity(5 + request.encoded_len());
    wire.put_u8(0);
    wire.put_u32(request.encoded_len() as u32);
    request
        .encode(&mut wire)
        .expect("encode into a sized buffer");
    wire.freeze()
}

/// A unary echo request as tonic's server hands it to user layers.
pub fn unary_request(body: &Bytes) -> Request<tonic::body::Body> {
    Request::builder()
        .method(http::Method::POST)
        .uri(UNARY_PATH)
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(tonic::body::Body::new(http_body_util::Full::new(
            body.clone(),
        )))
        .expect("valid request")
}

/// Calls `service` with `request` and drives the response body to its end;
/// returns the `grpc-status` from the headers (trailers-only) or trailers.
pub async fn call_in_process<S, B>(service: &S, request: Request<tonic::body::Body>) -> Option<i32>
where
    S: Service<Request<tonic::body::Body>, Response = Response<B>> + Clone,
    S::Error: std::fmt::Debug,
    B: Body,
    B::Error: std::fmt::Debug,
{
    let response = service
        .clone()
        .oneshot(request)
        .await
        .expect("in-process call");
    let (parts, body) = response.into_parts();
    let collected = body.collect().await.expect("response body");
    let status = match parts.headers.get("grpc-status") {
        Some(status) => status,
        None => collected.trailers()?.get("grpc-status")?,
    };
    status.to_str().ok()?.parse().ok()
}

/// Allocations per call of `one`: after a warm-up, the least of three runs
/// of `calls` calls, so one-off allocations elsewhere in the process (lazy
/// runtime initialisation) do not count. Counts this thread: run the
/// calls on a current-thread runtime, as the tests and benches do.
pub async fn allocations_per_call<F: std::future::Future>(
    calls: u64,
    mut one: impl FnMut() -> F,
) -> f64 {
    for _ in 0..calls.min(50) {
        one().await;
    }
    let mut least = f64::MAX;
    for _ in 0..3 {
        let before = allocations_so_far();
        for _ in 0..calls {
            one().await;
        }
        least = least.min((allocations_so_far() - before) as f64 / calls as f64);
    }
    least
}

/// Allocations per in-process unary echo RPC through `service` (counted as
/// [`allocations_per_call`] does); every RPC must end with status OK.
pub async fn allocations_per_in_process_rpc<S, B>(service: &S, calls: u64) -> f64
where
    S: Service<Request<tonic::body::Body>, Response = Response<B>> + Clone,
    S::Error: std::fmt::Debug,
    B: Body,
    B::Error: std::fmt::Debug,
{
    let body = unary_body("hello");
    allocations_per_call(calls, || {
        let request = unary_request(&body);
        async move { assert_eq!(call_in_process(service, request).await, Some(0)) }
    })
    .await
}

/// One unary echo RPC through `client`.
pub async fn one_rpc<T>(mut client: crate::EchoClient<T>)
where
    T: tonic::client::GrpcService<tonic::body::Body>,
    T::Error: Into<tonic::codegen::StdError>,
    T::ResponseBody: Body<Data = Bytes> + Send + 'static,
    <T::ResponseBody as Body>::Error: Into<tonic::codegen::StdError> + Send,
{
    let request = EchoRequest {
        message: "hello".to_owned(),
    };
    let reply = client.unary_echo(request).await.expect("rpc");
    std::hint::black_box(reply);
}

/// `CombinedLayer::server()` / `::client()` with 1, 2 or 8 [`Noop`]
/// handlers, or (`stacked`) two one-handler layers stacked the naive way.
#[macro_export]
macro_rules! combined {
    ($side:ident, 1) => {
        ::tonic_hotpath::stats::CombinedLayer::$side().with($crate::stats_harness::Noop)
    };
    ($side:ident, 2) => {
        $crate::combined!($side, 1).with($crate::stats_harness::Noop)
    };
    ($side:ident, 8) => {
        $crate::combined!($side, 2)
            .with($crate::stats_harness::Noop)
            .with($crate::stats_harness::Noop)
            .with($crate::stats_harness::Noop)
            .with($crate::stats_harness::Noop)
            .with($crate::stats_harness::Noop)
            .with($crate::stats_harness::Noop)
    };
    ($side:ident, stacked) => {
        ::tower::layer::util::Stack::new($crate::combined!($side, 1), $crate::combined!($side, 1))
    };
}

/// An echo server with `$server_layer` on 127.0.0.1 and an `EchoClient`
/// over a `Channel` wrapped in `$client_layer` (an async block).
#[macro_export]
macro_rules! loopback_client {
    ($server_layer:expr, $client_layer:expr $(,)?) => {
        async {
            let (addr, incoming) = $crate::bind().await;
            tokio::spawn(
                ::tonic::transport::Server::builder()
                    .layer($server_layer)
                    .add_service($crate::EchoServer::new($crate::EchoService))
                    .serve_with_incoming(incoming),
            );
            let channel = $crate::connect(addr).await;
            let layered = ::tower::ServiceBuilder::new()
                .layer($client_layer)
                .service(channel);
            $crate::EchoClient::new(layered)
        }
    };
}

/// A current-thread runtime with I/O and timers: client and server on one
/// CPU, so cross-CPU wake-ups do not swamp per-layer costs.
pub fn current_thread_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// `layer` over the echo service's `Routes`: the server stack as tonic
/// builds it below its own layers.
pub fn layered_echo_routes<L>(layer: L) -> L::Service
where
    L: tower::Layer<tonic::service::Routes>,
{
    layer.layer(tonic::service::Routes::new(crate::EchoServer::new(
        crate::EchoService,
    )))
}

/// The echo routes standing in for a client `Channel` (their error boxed,
/// as a `ClientTransport` needs), for the client layer in process.
pub fn echo_transport() -> impl Service<
    Request<tonic::body::Body>,
    Response = Response<tonic::body::Body>,
    Error = tonic::codegen::StdError,
    Future: Send,
> + Clone
+ Send {
    ServiceExt::<Request<tonic::body::Body>>::map_err(
        layered_echo_routes(tower::layer::util::Identity::new()),
        tonic::codegen::StdError::from,
    )
}

/// A real TCP connection made by `layer.connector()` to a listener on
/// 127.0.0.1, with its accepted end: while the pair is kept, it is the
/// layer's current connection and every RPC of the layer reads it.
pub async fn open_linked_connection<H: StatsHandler>(
    layer: &tonic_hotpath::stats::CombinedLayer<H, tonic_hotpath::stats::ClientSide>,
) -> (
    tonic_hotpath::stats::StatsIo<hyper_util::rt::TokioIo<tokio::net::TcpStream>, H>,
    tokio::net::TcpStream,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let uri = format!("http://{}", listener.local_addr().expect("addr"));
    let mut connector = layer.connector();
    let (io, accepted) = tokio::join!(connector.call(uri.parse().expect("uri")), listener.accept());
    (io.expect("connect"), accepted.expect("accept").0)
}

/// An echo client over loopback with the connection linked on both sides:
/// a server with `server`'s layer serving from the layer's incoming stream,
/// a channel made by `client`'s layer's connector (so each side's handlers
/// see their connection's state in every RPC).
pub async fn linked_loopback_client<S: StatsHandler, C: StatsHandler>(
    server: S,
    client: C,
) -> crate::EchoClient<
    tonic_hotpath::stats::CombinedService<
        tonic::transport::Channel,
        C,
        tonic_hotpath::stats::ClientSide,
    >,
> {
    let server_layer = tonic_hotpath::stats::CombinedLayer::server().with(server);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(
        tonic::transport::Server::builder()
            .layer(server_layer.clone())
            .add_service(crate::EchoServer::new(crate::EchoService))
            .serve_with_incoming(server_layer.incoming_tcp(listener)),
    );
    let client_layer = tonic_hotpath::stats::CombinedLayer::client().with(client);
    let channel = crate::endpoint(addr)
        .connect_with_connector(client_layer.connector())
        .await
        .expect("connect");
    crate::EchoClient::new(
        tower::ServiceBuilder::new()
            .layer(client_layer)
            .service(channel),
    )
}
