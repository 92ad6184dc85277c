//! Reads an OpenTelemetry SDK meter provider's export back for the `otel`
//! tests: an SDK with the in-memory exporter, its data points by
//! instrument and attribute set, and A66's bucket boundaries written out
//! from the gRFC (independently of the crate's copy, so a wrong list in
//! the crate fails the tests).

use std::collections::BTreeMap;
use std::sync::LazyLock;
use std::time::Instant;

use http::{HeaderMap, HeaderValue};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use tonic::Code;
use tonic_hotpath::otel::{OtelMetrics, OtelMetricsBuilder};
use tonic_hotpath::stats::{End, Payload, RpcEvent, RpcInfo, Side, StatsHandler};

/// A66's latency buckets.
pub const LATENCY: [f64; 41] = [
    0.0, 0.00001, 0.00005, 0.0001, 0.0003, 0.0006, 0.0008, 0.001, 0.002, 0.003, 0.004, 0.005,
    0.006, 0.008, 0.01, 0.013, 0.016, 0.02, 0.025, 0.03, 0.04, 0.05, 0.065, 0.08, 0.1, 0.13, 0.16,
    0.2, 0.25, 0.3, 0.4, 0.5, 0.65, 0.8, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0,
];

/// A66's size buckets.
pub const SIZES: [f64; 14] = [
    0.0,
    1024.0,
    2048.0,
    4096.0,
    16384.0,
    65536.0,
    262144.0,
    1048576.0,
    4194304.0,
    16777216.0,
    67108864.0,
    268435456.0,
    1073741824.0,
    4294967296.0,
];

// ---- reading the SDK's export back ----

pub type Attrs = BTreeMap<String, String>;

/// Counts by attribute set, in the sets' order.
pub type Counts = Vec<(Attrs, u64)>;

/// One exported data point.
#[derive(Debug, Clone, PartialEq)]
pub enum Point {
    Counter(u64),
    /// A floating-point counter's total (seconds, ...).
    Total(f64),
    /// A gauge's last value (an integer gauge's as `f64`).
    Gauge(f64),
    Histogram {
        count: u64,
        sum: f64,
        bounds: Vec<f64>,
    },
}

/// An exported instrument with its data points by attribute set.
#[derive(Debug)]
pub struct Exported {
    pub unit: String,
    pub description: String,
    pub scope: (String, Option<String>),
    pub points: BTreeMap<Attrs, Point>,
}

/// An SDK meter provider exporting to memory.
pub struct Sdk {
    provider: SdkMeterProvider,
    exporter: InMemoryMetricExporter,
}

impl Default for Sdk {
    fn default() -> Self {
        Self::new()
    }
}

impl Sdk {
    /// An SDK whose reader exports every 60 s (the SDK's default).
    pub fn new() -> Self {
        let exporter = InMemoryMetricExporter::default();
        let provider = sdk_provider(exporter.clone());
        Self { provider, exporter }
    }

    /// An SDK whose reader exports only when asked ([`export`](Self::export)):
    /// its periodic export (every 60 s by default) would copy every data
    /// point into the in-memory exporter in the middle of a long test.
    pub fn exporting_on_demand() -> Self {
        let exporter = InMemoryMetricExporter::default();
        let reader = PeriodicReader::builder(exporter.clone())
            .with_interval(std::time::Duration::from_secs(24 * 3600))
            .build();
        let provider = SdkMeterProvider::builder().with_reader(reader).build();
        Self { provider, exporter }
    }

    pub fn metrics(&self) -> OtelMetricsBuilder {
        OtelMetrics::builder(&self.provider)
    }

    /// The meter provider, for other instruments than `OtelMetrics`'.
    pub fn provider(&self) -> &SdkMeterProvider {
        &self.provider
    }

