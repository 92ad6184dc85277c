//! `OtelMetrics` through OpenTelemetry's bound instruments (feature
//! `otel-bound-instruments`): the SDK's `SdkMeterProvider` is recognised
//! and bound, any other provider is not; and the exports are the same as
//! without binding. A real tonic server and client over 127.0.0.1 each
//! carry two handlers seeing the same events: one recording into an SDK
//! given as itself (bound, with the feature), one into an SDK behind a
//! provider type the crate does not know (its fallback: attribute sets).
//! Without the feature both record with attribute sets, and the tests
//! still hold.

use support::otel_harness::Ends;

use std::sync::Arc;
use std::time::Duration;

use opentelemetry::metrics::{Meter, MeterProvider, NoopMeterProvider};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, HistogramDataPoint, MetricData};
use opentelemetry_sdk::metrics::{
    Aggregation, InMemoryMetricExporter, InMemoryMetricExporterBuilder, Instrument, PeriodicReader,
    SdkMeterProvider, Stream, Temporality,
};
use support::{EchoClient, EchoOverride, EchoRequest, EchoResponse, EchoServer, wait_until};
use tokio_stream::StreamExt;
use tonic::metadata::MetadataValue;
use tonic::transport::Channel;
use tonic::{Code, Request, Response, Status};
use tonic_hotpath::otel::{OtelMetrics, TenantAttribute};
use tonic_hotpath::stats::{ClientSide, Combined, CombinedLayer, CombinedService};

const UNARY_PATH: &str = "/hotpath.echo.Echo/UnaryEcho";

/// Whether a handler built from an `SdkMeterProvider` binds.
const BINDS: bool = cfg!(feature = "otel-bound-instruments");

/// The SDK's provider behind a type `OtelMetrics` does not recognise: it
/// records with attribute sets (its fallback), into the same SDK.
struct Unrecognised(SdkMeterProvider);

impl MeterProvider for Unrecognised {
    fn meter_with_scope(&self, scope: InstrumentationScope) -> Meter {
        self.0.meter_with_scope(scope)
    }
}

/// An SDK exporting to memory only when asked, with `temporality` and,
/// if given, a cardinality limit on every instrument.
fn sdk(
    temporality: Temporality,
    cardinality_limit: Option<usize>,
) -> (SdkMeterProvider, InMemoryMetricExporter) {
    let exporter = InMemoryMetricExporterBuilder::new()
        .with_temporality(temporality)
        .build();
    let reader = PeriodicReader::builder(exporter.clone())
        .with_interval(Duration::from_secs(24 * 3600))
        .build();
    let mut builder = SdkMeterProvider::builder().with_reader(reader);
    if let Some(limit) = cardinality_limit {
        builder = builder.with_view(move |_: &Instrument| {
            Stream::builder().with_cardinality_limit(limit).build().ok()
        });
    }
    (builder.build(), exporter)
}

fn bound_instruments(metrics: &OtelMetrics) -> bool {
    let debug = format!("{metrics:?}");
    match (
        debug.contains("bound_instruments: true"),
        debug.contains("bound_instruments: false"),
    ) {
        (true, false) => true,
        (false, true) => false,
        _ => panic!("no bound_instruments in {debug}"),
    }
}

// ---- the exports, in full ----

/// One exported data point's value: every field but the timestamps and
/// exemplars.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Sum(u64),
    Histogram {
        count: u64,
        sum: f64,
        min: Option<f64>,
        max: Option<f64>,
        bounds: Vec<f64>,
        buckets: Vec<u64>,
    },
}

type Attrs = Vec<(String, String)>;

/// One exported metric, its data points sorted by attribute set.
#[derive(Debug, Clone, PartialEq)]
struct Metric {
    scope: (String, Option<String>),
    name: String,
    unit: String,
    description: String,
    /// The aggregation: kind, number type, temporality, monotonic.
    kind: String,
    points: Vec<(Attrs, Value)>,
}

fn attrs<'a>(kvs: impl Iterator<Item = &'a KeyValue>) -> Attrs {
    let mut attrs: Attrs = kvs
        .map(|kv| (kv.key.to_string(), kv.value.to_string()))
        .collect();
    attrs.sort();
    attrs
}

