//! Per-call reports on the stacks users build (the `support::stacks`
//! harness): compressed messages, tonic-web with `GrpcWebLayer` outside and
//! inside `CallMetricsLayer`, mTLS, a Unix socket, and axum routes on the
//! same server. Each stack is served twice, without and with the layer;
//! the calls must differ only by the `endpoint-load-metrics-bin` trailer,
//! which carries exactly what the handler recorded and is read by the
//! client side (`LoadReports` on a client `CombinedLayer`). Faults
//! (junk, a bare proxy, cancelled streams) are in `stacks_faults.rs`.

use std::sync::{Arc, Mutex};

use axum::routing::get;
use http::HeaderMap;
use tokio_stream::StreamExt;
use tonic::service::Routes;
use tonic::transport::{Channel, Server};
use tonic::{Request, Response, Status, Streaming};
use tonic_hotpath::orca::client::{EndpointWeight, EndpointWeights, LoadReports, WeightConfig};
use tonic_hotpath::orca::server::CallMetricsLayer;
use tonic_hotpath::orca::{CallMetricsRecorder, OrcaLoadReport, ReportFormat, load_report_from};
use tonic_hotpath::stats::{ClientSide, CombinedLayer, CombinedService, RpcEvent, StatsHandler};
use tower::layer::util::Identity;

use support::stacks::compress::{ENCODINGS, compressing_client, compressing_routes};
use support::stacks::plain_http::{HttpReply, axum_routes, get_request, http1, http2, post_json};
use support::stacks::tls::{TestCerts, spawn_tls, tls_endpoint};
use support::stacks::web::{
    WebFormat, WebReply, spawn_web_layer_inside, spawn_web_layer_outside, web_unary,
};
use support::stacks::{ServerLayer, serve, spawn_echo, uds};
use support::{Echo, EchoClient, EchoOverride, EchoRequest, EchoResponse, EchoServer, EchoService};
use support::{ResponseStream, bind};

/// The echo service whose handlers take their call's recorder: every call
/// reports CPU 0.5 at 100 QPS (weight 200), its message's length as the
/// `bytes` cost and its word count as the `words` metric; a streaming
/// response records `words` item by item, as the layer's body polls it.
/// Client streaming counts its calls and their ends (for resets); the
/// streaming responses count their drops.
#[derive(Clone, Default)]
pub(crate) struct OrcaEcho {
    pub(crate) streams_begun: Arc<std::sync::atomic::AtomicUsize>,
    pub(crate) streams_ended: Arc<std::sync::atomic::AtomicUsize>,
    /// Response streams the server dropped.
    pub(crate) responses_dropped: Arc<std::sync::atomic::AtomicUsize>,
}

/// Takes the call's recorder (none without the layer) and records the
/// per-call base values.
fn record_base(message: &str) {
    if let Some(recorder) = CallMetricsRecorder::current() {
        recorder.set_cpu_utilization(0.5);
        recorder.set_qps(100.0);
        recorder.set_request_cost("bytes", message.len() as f64);
    }
}

/// Records `words` (a stream's items run as the layer's body polls it).
fn record_words(words: usize) {
    if let Some(recorder) = CallMetricsRecorder::current() {
        recorder.set_named_metric("words", words as f64);
    }
}

/// The report of a call of [`OrcaEcho`] that echoed `message` (all
/// words streamed back).
pub(crate) fn expected(message: &str) -> OrcaLoadReport {
    OrcaLoadReport {
        cpu_utilization: 0.5,
        rps_fractional: 100.0,
        request_cost: [("bytes".to_owned(), message.len() as f64)].into(),
        named_metrics: [(
            "words".to_owned(),
            message.split_whitespace().count() as f64,
        )]
        .into(),
        ..OrcaLoadReport::default()
    }
}

