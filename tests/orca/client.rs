//! The client side (gRFC A58 weights) against real tonic servers on
//! 127.0.0.1: per-call trailers through the stats handler (malformed ones
//! too), the out-of-band stream, and `tower`'s `p2c` balancer.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use http::{HeaderMap, HeaderValue};
use prost::Message;
use tokio::sync::{Notify, mpsc};
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataMap;
use tonic::transport::{Channel, Endpoint, Server};
use tonic::{Code, Request, Response, Status};
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::health_server::{Health, HealthServer};
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};
use tonic_hotpath::orca::client::{EndpointWeight, EndpointWeights, WeightConfig};
use tonic_hotpath::orca::proto::xds::service::orca::v3::OrcaLoadReportRequest;
use tonic_hotpath::orca::proto::xds::service::orca::v3::open_rca_service_server::{
    OpenRcaService, OpenRcaServiceServer,
};
use tonic_hotpath::orca::server::CallMetricsLayer;
use tonic_hotpath::orca::{
    CallMetricsRecorder, OrcaLoadReport, ReportFormat, ServerMetricsRecorder,
};
use tonic_hotpath::stats::CombinedLayer;
use tower::ServiceBuilder;
use tower::balance::p2c::Balance;
use tower::buffer::Buffer;
use tower::discover::ServiceList;

/// How long anything the protocol promises may take on a busy machine.
const DEADLINE: Duration = Duration::from_secs(20);

fn quick_config() -> WeightConfig {
    WeightConfig::builder()
        .blackout_period(Duration::ZERO)
        .weight_update_period(Duration::ZERO)
        .build()
        .unwrap()
}

fn report(utilization: f64, qps: f64) -> OrcaLoadReport {
    OrcaLoadReport {
        cpu_utilization: utilization,
        rps_fractional: qps,
        ..OrcaLoadReport::default()
    }
}

/// Waits until `done` holds, checking after each notification or every
/// 10 ms, up to the deadline.
async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let waited = tokio::time::timeout(DEADLINE, async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "timed out waiting for {what}");
}

/// A listener on 127.0.0.1:0, as tonic's incoming stream, and its address.
async fn listen() -> (tokio_stream::wrappers::TcpListenerStream, SocketAddr) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    (
        tokio_stream::wrappers::TcpListenerStream::new(listener),
        addr,
    )
}