    /// Everything recorded so far (cumulative), by instrument name.
    pub fn export(&self) -> BTreeMap<String, Exported> {
        self.exporter.reset();
        self.provider.force_flush().expect("flush");
        let mut out = BTreeMap::new();
        for resource in self.exporter.get_finished_metrics().expect("export") {
            for scope in resource.scope_metrics() {
                for metric in scope.metrics() {
                    let mut points = BTreeMap::new();
                    collect_points(metric.data(), &mut points);
                    out.insert(
                        metric.name().to_owned(),
                        Exported {
                            unit: metric.unit().to_owned(),
                            description: metric.description().to_owned(),
                            scope: (
                                scope.scope().name().to_owned(),
                                scope.scope().version().map(str::to_owned),
                            ),
                            points,
                        },
                    );
                }
            }
        }
        out
    }

    /// Each data point of `name` as a count (a counter's value, a
    /// histogram's count) with its attribute set, in the sets' order;
    /// empty if nothing was recorded.
    pub fn counts(&self, name: &str) -> Counts {
        self.export().get(name).map_or_else(Vec::new, |exported| {
            exported
                .points
                .iter()
                .map(|(attrs, point)| {
                    let count = match point {
                        Point::Counter(n) => *n,
                        Point::Gauge(value) | Point::Total(value) => *value as u64,
                        Point::Histogram { count, .. } => *count,
                    };
                    (attrs.clone(), count)
                })
                .collect()
        })
    }

    /// The counts of `name` (as [`counts`](Self::counts)) summed by the
    /// value of attribute `key`: `None` for points without it.
    pub fn counts_by(&self, name: &str, key: &str) -> BTreeMap<Option<String>, u64> {
        let mut out = BTreeMap::new();
        for (attrs, count) in self.counts(name) {
            *out.entry(attrs.get(key).cloned()).or_default() += count;
        }
        out
    }

    /// The data point of `name` with exactly `attrs`.
    pub fn point(&self, name: &str, attrs: &[(&str, &str)]) -> Option<Point> {
        self.export()
            .get(name)?
            .points
            .get(&attrs_of(attrs))
            .cloned()
    }
}

/// An attribute set from `(key, value)` pairs.
pub fn attrs_of(pairs: &[(&str, &str)]) -> Attrs {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn to_attrs<'a>(kvs: impl Iterator<Item = &'a opentelemetry::KeyValue>) -> Attrs {
    kvs.map(|kv| (kv.key.to_string(), kv.value.to_string()))
        .collect()
}

fn collect_points(data: &AggregatedMetrics, out: &mut BTreeMap<Attrs, Point>) {
    match data {
        AggregatedMetrics::U64(MetricData::Sum(sum)) => {
            assert!(sum.is_monotonic(), "counters are monotonic");
            for p in sum.data_points() {
                out.insert(to_attrs(p.attributes()), Point::Counter(p.value()));
            }
        }
        AggregatedMetrics::F64(MetricData::Sum(sum)) => {
            assert!(sum.is_monotonic(), "counters are monotonic");
            for p in sum.data_points() {
                out.insert(to_attrs(p.attributes()), Point::Total(p.value()));
            }
        }
        AggregatedMetrics::U64(MetricData::Gauge(gauge)) => {
            for p in gauge.data_points() {
                out.insert(to_attrs(p.attributes()), Point::Gauge(p.value() as f64));
            }
        }
        AggregatedMetrics::F64(MetricData::Gauge(gauge)) => {
            for p in gauge.data_points() {
                out.insert(to_attrs(p.attributes()), Point::Gauge(p.value()));
            }
        }
        AggregatedMetrics::U64(MetricData::Histogram(h)) => {
            for p in h.data_points() {
                let point = Point::Histogram {
                    count: p.count(),
                    sum: p.sum() as f64,
                    bounds: p.bounds().collect(),
                };
                out.insert(to_attrs(p.attributes()), point);
            }
        }
        AggregatedMetrics::F64(MetricData::Histogram(h)) => {
            for p in h.data_points() {
                let point = Point::Histogram {
                    count: p.count(),
                    sum: p.sum(),
                    bounds: p.bounds().collect(),
                };
                out.insert(to_attrs(p.attributes()), point);
            }
        }
        other => panic!("unexpected aggregation {other:?}"),
    }
}