/// Counts a drop (a stream the server let go of, a handler that ended).
pub(crate) struct OnDrop(pub(crate) Arc<std::sync::atomic::AtomicUsize>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[tonic::async_trait]
impl EchoOverride for OrcaEcho {
    async fn unary(&self, request: Request<EchoRequest>) -> Result<Response<EchoResponse>, Status> {
        let message = &request.get_ref().message;
        record_base(message);
        record_words(message.split_whitespace().count());
        EchoService.unary_echo(request).await
    }

    async fn server_streaming(
        &self,
        request: Request<EchoRequest>,
    ) -> Result<Response<ResponseStream>, Status> {
        let message = &request.get_ref().message;
        record_base(message);
        // `... forever`: the stream never ends after its words.
        let forever = message.ends_with("forever");
        let words = EchoService
            .server_streaming_echo(request)
            .await?
            .into_inner();
        let words: ResponseStream = if forever {
            Box::pin(words.chain(tokio_stream::pending()))
        } else {
            words
        };
        let dropped = OnDrop(Arc::clone(&self.responses_dropped));
        let mut count = 0;
        let counted = words.map(move |item| {
            let _ = &dropped; // dropped with the stream
            count += 1;
            record_words(count);
            item
        });
        Ok(Response::new(Box::pin(counted)))
    }

    async fn client_streaming(
        &self,
        request: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<EchoResponse>, Status> {
        record_base("");
        self.streams_begun
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let _ended = OnDrop(Arc::clone(&self.streams_ended));
        EchoService.client_streaming_echo(request).await
    }

    async fn bidi(
        &self,
        request: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<ResponseStream>, Status> {
        record_base("");
        let dropped = OnDrop(Arc::clone(&self.responses_dropped));
        let echoed = EchoService
            .bidirectional_streaming_echo(request)
            .await?
            .into_inner();
        let mut count = 0;
        let tracked = echoed.map(move |item| {
            let _ = &dropped; // dropped with the stream
            count += 1;
            record_words(count);
            item
        });
        Ok(Response::new(Box::pin(tracked)))
    }
}

/// Weights usable from the first report.
pub(crate) fn quick_group() -> EndpointWeights {
    let config = WeightConfig::builder()
        .blackout_period(std::time::Duration::ZERO)
        .weight_update_period(std::time::Duration::ZERO)
        .build()
        .expect("a valid config");
    EndpointWeights::new(config)
}

/// The transport of an echo client whose calls feed `endpoint`.
pub(crate) type Reading = CombinedService<Channel, LoadReports, ClientSide>;

/// `channel` behind a client `CombinedLayer` feeding `endpoint`.
pub(crate) fn reading(channel: Channel, endpoint: &EndpointWeight) -> Reading {
    tower::ServiceBuilder::new()
        .layer(CombinedLayer::client().with(endpoint.stats_handler()))
        .service(channel)
}

/// What a call brought back: the messages, the metadata (headers and
/// trailers; hyper's `date` left out) without the report, and the report.
#[derive(Debug, PartialEq)]
pub(crate) struct Seen {
    pub(crate) messages: Vec<String>,
    pub(crate) metadata: HeaderMap,
    pub(crate) report: Option<OrcaLoadReport>,
}

/// Takes the report out of `headers` (read with grpc-go's rules; it must
/// be well-formed) and drops `date`.
pub(crate) fn split_report(mut headers: HeaderMap) -> (HeaderMap, Option<OrcaLoadReport>) {
    let report = load_report_from(&headers).expect("a well-formed report");
    headers.remove(ReportFormat::GRPC_TRAILER);
    headers.remove(http::header::DATE);
    (headers, report)
}

/// A unary echo of `message`.
pub(crate) async fn unary(client: &mut EchoClient<Reading>, message: &str) -> Seen {
    let request = EchoRequest {
        message: message.to_owned(),
    };
    let response = client.unary_echo(request).await.expect("the unary call");
    let (metadata, message) = (response.metadata().clone(), response.into_inner().message);
    let (metadata, report) = split_report(metadata.into_headers());
    Seen {
        messages: vec![message],
        metadata,
        report,
    }
}

/// A server-streaming echo of `message`, one response per word; its
/// trailers (with the response headers) are the metadata.
pub(crate) async fn streaming(client: &mut EchoClient<Reading>, message: &str) -> Seen {
    let request = EchoRequest {
        message: message.to_owned(),
    };
    let response = client.server_streaming_echo(request).await.expect("call");
    let mut metadata = response.metadata().clone().into_headers();
    let mut stream = response.into_inner();
    let mut messages = Vec::new();
    while let Some(item) = stream.message().await.expect("a response") {
        messages.push(item.message);
    }
    let trailers = stream.trailers().await.expect("trailers").expect("some");
    metadata.extend(trailers.into_headers());
    let (metadata, report) = split_report(metadata);
    Seen {
        messages,
        metadata,
        report,
    }
}

/// A unary and a streaming call on `plain` (no layer) and on `orca`
/// (the layer): the same but the report, which is what the handler
/// recorded and which the client read into `endpoint`.
pub(crate) async fn assert_only_the_report_differs(
    plain: &mut EchoClient<Reading>,
    orca: &mut EchoClient<Reading>,
    endpoint: &EndpointWeight,
) {
    const MESSAGE: &str = "load reports ride in the trailers";
    let before = endpoint.reports();
    for (call, (without, with)) in [
        (
            "unary",
            (unary(plain, MESSAGE).await, unary(orca, MESSAGE).await),
        ),
        (
            "streaming",
            (
                streaming(plain, MESSAGE).await,
                streaming(orca, MESSAGE).await,
            ),
        ),
    ] {
        assert_eq!(without.report, None, "{call}: no layer, no report");
        assert_eq!(with.report, Some(expected(MESSAGE)), "{call}");
        assert_eq!(with.messages, without.messages, "{call}");
        assert_eq!(with.metadata, without.metadata, "{call}");
    }
    assert_eq!(endpoint.reports(), before + 2, "the client read both");
    assert_eq!(endpoint.malformed_reports(), 0);
    assert_eq!(endpoint.weight(), Some(200.0));
}

/// Two servers of `spawn` (without and with the layer) and a reading
/// client of each, from `connect`; then [`assert_only_the_report_differs`].
macro_rules! both {
    (|$layer:ident| $spawn:expr, |$addr:ident| $connect:expr) => {{
        let group = quick_group();
        let (plain_endpoint, endpoint) = (group.endpoint(), group.endpoint());
        let $layer = Identity::new();
        let $addr = $spawn;
        let mut plain = EchoClient::new(reading($connect, &plain_endpoint));
        let $layer = CallMetricsLayer::new();
        let $addr = $spawn;
        let mut orca = EchoClient::new(reading($connect, &endpoint));
        assert_only_the_report_differs(&mut plain, &mut orca, &endpoint).await;
        assert_eq!(plain_endpoint.reports(), 0);
        (plain, orca)
    }};
}

#[tokio::test]
async fn mtls_carries_the_report_intact() {
    let certs = TestCerts::generate();
    both!(
        |layer| {
            let (addr, incoming) = bind().await;
            spawn_tls(layer, OrcaEcho::default(), certs.server_mtls(), incoming);
            addr
        },
        |addr| tls_endpoint(addr, certs.client_mtls())
            .connect()
            .await
            .expect("mTLS connect")
    );
}

#[tokio::test]
async fn a_unix_socket_carries_the_report_intact() {
    let mut paths = Vec::new();
    both!(
        |layer| {
            let (path, incoming) = uds::bind();
            spawn_echo(layer, OrcaEcho::default(), incoming);
            paths.push(path);
            paths.last().unwrap().path().to_owned()
        },
        |path| uds::channel(&path).await
    );
}

/// The compressing echo behind `layer`.
async fn compressing<L: ServerLayer<Routes>>(layer: L) -> std::net::SocketAddr {
    let (addr, incoming) = bind().await;
    serve(
        Server::builder(),
        layer,
        compressing_routes(OrcaEcho::default()),
        incoming,
    );
    addr
}

#[tokio::test]
async fn compressed_messages_leave_the_report_intact() {
    let plain_addr = compressing(Identity::new()).await;
    let orca_addr = compressing(CallMetricsLayer::new()).await;
    let group = quick_group();
    for encoding in ENCODINGS {
        let endpoint = group.endpoint();
        let client = |addr, endpoint: &EndpointWeight| {
            let endpoint = endpoint.clone();
            async move {
                let channel = support::connect(addr).await;
                compressing_client(reading(channel, &endpoint), encoding)
            }
        };
        let mut plain = client(plain_addr, &group.endpoint()).await;
        let mut orca = client(orca_addr, &endpoint).await;
        assert_only_the_report_differs(&mut plain, &mut orca, &endpoint).await;
        // The messages really were compressed, both ways.
        let seen = unary(&mut orca, "compressed").await;
        assert_eq!(
            seen.metadata["grpc-encoding"],
            encoding.to_string().as_str()
        );
        assert_eq!(seen.report, Some(expected("compressed")));
    }
}

/// A grpc-web unary echo of `message`, its trailer frame split into the
/// rest and the report; the report is also fed to `endpoint` as a client
/// reading the trailer frame would (`LoadReports` on `InTrailer`).
async fn web(
    addr: std::net::SocketAddr,
    format: WebFormat,
    message: &str,
    endpoint: &EndpointWeight,
) -> (WebReply, Option<OrcaLoadReport>) {
    let mut reply = web_unary(addr, format, message).await;
    endpoint
        .stats_handler()
        .handle_rpc(&mut (), &RpcEvent::InTrailer(&reply.trailers));
    let (trailers, report) = split_report(std::mem::take(&mut reply.trailers));
    reply.trailers = trailers;
    reply.http.headers.remove(http::header::DATE);
    (reply, report)
}

/// `GrpcWebLayer` outside `CallMetricsLayer`: the layer sees the gRPC call
/// tonic-web made of the request and writes the report into its
/// trailers, which tonic-web puts in the trailer frame the browser reads.
#[tokio::test]
async fn grpc_web_outside_the_layer_puts_the_report_in_the_trailer_frame() {
    let (plain_addr, incoming) = bind().await;
    spawn_web_layer_inside(Identity::new(), OrcaEcho::default(), incoming);
    let (orca_addr, incoming) = bind().await;
    spawn_web_layer_inside(CallMetricsLayer::new(), OrcaEcho::default(), incoming);
    let group = quick_group();
    let (plain_endpoint, endpoint) = (group.endpoint(), group.endpoint());
    let message = "through tonic-web";
    for (n, format) in [WebFormat::Proto, WebFormat::Text].into_iter().enumerate() {
        let (without, none) = web(plain_addr, format, message, &plain_endpoint).await;
        let (with, report) = web(orca_addr, format, message, &endpoint).await;
        assert_eq!(none, None, "{format:?}");
        assert_eq!(report, Some(expected(message)), "{format:?}");
        assert_eq!(with.grpc_status(), Some(0), "{format:?}");
        assert_eq!(with.echo().message, message, "{format:?}");
        assert_eq!(with.messages, without.messages, "{format:?}");
        assert_eq!(with.trailers, without.trailers, "{format:?}");
        assert_eq!(with.http.status, without.http.status, "{format:?}");
        assert_eq!(with.http.headers, without.http.headers, "{format:?}");
        assert_eq!(endpoint.reports(), n as u64 + 1);
    }
    assert_eq!(endpoint.weight(), Some(200.0));
    assert_eq!(endpoint.malformed_reports(), 0);
    assert_eq!(plain_endpoint.reports(), 0);
    // Native gRPC on the same server still reports.
    let mut orca = EchoClient::new(reading(support::connect(orca_addr).await, &endpoint));
    assert_eq!(
        unary(&mut orca, message).await.report,
        Some(expected(message))
    );
}

/// A plain HTTP route that takes the recorder: what `current()` returned
/// there (`true`: a recorder), one entry per request.
type Taken = Arc<Mutex<Vec<bool>>>;

/// The harness's axum routes, `GET /orca` (which calls
/// `CallMetricsRecorder::current()`, records into what it got, and
/// answers `recorded`) and the echo, behind `layer`, HTTP/1.1 and HTTP/2.
async fn grpc_and_axum<L: ServerLayer<Routes>>(layer: L, taken: &Taken) -> std::net::SocketAddr {
    let taken = Arc::clone(taken);
    let orca_route = get(move || async move {
        let recorder = CallMetricsRecorder::current();
        if let Some(recorder) = &recorder {
            recorder.set_request_cost("http", 1.0);
        }
        taken.lock().unwrap().push(recorder.is_some());
        "recorded"
    });
    let routes = Routes::from(axum_routes().route("/orca", orca_route))
        .add_service(EchoServer::new(OrcaEcho::default()));
    let (addr, incoming) = bind().await;
    serve(
        Server::builder().accept_http1(true),
        layer,
        routes,
        incoming,
    );
    addr
}

/// The reply without `date`, which hyper sets to the second.
fn undated(mut reply: HttpReply) -> HttpReply {
    reply.headers.remove(http::header::DATE);
    reply
}

#[tokio::test]
async fn axum_routes_beside_grpc_pass_through_untouched() {
    let (plain_taken, taken) = (Taken::default(), Taken::default());
    let plain_addr = grpc_and_axum(Identity::new(), &plain_taken).await;
    let orca_addr = grpc_and_axum(CallMetricsLayer::new(), &taken).await;
    for (path, request) in [
        ("/healthz", get_request("/healthz")),
        ("/json", post_json("/json", r#"{"a":1}"#)),
        ("/orca", get_request("/orca")),
    ] {
        for http2_client in [false, true] {
            let send = |addr| {
                let request = request.clone();
                async move {
                    let reply = if http2_client {
                        http2(addr, request).await
                    } else {
                        http1(addr, request).await
                    };
                    undated(reply)
                }
            };
            let (without, with) = (send(plain_addr).await, send(orca_addr).await);
            let what = format!("{path}, HTTP/2: {http2_client}");
            assert_eq!(with.status, without.status, "{what}");
            assert_eq!(with.body, without.body, "{what}");
            assert_eq!(with.headers, without.headers, "{what}");
            assert_eq!(with.trailers, without.trailers, "{what}");
            let report_header = |h: &HeaderMap| {
                h.keys()
                    .any(|name| name.as_str().starts_with("endpoint-load-metrics"))
            };
            assert!(!report_header(&with.headers), "{what}: {with:?}");
            assert!(!with.trailers.as_ref().is_some_and(report_header), "{what}");
        }
    }
    // The layer passes what is not gRPC through: a plain HTTP handler finds
    // no recorder under it, as without it (it would have no trailers to
    // carry a report).
    assert_eq!(*taken.lock().unwrap(), [false, false]);
    assert_eq!(*plain_taken.lock().unwrap(), [false, false]);
    // gRPC on the same server still reports.
    let group = quick_group();
    let endpoint = group.endpoint();
    let mut orca = EchoClient::new(reading(support::connect(orca_addr).await, &endpoint));
    assert_eq!(
        unary(&mut orca, "beside axum").await.report,
        Some(expected("beside axum"))
    );
    assert_eq!(endpoint.weight(), Some(200.0));
}

/// `GrpcWebLayer` inside `CallMetricsLayer`
/// (`.layer(CallMetricsLayer).layer(GrpcWebLayer)`): the layer sees
/// tonic-web's grpc-web response, whose trailers are already a frame of its
/// body, so it has nowhere to write; the answer is as without the layer.
/// Native gRPC on the same server still reports.
#[tokio::test]
async fn grpc_web_inside_the_layer_changes_nothing_and_native_grpc_reports() {
    let (plain_addr, incoming) = bind().await;
    spawn_web_layer_outside(Identity::new(), OrcaEcho::default(), incoming);
    let (orca_addr, incoming) = bind().await;
    spawn_web_layer_outside(CallMetricsLayer::new(), OrcaEcho::default(), incoming);
    let group = quick_group();
    let endpoint = group.endpoint();
    let message = "through tonic-web";
    for format in [WebFormat::Proto, WebFormat::Text] {
        let (without, _) = web(plain_addr, format, message, &endpoint).await;
        let (with, _) = web(orca_addr, format, message, &endpoint).await;
        assert_eq!(with.grpc_status(), Some(0), "{format:?}");
        assert_eq!(with.messages, without.messages, "{format:?}");
        assert_eq!(with.trailers, without.trailers, "{format:?}");
        assert_eq!(with.http.status, without.http.status, "{format:?}");
        assert_eq!(with.http.headers, without.http.headers, "{format:?}");
    }
    assert_eq!(endpoint.malformed_reports(), 0);
    let mut orca = EchoClient::new(reading(support::connect(orca_addr).await, &endpoint));
    assert_eq!(
        unary(&mut orca, message).await.report,
        Some(expected(message))
    );
    assert_eq!(endpoint.weight(), Some(200.0));
}

/// `GrpcWebLayer` inside `CallMetricsLayer`: the layer sees grpc-web, not
/// gRPC, and passes it through (its handler finds no recorder: the
/// response will carry no HTTP trailers to write a report into); the
/// answer is what it is without the layer. Reports for grpc-web clients
/// need tonic-web outside (the test above).
#[tokio::test]
async fn grpc_web_inside_the_layer_passes_through() {
    let (plain_addr, incoming) = bind().await;
    spawn_web_layer_outside(Identity::new(), OrcaEcho::default(), incoming);
    let (orca_addr, incoming) = bind().await;
    spawn_web_layer_outside(CallMetricsLayer::new(), OrcaEcho::default(), incoming);
    let endpoint = quick_group().endpoint();
    for format in [WebFormat::Proto, WebFormat::Text] {
        let (without, _) = web(plain_addr, format, "passes", &endpoint).await;
        let (with, report) = web(orca_addr, format, "passes", &endpoint).await;
        assert_eq!(report, None, "{format:?}");
        assert_eq!(with.grpc_status(), Some(0), "{format:?}");
        assert_eq!(with.messages, without.messages, "{format:?}");
        assert_eq!(with.trailers, without.trailers, "{format:?}");
        assert_eq!(with.http.status, without.http.status, "{format:?}");
    }
    assert_eq!(endpoint.reports(), 0);
    assert_eq!(endpoint.malformed_reports(), 0);
}
