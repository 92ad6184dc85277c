//! The out-of-band `OpenRcaService` against a real tonic server and the
//! generated client on 127.0.0.1: the first report at once, the interval
//! rules, the provider's changes, what is left out, and cancellation.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tonic::Streaming;
use tonic::transport::server::TcpIncoming;
use tonic_hotpath::orca::proto::xds::service::orca::v3::OrcaLoadReportRequest;
use tonic_hotpath::orca::proto::xds::service::orca::v3::open_rca_service_client::OpenRcaServiceClient;
use tonic_hotpath::orca::{BackendMetrics, OrcaLoadReport, OrcaService, ServerMetricsProvider};

/// How long a test waits for what must happen before it fails: generous,
/// as a wait whose condition is met returns at once.
const PATIENCE: Duration = Duration::from_secs(30);

/// A process's metrics, set by the test, counting the reads.
#[derive(Default)]
struct Provider {
    metrics: Mutex<BackendMetrics>,
    reads: AtomicUsize,
}

impl Provider {
    fn set(&self, update: impl FnOnce(&mut BackendMetrics)) {
        update(&mut self.metrics.lock().expect("metrics lock"));
    }
}

impl ServerMetricsProvider for Provider {
    fn server_metrics(&self) -> BackendMetrics {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.metrics.lock().expect("metrics lock").clone()
    }
}

/// Serves `service` on 127.0.0.1:0.
async fn serve(service: OrcaService) -> SocketAddr {
    let incoming = TcpIncoming::bind("127.0.0.1:0".parse().expect("loopback"))
        .expect("bind 127.0.0.1:0")
        .with_nodelay(Some(true));
    let addr = incoming.local_addr().expect("local addr");
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service.into_server())
            .serve_with_incoming(incoming),
    );
    addr
}

async fn client(addr: SocketAddr) -> OpenRcaServiceClient<tonic::transport::Channel> {
    OpenRcaServiceClient::connect(format!("http://{addr}"))
        .await
        .expect("connect")
}

fn every(interval: Option<Duration>) -> OrcaLoadReportRequest {
    OrcaLoadReportRequest {
        report_interval: interval.map(|d| prost_types::Duration {
            seconds: d.as_secs() as i64,
            nanos: d.subsec_nanos() as i32,
        }),
        ..OrcaLoadReportRequest::default()
    }
}

/// Opens a stream asking for `interval`; returns it and when it was asked.
async fn open(
    addr: SocketAddr,
    interval: Option<Duration>,
) -> (Streaming<OrcaLoadReport>, Instant) {
    let asked = Instant::now();
    let stream = client(addr)
        .await
        .stream_core_metrics(every(interval))
        .await
        .expect("StreamCoreMetrics")
        .into_inner();
    (stream, asked)
}

/// The next report, within `within`.
async fn next(stream: &mut Streaming<OrcaLoadReport>, within: Duration) -> OrcaLoadReport {
    tokio::time::timeout(within, stream.message())
        .await
        .expect("a report in time")
        .expect("stream status")
        .expect("stream still open")
}

/// Reads reports for `window`; returns when each arrived.
async fn arrivals(stream: &mut Streaming<OrcaLoadReport>, window: Duration) -> Vec<Instant> {
    let end = tokio::time::Instant::now() + window;
    let mut seen = Vec::new();
    while let Ok(message) = tokio::time::timeout_at(end, stream.message()).await {
        message.expect("stream status").expect("stream still open");
        seen.push(Instant::now());
    }
    seen
}

#[tokio::test]
async fn first_report_comes_at_once_with_the_default_minimum() {
    let provider = Arc::new(Provider::default());
    provider.set(|m| m.cpu_utilization = Some(0.25));
    let addr = serve(OrcaService::new(provider.clone())).await;
    // The default minimum is 30 s: a report well before it is the first.
    let (mut stream, _) = open(addr, None).await;
    let report = next(&mut stream, Duration::from_secs(10)).await;
    assert_eq!(report.cpu_utilization, 0.25);
}

#[tokio::test]
async fn requests_below_the_minimum_get_the_minimum() {
    let provider = Arc::new(Provider::default());
    let minimum = Duration::from_millis(200);
    let service = OrcaService::builder(provider.clone())
        .min_reporting_interval(minimum)
        .build();
    let addr = serve(service).await;
    let (mut stream, asked) = open(addr, Some(Duration::from_millis(50))).await;
    next(&mut stream, PATIENCE).await;
    let window = Duration::from_secs(1);
    let seen = arrivals(&mut stream, window).await;
    // At 50 ms there would be about 20; at the minimum, at most one per
    // 200 ms (and one more, for a tick on the window's edge).
    assert!(
        seen.len() <= 1 + 1000 / 200 + 1,
        "{} reports in {window:?}",
        seen.len()
    );
    // Report n (the first is 0) cannot leave before n minimums have passed.
    for (n, at) in seen.iter().enumerate() {
        let earliest = asked + minimum * (n as u32 + 1);
        assert!(
            *at >= earliest,
            "report {} came {:?} early",
            n + 1,
            earliest - *at
        );
    }
}