fn histogram<T: Copy>(point: &HistogramDataPoint<T>, float: impl Fn(T) -> f64) -> (Attrs, Value) {
    let value = Value::Histogram {
        count: point.count(),
        sum: float(point.sum()),
        min: point.min().map(&float),
        max: point.max().map(&float),
        bounds: point.bounds().collect(),
        buckets: point.bucket_counts().collect(),
    };
    (attrs(point.attributes()), value)
}

fn points_of(data: &AggregatedMetrics) -> (String, Vec<(Attrs, Value)>) {
    match data {
        AggregatedMetrics::U64(MetricData::Sum(sum)) => (
            format!(
                "sum u64 {:?} monotonic {}",
                sum.temporality(),
                sum.is_monotonic()
            ),
            sum.data_points()
                .map(|p| (attrs(p.attributes()), Value::Sum(p.value())))
                .collect(),
        ),
        AggregatedMetrics::U64(MetricData::Histogram(h)) => (
            format!("histogram u64 {:?}", h.temporality()),
            h.data_points()
                .map(|p| histogram(p, |v| v as f64))
                .collect(),
        ),
        AggregatedMetrics::F64(MetricData::Histogram(h)) => (
            format!("histogram f64 {:?}", h.temporality()),
            h.data_points().map(|p| histogram(p, |v| v)).collect(),
        ),
        other => panic!("unexpected aggregation {other:?}"),
    }
}