async fn connect(addr: SocketAddr) -> Channel {
    Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

fn serving() -> Response<HealthCheckResponse> {
    Response::new(HealthCheckResponse { status: 1 })
}

type WatchStream = Pin<Box<dyn Stream<Item = Result<HealthCheckResponse, Status>> + Send>>;

/// Answers each check with the trailer its `service` names, in a
/// trailers-only error (the status's metadata): `good`, `several`,
/// `base64`, `proto`, or none.
struct Trailers {
    good: OrcaLoadReport,
}

#[tonic::async_trait]
impl Health for Trailers {
    async fn check(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        let encoded = self.good.encode_to_vec();
        let b64 = |bytes: &[u8]| {
            use base64::Engine;
            HeaderValue::from_str(&base64::engine::general_purpose::STANDARD_NO_PAD.encode(bytes))
                .unwrap()
        };
        let mut headers = HeaderMap::new();
        match request.get_ref().service.as_str() {
            "good" => {
                headers.append(ReportFormat::GRPC_TRAILER, b64(&encoded));
            }
            "several" => {
                headers.append(ReportFormat::GRPC_TRAILER, b64(&encoded));
                headers.append(ReportFormat::GRPC_TRAILER, b64(&encoded));
            }
            "base64" => {
                headers.append(
                    ReportFormat::GRPC_TRAILER,
                    HeaderValue::from_static("!!not*base64"),
                );
            }
            // A field 1 of wire type 7 (no such type).
            "proto" => {
                headers.append(ReportFormat::GRPC_TRAILER, b64(&[0x0f, 0x00]));
            }
            _ => return Ok(serving()),
        }
        Err(Status::with_metadata(
            Code::ResourceExhausted,
            "busy",
            MetadataMap::from_headers(headers),
        ))
    }

    type WatchStream = WatchStream;

    async fn watch(&self, _: Request<HealthCheckRequest>) -> Result<Response<WatchStream>, Status> {
        Err(Status::unimplemented("watch"))
    }
}

#[tokio::test]
async fn malformed_trailers_are_counted_and_change_nothing() {
    let (incoming, addr) = listen().await;
    let good = report(0.5, 100.0);
    tokio::spawn(
        Server::builder()
            .add_service(HealthServer::new(Trailers { good }))
            .serve_with_incoming(incoming),
    );
    let group = EndpointWeights::new(quick_config());
    let endpoint = group.endpoint();
    let channel = ServiceBuilder::new()
        .layer(CombinedLayer::client().with(endpoint.stats_handler()))
        .service(connect(addr).await);
    let mut client = HealthClient::new(channel);
    let check = |service: &str| HealthCheckRequest {
        service: service.to_owned(),
    };

    let status = client.check(check("good")).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert_eq!(endpoint.weight(), Some(200.0));
    assert_eq!(endpoint.reports(), 1);

    for (i, bad) in ["several", "base64", "proto"].into_iter().enumerate() {
        let status = client.check(check(bad)).await.unwrap_err();
        assert_eq!(status.code(), Code::ResourceExhausted, "{bad}");
        assert_eq!(endpoint.malformed_reports(), i as u64 + 1, "{bad}");
        assert_eq!(endpoint.weight(), Some(200.0), "{bad}");
    }
    // A call without a report is neither.
    client.check(check("")).await.unwrap();
    assert_eq!(endpoint.malformed_reports(), 3);
    assert_eq!(endpoint.reports(), 1);
    assert_eq!(endpoint.weight(), Some(200.0));
}

/// Counts its checks; with the `CallMetricsLayer`, touching the call's
/// recorder makes the layer send the process's values in the trailer.
#[derive(Clone, Default)]
struct Counted {
    calls: Arc<AtomicU64>,
}

#[tonic::async_trait]
impl Health for Counted {
    async fn check(
        &self,
        _: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if let Some(recorder) = CallMetricsRecorder::current() {
            recorder.set_request_cost("checks", 1.0);
        }
        Ok(serving())
    }

    type WatchStream = WatchStream;

    async fn watch(&self, _: Request<HealthCheckRequest>) -> Result<Response<WatchStream>, Status> {
        Err(Status::unimplemented("watch"))
    }
}

/// An `OpenRcaService` sending a fixed report at the requested interval
/// (at least 10 ms); counts its streams and which are open. Its first
/// `fail_first` streams are refused with `Unavailable`.
#[derive(Clone)]
struct FixedOob {
    report: OrcaLoadReport,
    opened: Arc<AtomicUsize>,
    open: Arc<AtomicUsize>,
    closed: Arc<Notify>,
    fail_first: usize,
}

impl FixedOob {
    fn new(report: OrcaLoadReport) -> Self {
        Self {
            report,
            opened: Arc::default(),
            open: Arc::default(),
            closed: Arc::default(),
            fail_first: 0,
        }
    }
}

/// A response stream that tells when the server drops it.
struct Tracked {
    inner: ReceiverStream<Result<OrcaLoadReport, Status>>,
    open: Arc<AtomicUsize>,
    closed: Arc<Notify>,
}

impl Stream for Tracked {
    type Item = Result<OrcaLoadReport, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Pin::new(&mut self.inner).poll_next(cx)
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::SeqCst);
        self.closed.notify_waiters();
    }
}

#[tonic::async_trait]
impl OpenRcaService for FixedOob {
    type StreamCoreMetricsStream = Tracked;

    async fn stream_core_metrics(
        &self,
        request: Request<OrcaLoadReportRequest>,
    ) -> Result<Response<Tracked>, Status> {
        let attempt = self.opened.fetch_add(1, Ordering::SeqCst);
        if attempt < self.fail_first {
            return Err(Status::unavailable("not yet"));
        }
        let interval = request
            .get_ref()
            .report_interval
            .and_then(|d| Duration::try_from(d).ok())
            .unwrap_or_default()
            .max(Duration::from_millis(10));
        let (tx, rx) = mpsc::channel(1);
        let report = self.report.clone();
        tokio::spawn(async move {
            while tx.send(Ok(report.clone())).await.is_ok() {
                tokio::time::sleep(interval).await;
            }
        });
        self.open.fetch_add(1, Ordering::SeqCst);
        Ok(Response::new(Tracked {
            inner: ReceiverStream::new(rx),
            open: Arc::clone(&self.open),
            closed: Arc::clone(&self.closed),
        }))
    }
}