#[tokio::test]
async fn requests_above_the_minimum_are_honoured() {
    let provider = Arc::new(Provider::default());
    let service = OrcaService::builder(provider.clone())
        .min_reporting_interval(Duration::from_millis(20))
        .build();
    let addr = serve(service).await;
    let asked_for = Duration::from_millis(400);
    let (mut stream, asked) = open(addr, Some(asked_for)).await;
    next(&mut stream, PATIENCE).await;
    let window = Duration::from_secs(1);
    let seen = arrivals(&mut stream, window).await;
    assert!(
        seen.len() <= 1 + 1000 / 400 + 1 + 1,
        "{} reports in {window:?}",
        seen.len()
    );
    for (n, at) in seen.iter().enumerate() {
        let earliest = asked + asked_for * (n as u32 + 1);
        assert!(
            *at >= earliest,
            "report {} came {:?} early",
            n + 1,
            earliest - *at
        );
    }
    // And it does keep reporting.
    next(&mut stream, PATIENCE).await;
}

#[tokio::test]
async fn later_reports_show_the_providers_changes_and_leave_per_call_values_out() {
    let provider = Arc::new(Provider::default());
    provider.set(|m| {
        m.cpu_utilization = Some(0.1);
        m.mem_utilization = Some(0.2);
        m.application_utilization = Some(0.3);
        m.qps = Some(40.0);
        m.eps = Some(5.0);
        m.utilization.insert("disk".into(), 0.6);
        m.request_cost.insert("rows".into(), 12.0);
        m.named_metrics.insert("hits".into(), 3.0);
    });
    let service = OrcaService::builder(provider.clone())
        .min_reporting_interval(Duration::from_millis(20))
        .build();
    let addr = serve(service).await;
    let (mut stream, _) = open(addr, None).await;
    let first = next(&mut stream, PATIENCE).await;
    let mut expected = OrcaLoadReport {
        cpu_utilization: 0.1,
        mem_utilization: 0.2,
        application_utilization: 0.3,
        rps_fractional: 40.0,
        eps: 5.0,
        ..OrcaLoadReport::default()
    };
    expected.utilization.insert("disk".into(), 0.6);
    assert_eq!(
        first, expected,
        "request costs and named metrics are not sent OOB"
    );

    provider.set(|m| {
        m.cpu_utilization = Some(0.9);
        m.utilization.remove("disk");
        m.utilization.insert("net".into(), 0.5);
    });
    let deadline = Instant::now() + PATIENCE;
    loop {
        let report = next(&mut stream, PATIENCE).await;
        if report.cpu_utilization == 0.9 {
            assert_eq!(report.utilization.len(), 1);
            assert_eq!(report.utilization["net"], 0.5);
            assert!(report.request_cost.is_empty() && report.named_metrics.is_empty());
            break;
        }
        assert!(Instant::now() < deadline, "the change never showed");
    }
}

#[tokio::test]
async fn a_cancelled_stream_is_dropped_and_the_server_still_serves() {
    let provider = Arc::new(Provider::default());
    let service = OrcaService::builder(provider.clone())
        .min_reporting_interval(Duration::from_millis(10))
        .build();
    let addr = serve(service).await;
    let (mut stream, _) = open(addr, None).await;
    next(&mut stream, PATIENCE).await;
    next(&mut stream, PATIENCE).await;

    drop(stream);
    // tonic drops the call's stream (timer and provider handle) once the
    // client's cancellation arrives: from then on nothing reads the
    // provider. A live stream would read it every 10 ms; wait (with a
    // deadline) for 20 of those intervals without a read.
    let deadline = Instant::now() + PATIENCE;
    let mut reads = provider.reads.load(Ordering::SeqCst);
    let mut quiet_since = Instant::now();
    while quiet_since.elapsed() < Duration::from_millis(200) {
        assert!(
            Instant::now() < deadline,
            "the cancelled stream kept reading"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
        let now = provider.reads.load(Ordering::SeqCst);
        if now != reads {
            reads = now;
            quiet_since = Instant::now();
        }
    }

    let (mut again, _) = open(addr, None).await;
    next(&mut again, PATIENCE).await;
    assert!(provider.reads.load(Ordering::SeqCst) > reads);
}