pub fn histogram(point: Option<Point>) -> (u64, f64, Vec<f64>) {
    match point {
        Some(Point::Histogram { count, sum, bounds }) => (count, sum, bounds),
        other => panic!("expected a histogram point, got {other:?}"),
    }
}

/// An SDK meter provider as an application sets one up: a periodic reader
/// (60 s interval; flushed on demand) exporting to `exporter`.
pub fn sdk_provider(exporter: InMemoryMetricExporter) -> SdkMeterProvider {
    SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(exporter).build())
        .build()
}

/// One RPC's events through `handler` on `side`, as the layer delivers
/// them (one message each way).
pub fn drive_rpc(handler: &OtelMetrics, side: Side, method: &str, code: Code) {
    let info = RpcInfo::new(side, method);
    let mut state = handler.tag_rpc(&info, None);
    let begin = Instant::now();
    let payload = Payload::uncompressed(7);
    for event in [
        RpcEvent::Begin { time: begin },
        RpcEvent::InPayload(payload),
        RpcEvent::OutPayload(payload),
        RpcEvent::End(End::new(code, begin, Instant::now())),
    ] {
        handler.handle_rpc(&mut state, &event);
    }
}

/// Request headers carrying `x-scope-orgid: <org_id>` (none for `None`).
pub fn org_id_headers(org_id: Option<&str>) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("content-type", HeaderValue::from_static("application/grpc"));
    headers.insert("te", HeaderValue::from_static("trailers"));
    if let Some(org_id) = org_id {
        headers.insert(
            "x-scope-orgid",
            HeaderValue::from_str(org_id).expect("a header value"),
        );
    }
    headers
}

/// One served RPC's events through `handler` on `side`, as the layer
/// delivers them, its request headers included (`request`): on a server
/// `InHeader`, `Begin`, a message each way with gRPC response headers
/// between, `End`; on a client `Begin`, `OutHeader`, a message each way,
/// `End`.
pub fn drive_rpc_with_headers(
    handler: &OtelMetrics,
    side: Side,
    method: &str,
    request: &HeaderMap,
    code: Code,
) {
    let response = &*RESPONSE_HEADERS;
    let info = RpcInfo::new(side, method);
    let mut state = handler.tag_rpc(&info, None);
    let begin = Instant::now();
    let payload = Payload::uncompressed(7);
    let events = match side {
        Side::Server => [
            RpcEvent::InHeader(request),
            RpcEvent::Begin { time: begin },
            RpcEvent::InPayload(payload),
            RpcEvent::OutHeader(response),
            RpcEvent::OutPayload(payload),
        ],
        Side::Client => [
            RpcEvent::Begin { time: begin },
            RpcEvent::OutHeader(request),
            RpcEvent::OutPayload(payload),
            RpcEvent::InHeader(response),
            RpcEvent::InPayload(payload),
        ],
    };
    for event in &events {
        handler.handle_rpc(&mut state, event);
    }
    let end = End::new(code, begin, Instant::now());
    handler.handle_rpc(&mut state, &RpcEvent::End(end));
}

/// A server RPC that the server does not serve, as tonic answers a
/// made-up method (trailers-only `UNIMPLEMENTED`, request unread):
/// `InHeader` (`request`), `Begin`, `End`.
pub fn drive_unanswered_server_rpc(handler: &OtelMetrics, method: &str, request: &HeaderMap) {
    let info = RpcInfo::new(Side::Server, method);
    let mut state = handler.tag_rpc(&info, None);
    let begin = Instant::now();
    handler.handle_rpc(&mut state, &RpcEvent::InHeader(request));
    handler.handle_rpc(&mut state, &RpcEvent::Begin { time: begin });
    let end = End::new(Code::Unimplemented, begin, Instant::now());
    handler.handle_rpc(&mut state, &RpcEvent::End(end));
}

/// gRPC response headers, as a server sends them before its first
/// message (made once: driving an RPC allocates nothing of its own).
static RESPONSE_HEADERS: LazyLock<HeaderMap> = LazyLock::new(|| {
    let mut headers = HeaderMap::new();
    headers.insert("content-type", HeaderValue::from_static("application/grpc"));
    headers
});