#[tokio::test]
async fn out_of_band_reports_arrive_and_dropping_the_watcher_ends_the_stream() {
    let (incoming, addr) = listen().await;
    let mut oob = FixedOob::new(report(0.25, 50.0));
    oob.fail_first = 1;
    tokio::spawn(
        Server::builder()
            .add_service(OpenRcaServiceServer::new(oob.clone()))
            .serve_with_incoming(incoming),
    );
    let group = EndpointWeights::new(quick_config());
    let endpoint = group.endpoint();
    let watcher = endpoint
        .out_of_band()
        .report_interval(Duration::from_millis(20))
        .backoff(Duration::from_millis(10), Duration::from_millis(50))
        .spawn(connect(addr).await);
    // The first stream is refused: the watcher backs off and re-opens.
    wait_until("three reports", || endpoint.reports() >= 3).await;
    assert_eq!(endpoint.weight(), Some(200.0));
    assert!(watcher.streams() >= 2);
    assert_eq!(oob.open.load(Ordering::SeqCst), 1);
    assert!(!watcher.is_unimplemented());

    let closed = oob.closed.notified();
    drop(watcher);
    // The server sees the stream end.
    tokio::time::timeout(DEADLINE, async {
        let mut closed = std::pin::pin!(closed);
        while oob.open.load(Ordering::SeqCst) != 0 {
            closed.as_mut().await;
            closed.set(oob.closed.notified());
        }
    })
    .await
    .expect("the stream ended on the server");
    // And the watcher is gone for good: no stream opens again.
    let opened = oob.opened.load(Ordering::SeqCst);
    let reports = endpoint.reports();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(oob.opened.load(Ordering::SeqCst), opened);
    assert_eq!(endpoint.reports(), reports);
    // Nothing holds the endpoint but this handle: the watcher's task let go.
    assert_eq!(group.len(), 1);
    drop(endpoint);
    assert_eq!(group.len(), 0);
}

#[tokio::test]
async fn out_of_band_stops_for_good_on_unimplemented() {
    let (incoming, addr) = listen().await;
    tokio::spawn(
        Server::builder()
            .add_service(HealthServer::new(Counted::default()))
            .serve_with_incoming(incoming),
    );
    let group = EndpointWeights::new(quick_config());
    let endpoint = group.endpoint();
    let watcher = endpoint
        .out_of_band()
        .backoff(Duration::from_millis(1), Duration::from_millis(1))
        .spawn(connect(addr).await);
    wait_until("the watcher to stop", || watcher.is_finished()).await;
    assert!(watcher.is_unimplemented());
    assert_eq!(watcher.streams(), 1);
    assert_eq!(endpoint.weight(), None);
}