/// Collects `provider` now: every metric exported, sorted by name.
fn export(provider: &SdkMeterProvider, exporter: &InMemoryMetricExporter) -> Vec<Metric> {
    exporter.reset();
    provider.force_flush().expect("flush");
    let mut out = Vec::new();
    for resource in exporter.get_finished_metrics().expect("export") {
        for scope in resource.scope_metrics() {
            for metric in scope.metrics() {
                let (kind, mut points) = points_of(metric.data());
                points.sort_by(|a, b| a.0.cmp(&b.0));
                out.push(Metric {
                    scope: (
                        scope.scope().name().to_owned(),
                        scope.scope().version().map(str::to_owned),
                    ),
                    name: metric.name().to_owned(),
                    unit: metric.unit().to_owned(),
                    description: metric.description().to_owned(),
                    kind,
                    points,
                });
            }
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

// ---- a server and a client, each with both handlers ----

/// The echo service whose unary method answers `code <n>` with status
/// `n` (and echoes anything else); its streaming methods echo.
struct Scripted;

#[tonic::async_trait]
impl EchoOverride for Scripted {
    async fn unary(&self, request: Request<EchoRequest>) -> Result<Response<EchoResponse>, Status> {
        let message = request.into_inner().message;
        match message.strip_prefix("code ") {
            Some(code) => {
                let code = Code::from(code.parse::<i32>().expect("a status code"));
                Err(Status::new(code, "scripted"))
            }
            None => Ok(Response::new(EchoResponse { message })),
        }
    }
}

/// The handler of both sides (one instance for the server and the
/// client, as an application may share one): the unary method
/// registered, server streaming accepted by the filter (learned), the
/// other two `other`; with `tenants`, the first two tenants named, the
/// rest `other`.
fn metrics<P: MeterProvider>(provider: &P, tenants: bool) -> Arc<OtelMetrics> {
    let mut builder = OtelMetrics::builder(provider)
        .with_method(UNARY_PATH)
        .with_method_filter(|path: &str| path.ends_with("/ServerStreamingEcho"))
        .with_target("echo");
    if tenants {
        builder = builder.with_tenant_attribute(TenantAttribute::first_seen(2));
    }
    Arc::new(builder.build().expect("valid metrics"))
}

type Twin = Arc<OtelMetrics>;
type Client =
    EchoClient<CombinedService<Channel, Combined<Combined<Arc<Ends>, Twin>, Twin>, ClientSide>>;

/// The same calls recorded twice: into `bound` (an SDK provider given as
/// itself) and `unbound` (the same kind of SDK, unrecognised).
struct Twins {
    client: Client,
    server_ends: Arc<Ends>,
    client_ends: Arc<Ends>,
    bound: (SdkMeterProvider, InMemoryMetricExporter),
    unbound: (SdkMeterProvider, InMemoryMetricExporter),
    calls: u32,
}

impl Twins {
    /// With the tenant attribute if `tenants`.
    async fn new(
        temporality: Temporality,
        cardinality_limit: Option<usize>,
        tenants: bool,
    ) -> Self {
        let bound = sdk(temporality, cardinality_limit);
        let unbound = sdk(temporality, cardinality_limit);
        let unrecognised = Unrecognised(unbound.0.clone());
        let server_ends = Arc::new(Ends::default());
        let client_ends = Arc::new(Ends::default());

        let with_bound = metrics(&bound.0, tenants);
        assert_eq!(bound_instruments(&with_bound), BINDS);
        let fallback = metrics(&unrecognised, tenants);
        assert!(!bound_instruments(&fallback));
        let layer = CombinedLayer::server()
            .with(Arc::clone(&server_ends))
            .with(Arc::clone(&with_bound))
            .with(Arc::clone(&fallback));
        let (addr, incoming) = support::bind().await;
        tokio::spawn(
            tonic::transport::Server::builder()
                .layer(layer)
                .add_service(EchoServer::new(Scripted))
                .serve_with_incoming(incoming),
        );

        let layer = CombinedLayer::client()
            .with(Arc::clone(&client_ends))
            .with(with_bound)
            .with(fallback);
        let channel = support::connect(addr).await;
        let client = EchoClient::new(tower::ServiceBuilder::new().layer(layer).service(channel));
        Self {
            client,
            server_ends,
            client_ends,
            bound,
            unbound,
            calls: 0,
        }
    }

    /// Makes `calls`, one after another, and waits for both sides' `End`s.
    async fn call(&mut self, calls: &[Call]) {
        for call in calls {
            call.make(&mut self.client).await;
        }
        self.calls += u32::try_from(calls.len()).expect("few calls");
        let calls = self.calls;
        let ended = |ends: &Ends| *ends.0.lock().unwrap() == calls;
        wait_until("every call ended on both sides", || {
            ended(&self.server_ends) && ended(&self.client_ends)
        })
        .await;
    }

    /// Collects both SDKs now, and checks that they exported the same.
    fn assert_same_exports(&self, round: &str) -> Vec<Metric> {
        let bound = export(&self.bound.0, &self.bound.1);
        let unbound = export(&self.unbound.0, &self.unbound.1);
        assert_eq!(bound, unbound, "{round}: bound (left) and unbound exports");
        bound
    }
}

/// One call: a method, its request, the tenant it names.
#[derive(Clone, Copy)]
enum Call {
    /// A unary call with this message (`code <n>`: answered with status n).
    Unary(&'static str, Option<&'static str>),
    ServerStreaming(&'static str, Option<&'static str>),
    ClientStreaming(&'static [&'static str], Option<&'static str>),
    Bidi(&'static [&'static str], Option<&'static str>),
}

fn with_org_id<T>(message: T, org_id: Option<&str>) -> Request<T> {
    let mut request = Request::new(message);
    if let Some(org_id) = org_id {
        let value = MetadataValue::try_from(org_id).expect("a header value");
        request.metadata_mut().insert("x-scope-orgid", value);
    }
    request
}

fn req(message: &str) -> EchoRequest {
    EchoRequest {
        message: message.to_owned(),
    }
}

fn stream(messages: &[&str]) -> impl tokio_stream::Stream<Item = EchoRequest> + use<> {
    tokio_stream::iter(messages.iter().map(|m| req(m)).collect::<Vec<_>>())
}

impl Call {
    async fn make(self, client: &mut Client) {
        match self {
            Call::Unary(message, org_id) => {
                let result = client.unary_echo(with_org_id(req(message), org_id)).await;
                assert_eq!(result.is_ok(), !message.starts_with("code "), "{result:?}");
            }
            Call::ServerStreaming(message, org_id) => {
                let response = client
                    .server_streaming_echo(with_org_id(req(message), org_id))
                    .await
                    .expect("server streaming");
                let replies: Vec<_> = response.into_inner().collect().await;
                assert!(replies.iter().all(Result::is_ok), "{replies:?}");
            }
            Call::ClientStreaming(messages, org_id) => {
                client
                    .client_streaming_echo(with_org_id(stream(messages), org_id))
                    .await
                    .expect("client streaming");
            }
            Call::Bidi(messages, org_id) => {
                let response = client
                    .bidirectional_streaming_echo(with_org_id(stream(messages), org_id))
                    .await
                    .expect("bidi");
                let replies: Vec<_> = response.into_inner().collect().await;
                assert!(replies.iter().all(Result::is_ok), "{replies:?}");
            }
        }
    }
}

/// Every method, several status codes, named tenants, `other` and none.
const ALL: [Call; 8] = [
    Call::Unary("hello", Some("team-a")),
    Call::Unary("code 5", Some("team-b")),
    Call::Unary("code 3", Some("team-c")),
    Call::Unary("hello world", None),
    Call::ServerStreaming("a b c", Some("team-a")),
    Call::ClientStreaming(&["x", "yz"], Some("team-b")),
    Call::Bidi(&["p", "q", "r"], None),
    Call::Unary("code 14", Some("team-a")),
];

/// A few of [`ALL`]'s series again; the rest idle.
const SOME: [Call; 3] = [
    Call::Unary("hi", Some("team-a")),
    Call::Unary("hi", Some("team-a")),
    Call::ClientStreaming(&["x"], Some("team-b")),
];

/// A status code and a tenant not seen before.
const NEW: [Call; 2] = [
    Call::Unary("code 4", Some("team-c")),
    Call::Unary("code 16", Some("team-d")),
];

/// Runs the rounds ALL, SOME, ALL + NEW, comparing the exports after
/// each; with the tenant attribute if `tenants`.
async fn same_exports(temporality: Temporality, tenants: bool) {
    let mut twins = Twins::new(temporality, None, tenants).await;
    twins.call(&ALL).await;
    let first = twins.assert_same_exports("first round");
    assert_eq!(first.len(), 9, "every A66 instrument: {first:#?}");
    twins.call(&SOME).await;
    let idle = twins.assert_same_exports("second round, most series idle");
    twins.call(&ALL).await;
    twins.call(&NEW).await;
    twins.assert_same_exports("third round, new series");
    if temporality == Temporality::Delta {
        let points = |export: &[Metric]| export.iter().map(|m| m.points.len()).sum::<usize>();
        assert!(
            points(&idle) < points(&first),
            "delta: idle series are not exported"
        );
        let nothing = twins.assert_same_exports("nothing called");
        assert_eq!(points(&nothing), 0, "delta: nothing to export");
    }
}

#[tokio::test]
async fn otel_bound_instruments_export_the_same_cumulative() {
    same_exports(Temporality::Cumulative, false).await;
    same_exports(Temporality::Cumulative, true).await;
}

#[tokio::test]
async fn otel_bound_instruments_export_the_same_delta() {
    same_exports(Temporality::Delta, false).await;
    same_exports(Temporality::Delta, true).await;
}

/// Past the limit, a set bound goes to the SDK's overflow series, as an
/// unbound measurement would (cumulative: no series is ever forgotten).
#[tokio::test]
async fn otel_bound_instruments_export_the_same_past_the_cardinality_limit() {
    let mut twins = Twins::new(Temporality::Cumulative, Some(3), true).await;
    twins.call(&ALL).await;
    twins.call(&SOME).await;
    twins.call(&NEW).await;
    let export = twins.assert_same_exports("past the limit");
    let overflow = export
        .iter()
        .flat_map(|metric| &metric.points)
        .filter(|(attrs, _)| attrs.iter().any(|(k, _)| k == "otel.metric.overflow"))
        .count();
    assert!(overflow > 0, "some series overflowed: {export:#?}");
}

/// A series is exported once measured, never ahead: no zero points for
/// status codes, methods or tenants not seen (binding every set up front
/// would export them).
#[tokio::test]
async fn otel_bound_instruments_export_no_series_never_recorded() {
    let mut twins = Twins::new(Temporality::Cumulative, None, true).await;
    twins.call(&[Call::Unary("hello", Some("team-a"))]).await;
    twins.call(&[Call::Unary("code 5", Some("team-a"))]).await;
    let export = twins.assert_same_exports("two calls");
    for metric in &export {
        let statuses: Vec<_> = metric
            .points
            .iter()
            .filter_map(|(attrs, _)| attrs.iter().find(|(k, _)| k == "grpc.status"))
            .map(|(_, status)| status.as_str())
            .collect();
        let expected: &[&str] = match metric.name.ends_with(".started") {
            true => &[],
            false => &["NOT_FOUND", "OK"],
        };
        assert_eq!(statuses, expected, "{}", metric.name);
        for (attrs, value) in &metric.points {
            let nonzero = match value {
                Value::Sum(n) => *n > 0,
                Value::Histogram { count, .. } => *count > 0,
            };
            assert!(nonzero, "{} {attrs:?}: {value:?}", metric.name);
        }
    }
    // Each side's `*.started`: one series (method, tenant), counted twice.
    for name in ["grpc.server.call.started", "grpc.client.attempt.started"] {
        let started = export.iter().find(|m| m.name == name).expect(name);
        assert!(
            matches!(started.points.as_slice(), [(_, Value::Sum(2))]),
            "{started:?}"
        );
    }
}

/// Only the SDK's own provider type binds; a provider of unknown type (a
/// `dyn MeterProvider` too) is recorded with attribute sets.
#[test]
fn otel_bound_instruments_only_for_the_sdk_provider() {
    let (provider, _exporter) = sdk(Temporality::Cumulative, None);
    let build = |metrics: tonic_hotpath::otel::OtelMetricsBuilder| metrics.build().unwrap();
    assert_eq!(
        bound_instruments(&build(OtelMetrics::builder(&provider))),
        BINDS
    );
    let unrecognised = Unrecognised(provider.clone());
    assert!(!bound_instruments(&build(OtelMetrics::builder(
        &unrecognised
    ))));
    let as_dyn: &dyn MeterProvider = &provider;
    assert!(!bound_instruments(&build(OtelMetrics::builder(as_dyn))));
    assert!(!bound_instruments(&build(OtelMetrics::builder(
        &NoopMeterProvider::new()
    ))));
    assert!(
        format!("{:?}", OtelMetrics::builder(&provider))
            .contains(&format!("bound_instruments: {BINDS}"))
    );
}

/// An SDK view's aggregation applies to bound instruments too: a
/// histogram turned into a sum exports the same with and without
/// binding.
#[tokio::test]
async fn otel_bound_instruments_follow_the_sdks_views() {
    let make = || {
        let exporter = InMemoryMetricExporter::default();
        let reader = PeriodicReader::builder(exporter.clone())
            .with_interval(Duration::from_secs(24 * 3600))
            .build();
        let provider = SdkMeterProvider::builder()
            .with_reader(reader)
            .with_view(|instrument: &Instrument| {
                (instrument.name() == "grpc.server.call.sent_total_compressed_message_size").then(
                    || {
                        Stream::builder()
                            .with_aggregation(Aggregation::Sum)
                            .build()
                            .expect("a stream")
                    },
                )
            })
            .build();
        (provider, exporter)
    };
    let (bound, bound_exporter) = make();
    let (unbound, unbound_exporter) = make();
    let handlers = [
        metrics(&bound, true),
        metrics(&Unrecognised(unbound.clone()), true),
    ];
    let headers = support::otel::org_id_headers(Some("team-a"));
    for handler in &handlers {
        for code in [Code::Ok, Code::NotFound, Code::Ok] {
            support::otel::drive_rpc_with_headers(
                handler,
                tonic_hotpath::stats::Side::Server,
                UNARY_PATH,
                &headers,
                code,
            );
        }
    }
    let mut exports = [
        export(&bound, &bound_exporter),
        export(&unbound, &unbound_exporter),
    ];
    // Durations differ between the two handlers' RPCs: compare counts.
    for export in &mut exports {
        for metric in export.iter_mut() {
            for (_, value) in &mut metric.points {
                if let Value::Histogram {
                    sum,
                    min,
                    max,
                    buckets,
                    ..
                } = value
                    && metric.name.ends_with(".duration")
                {
                    (*sum, *min, *max) = (0.0, None, None);
                    buckets.fill(0);
                }
            }
        }
    }
    let [bound, unbound] = exports;
    assert_eq!(bound, unbound);
    let sent = bound
        .iter()
        .find(|m| m.name == "grpc.server.call.sent_total_compressed_message_size")
        .expect("sent sizes");
    assert!(sent.kind.starts_with("sum u64"), "{sent:?}");
    assert_eq!(sent.points.len(), 2, "OK and NOT_FOUND: {sent:?}");
}