/// Calls `client` `calls` times from `workers` tasks at once.
async fn spread<T>(client: HealthClient<T>, calls: usize, workers: usize)
where
    T: tonic::client::GrpcService<tonic::body::Body> + Clone + Send + 'static,
    T::Error: Into<tonic::codegen::StdError>,
    T::ResponseBody: tonic::codegen::Body<Data = bytes::Bytes> + Send + 'static,
    <T::ResponseBody as tonic::codegen::Body>::Error: Into<tonic::codegen::StdError> + Send,
    T::Future: Send,
{
    let left = Arc::new(AtomicUsize::new(calls));
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let mut client = client.clone();
        let left = Arc::clone(&left);
        tasks.push(tokio::spawn(async move {
            while left
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
            {
                client.check(HealthCheckRequest::default()).await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
}

/// The split over servers reporting 0.2, 0.5 and 0.9 utilization at the
/// same qps: the least busy gets the most calls, the busiest the fewest,
/// with wide margins (weights 500 : 200 : 111).
fn assert_split(counts: &[u64; 3]) {
    let [low, mid, high] = *counts;
    eprintln!("calls per server (0.2 / 0.5 / 0.9): {low} / {mid} / {high}");
    assert!(low > high * 2, "{counts:?}");
    assert!(mid > high, "{counts:?}");
    assert!(low > mid, "{counts:?}");
}

type GrpcRequest = http::Request<tonic::body::Body>;

const UTILIZATIONS: [f64; 3] = [0.2, 0.5, 0.9];

#[tokio::test]
async fn p2c_prefers_the_least_loaded_by_per_call_reports() {
    let group = EndpointWeights::new(quick_config());
    let mut services = Vec::new();
    let mut counters = Vec::new();
    for utilization in UTILIZATIONS {
        let (incoming, addr) = listen().await;
        let recorder = ServerMetricsRecorder::new();
        recorder.set_cpu_utilization(utilization);
        recorder.set_qps(100.0);
        let health = Counted::default();
        counters.push(Arc::clone(&health.calls));
        tokio::spawn(
            Server::builder()
                .layer(CallMetricsLayer::builder().server_metrics(recorder).build())
                .add_service(HealthServer::new(health))
                .serve_with_incoming(incoming),
        );
        let endpoint = group.endpoint();
        let channel = ServiceBuilder::new()
            .layer(CombinedLayer::client().with(endpoint.stats_handler()))
            .service(connect(addr).await);
        services.push(endpoint.load(channel));
    }
    let endpoints: Vec<EndpointWeight> = services.iter().map(|s| s.endpoint().clone()).collect();
    let client = HealthClient::new(Buffer::new(
        Balance::new(ServiceList::new::<GrpcRequest>(services)),
        64,
    ));
    spread(client, 600, 4).await;
    let counts = counters_of(&counters);
    assert_eq!(counts.iter().sum::<u64>(), 600);
    for (endpoint, utilization) in endpoints.iter().zip(UTILIZATIONS) {
        let weight = endpoint.weight().expect("a weight from the trailers");
        assert!((weight - 100.0 / utilization).abs() < 1e-6);
        assert_eq!(endpoint.malformed_reports(), 0);
    }
    assert_split(&counts);
}

#[tokio::test]
async fn p2c_prefers_the_least_loaded_by_out_of_band_reports() {
    let group = EndpointWeights::new(quick_config());
    let mut services = Vec::new();
    let mut counters = Vec::new();
    let mut watchers = Vec::new();
    for utilization in UTILIZATIONS {
        let (incoming, addr) = listen().await;
        let health = Counted::default();
        counters.push(Arc::clone(&health.calls));
        tokio::spawn(
            Server::builder()
                .add_service(HealthServer::new(health))
                .add_service(
                    tonic_hotpath::orca::OrcaService::builder(process_metrics(utilization))
                        .min_reporting_interval(Duration::from_millis(20))
                        .build()
                        .into_server(),
                )
                .serve_with_incoming(incoming),
        );
        let endpoint = group.endpoint();
        let channel = connect(addr).await;
        watchers.push(
            endpoint
                .out_of_band()
                .report_interval(Duration::from_millis(50))
                .spawn(channel.clone()),
        );
        services.push(endpoint.load(channel));
    }
    let endpoints: Vec<EndpointWeight> = services.iter().map(|s| s.endpoint().clone()).collect();
    wait_until("a weight for every endpoint", || {
        endpoints.iter().all(|e| e.weight().is_some())
    })
    .await;
    let client = HealthClient::new(Buffer::new(
        Balance::new(ServiceList::new::<GrpcRequest>(services)),
        64,
    ));
    spread(client, 600, 4).await;
    let counts = counters_of(&counters);
    assert_eq!(counts.iter().sum::<u64>(), 600);
    assert_split(&counts);
    drop(watchers);
}

/// The crate's own process recorder, at `utilization` (CPU) and 100 QPS,
/// as the out-of-band service's provider.
fn process_metrics(utilization: f64) -> tonic_hotpath::orca::ServerMetricsRecorder {
    let recorder = tonic_hotpath::orca::ServerMetricsRecorder::new();
    recorder.set_cpu_utilization(utilization);
    recorder.set_qps(100.0);
    recorder
}

fn counters_of(counters: &[Arc<AtomicU64>]) -> [u64; 3] {
    let mut counts = [0; 3];
    for (count, counter) in counts.iter_mut().zip(counters) {
        *count = counter.load(Ordering::Relaxed);
    }
    counts
}
