//! `otel` benches: what gRPC's OpenTelemetry metrics (`OtelMetrics`, gRFC
//! A66) cost per RPC on the server stack in process, beside no layer, the
//! `CombinedLayer` with a no-op handler (the layer alone), the handler
//! over OpenTelemetry's no-op meter provider (the handler's own work), the
//! metrics with the echo method learned through its service
//! (`with_service`) instead of registered, the metrics beside A72's tracing (`OtelTracing`, W3C propagation, every
//! span sampled, ended into the SDK's batch processor whose exporter
//! discards them), and the crates.io peer `tonic-otel-layer` (0.2, its newest: a server
//! layer recording three instruments per RPC with `grpc_service` /
//! `grpc_method` / `grpc_code` attributes). The tenant attribute
//! (`with_tenant_attribute`) is measured on requests carrying
//! `x-scope-orgid: team-a`, beside the metrics without it on the same
//! requests (`*_org_id` rows): with `team-a` allow-listed, and learned as
//! the first tenant seen. Both real rows record into an
//! SDK meter provider with a periodic reader (in-memory exporter, 60 s
//! interval, so no export runs during the bench). The peer is built on
//! opentelemetry 0.32, so its row records into the 0.32 SDK and ours into
//! the 0.33 SDK: the one difference between the rows that is not the
//! layers' own. With the feature `otel-bound-instruments` (as
//! `--all-features` builds), our SDK rows record through bound instruments
//! (the provider is passed as the `SdkMeterProvider` it is); without it,
//! with attribute sets, as the `*_dyn_provider` rows always do (the SDK
//! passed as a `&dyn MeterProvider`: its type unknown).
//!
//! Runs interleaved first (see [`interleaved`]; the figures to compare),
//! then as criterion rows of one group; allocations per RPC are printed
//! with the criterion rows. A client set (the client layer over the echo
//! routes) is printed interleaved too, and `otel/handler_one_rpc` times
//! the handler alone (one RPC's events, no stack) over the no-op provider
//! and the SDK.
//!
//! `cargo bench --features otel --bench otel -- --warm-up-time 1 --measurement-time 3`

#[path = "gzip_call/mod.rs"]
mod gzip_call;
#[path = "in_process/mod.rs"]
mod in_process;
#[path = "interleaved/mod.rs"]
mod interleaved;
use support::stats_harness;

use std::hint::black_box;

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use gzip_call::{gzip_request, gzip_routes};
use http::HeaderValue;
use in_process::{
    CALLS_PER_ROUND, in_process, in_process_with, round, round_with, service_in_process,
    service_round, service_round_with,
};
use interleaved::Round;
use opentelemetry::metrics::{MeterProvider, NoopMeterProvider};
use opentelemetry::trace::TracerProvider;
use opentelemetry::trace::noop::NoopTracerProvider;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, SdkMeterProvider};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider, SpanData, SpanExporter};
use stats_harness::{Noop, UNARY_PATH, current_thread_runtime, echo_transport, unary_request};
use support::alloc_count::CountingAllocator;
use support::otel::{drive_rpc, drive_rpc_with_headers, org_id_headers, sdk_provider};
use tonic::Code;
use tonic_hotpath::otel::{OtelMetrics, OtelTracing, TenantAttribute};
use tonic_hotpath::stats::{CombinedLayer, Side};
use tower::Layer;
use tower::layer::util::Identity;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

const ROUNDS: usize = 100;

/// The echo service's name, as its generated `SERVICE_NAME`.
const ECHO_SERVICE: &str = "hotpath.echo.Echo";

/// The 0.33 SDK, as an application would set it up.
fn sdk() -> SdkMeterProvider {
    sdk_provider(InMemoryMetricExporter::default())
}

/// The 0.32 SDK, for the peer.
fn sdk_0_32() -> opentelemetry_sdk_0_32::metrics::SdkMeterProvider {
    use opentelemetry_sdk_0_32::metrics as m;
    m::SdkMeterProvider::builder()
        .with_reader(m::PeriodicReader::builder(m::InMemoryMetricExporter::default()).build())
        .build()
}

/// A span exporter that drops what it gets: the bench measures recording,
/// not a backend.
#[derive(Debug)]
struct DiscardSpans;

impl SpanExporter for DiscardSpans {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        drop(black_box(batch));
        Ok(())
    }
}

/// The 0.33 tracing SDK as an application sets it up: every span sampled,
/// ended spans batched off the request path.
fn tracer_provider() -> SdkTracerProvider {
    SdkTracerProvider::builder()
        .with_batch_exporter(DiscardSpans)
        .build()
}

/// A72's tracing handler, W3C propagation.
fn tracing(provider: &SdkTracerProvider) -> OtelTracing<SdkTracer> {
    tracing_over(provider)
}

/// The same over any tracer provider (the no-op one: the handler's own
/// work and allocations).
fn tracing_over<P: TracerProvider>(provider: &P) -> OtelTracing<P::Tracer> {
    OtelTracing::new(provider, TraceContextPropagator::new())
}

/// Our handler, with the echo method registered.
fn metrics<P: MeterProvider + ?Sized>(provider: &P) -> OtelMetrics {
    OtelMetrics::builder(provider)
        .with_method(UNARY_PATH)
        .with_target("http://127.0.0.1:50051")
        .build()
        .expect("valid method path")
}

/// Our handler with the echo service registered: the echo method is
/// learned on its first RPC, then found among the learned methods.
fn metrics_learned<P: MeterProvider + ?Sized>(provider: &P) -> OtelMetrics {
    OtelMetrics::builder(provider)
        .with_service(ECHO_SERVICE)
        .with_target("http://127.0.0.1:50051")
        .build()
        .expect("valid service name")
}

/// The tenant every `*_org_id` / `*_tenant_*` request carries.
const TENANT: &str = "team-a";

/// The unary echo request with `x-scope-orgid: team-a` (its value copied,
/// as h2 decodes it off the wire).
fn org_id_request(body: &Bytes) -> http::Request<tonic::body::Body> {
    let mut request = unary_request(body);
    request.headers_mut().insert(
        "x-scope-orgid",
        HeaderValue::from_bytes(TENANT.as_bytes()).expect("valid header value"),
    );
    request
}

/// [`metrics`] with the tenant attribute, `team-a` allow-listed.
fn metrics_allow_list<P: MeterProvider + ?Sized>(provider: &P) -> OtelMetrics {
    metrics_tenant(provider, TenantAttribute::allow_list([TENANT]))
}

/// [`metrics`] with the tenant attribute, `team-a` learned as the first
/// tenant seen (room for 100).
fn metrics_first_seen<P: MeterProvider + ?Sized>(provider: &P) -> OtelMetrics {
    metrics_tenant(provider, TenantAttribute::first_seen(100))
}

fn metrics_tenant<P: MeterProvider + ?Sized>(
    provider: &P,
    tenants: TenantAttribute,
) -> OtelMetrics {
    OtelMetrics::builder(provider)
        .with_method(UNARY_PATH)
        .with_target("http://127.0.0.1:50051")
        .with_tenant_attribute(tenants)
        .build()
        .expect("valid method path and tenants")
}

fn peer() -> tonic_otel_layer::MetricsLayer {
    tonic_otel_layer::MetricsLayerBuilder::new()
        .with_provider(sdk_0_32())
        .build()
}

fn server(c: &mut Criterion) {
    let rt = current_thread_runtime();
    let provider = sdk();
    let dyn_provider: &dyn MeterProvider = &provider;
    let tracers = tracer_provider();
    let noop_provider = NoopMeterProvider::new();
    let mut variants: Vec<(&str, Round<'_>)> = vec![
        ("no_layer", round(&rt, Identity::new())),
        (
            "combined_noop_handler",
            round(&rt, CombinedLayer::server().with(Noop)),
        ),
        (
            "otel_metrics_noop_provider",
            round(&rt, CombinedLayer::server().with(metrics(&noop_provider))),
        ),
        (
            "otel_metrics",
            round(&rt, CombinedLayer::server().with(metrics(&provider))),
        ),
        (
            "otel_metrics_dyn_provider",
            round(&rt, CombinedLayer::server().with(metrics(dyn_provider))),
        ),
        (
            "otel_metrics_learned_method",
            round(
                &rt,
                CombinedLayer::server().with(metrics_learned(&provider)),
            ),
        ),
        (
            "otel_metrics_org_id",
            round_with(
                &rt,
                CombinedLayer::server().with(metrics(&provider)),
                org_id_request,
            ),
        ),
        (
            "otel_metrics_tenant_allow_list",
            round_with(
                &rt,
                CombinedLayer::server().with(metrics_allow_list(&provider)),
                org_id_request,
            ),
        ),
        (
            "otel_metrics_tenant_first_seen",
            round_with(
                &rt,
                CombinedLayer::server().with(metrics_first_seen(&provider)),
                org_id_request,
            ),
        ),
        (
            "otel_metrics_tracing",
            round(
                &rt,
                CombinedLayer::server()
                    .with(metrics(&provider))
                    .with(tracing(&tracers)),
            ),
        ),
        ("tonic_otel_layer", round(&rt, peer())),
    ];
    interleaved::print_overhead("in-process server", &mut variants, ROUNDS, CALLS_PER_ROUND);
    drop(variants);

    let mut group = c.benchmark_group("otel/in_process_server_unary");
    in_process(&mut group, &rt, "no_layer", Identity::new());
    let layer = CombinedLayer::server().with(Noop);
    in_process(&mut group, &rt, "combined_noop_handler", layer);
    let layer = CombinedLayer::server().with(metrics(&noop_provider));
    in_process(&mut group, &rt, "otel_metrics_noop_provider", layer);
    let layer = CombinedLayer::server().with(metrics(&provider));
    in_process(&mut group, &rt, "otel_metrics", layer);
    let layer = CombinedLayer::server().with(metrics_learned(&provider));
    in_process(&mut group, &rt, "otel_metrics_learned_method", layer);
    let layer = CombinedLayer::server().with(metrics(&provider));
    in_process_with(
        &mut group,
        &rt,
        "otel_metrics_org_id",
        layer,
        org_id_request,
    );
    let layer = CombinedLayer::server().with(metrics_allow_list(&provider));
    let name = "otel_metrics_tenant_allow_list";
    in_process_with(&mut group, &rt, name, layer, org_id_request);
    let layer = CombinedLayer::server().with(metrics_first_seen(&provider));
    let name = "otel_metrics_tenant_first_seen";
    in_process_with(&mut group, &rt, name, layer, org_id_request);
    let layer = CombinedLayer::server().with(tracing_over(&NoopTracerProvider::new()));
    in_process(&mut group, &rt, "otel_tracing_noop_provider", layer);
    let layer = CombinedLayer::server()
        .with(metrics(&provider))
        .with(tracing(&tracers));
    in_process(&mut group, &rt, "otel_metrics_tracing", layer);
    in_process(&mut group, &rt, "tonic_otel_layer", peer());
    group.finish();
}

/// The client layer over the echo routes, interleaved only (the peer has
/// no client layer).
fn client(_: &mut Criterion) {
    let rt = current_thread_runtime();
    let provider = sdk();
    let noop = CombinedLayer::client().with(Noop);
    let tracers = tracer_provider();
    let ours = CombinedLayer::client().with(metrics(&provider));
    let ours_dyn = CombinedLayer::client().with(metrics(&provider as &dyn MeterProvider));
    let ours_traced = CombinedLayer::client()
        .with(metrics(&provider))
        .with(tracing(&tracers));
    let ours_tenant = CombinedLayer::client().with(metrics_allow_list(&provider));
    let mut variants: Vec<(&str, Round<'_>)> = vec![
        ("no_layer", service_round(&rt, echo_transport())),
        (
            "combined_noop_handler",
            service_round(&rt, noop.layer(echo_transport())),
        ),
        (
            "otel_metrics",
            service_round(&rt, ours.layer(echo_transport())),
        ),
        (
            "otel_metrics_dyn_provider",
            service_round(&rt, ours_dyn.layer(echo_transport())),
        ),
        (
            "otel_metrics_tracing",
            service_round(&rt, ours_traced.layer(echo_transport())),
        ),
        (
            "otel_metrics_org_id",
            service_round_with(&rt, ours.layer(echo_transport()), org_id_request),
        ),
        (
            "otel_metrics_tenant_allow_list",
            service_round_with(&rt, ours_tenant.layer(echo_transport()), org_id_request),
        ),
    ];
    interleaved::print_overhead("in-process client", &mut variants, ROUNDS, CALLS_PER_ROUND);
}

/// The handler alone, without the stack: `tag_rpc` and one RPC's events
/// (`Begin`, a message each way, `End`), on each side, over the no-op
/// provider (the handler's own work) and the SDK (what recording costs;
/// `sdk_dyn_provider`: the SDK as a `&dyn MeterProvider`, recorded with
/// attribute sets), and over the no-op provider with the method learned through its
/// service instead of registered. The `*_headers` rows deliver the request
/// and response headers too (`x-scope-orgid: team-a`), without and with
/// the tenant attribute.
fn handler(c: &mut Criterion) {
    let provider = sdk();
    let noop_provider = NoopMeterProvider::new();
    let mut group = c.benchmark_group("otel/handler_one_rpc");
    for (name, handler) in [
        ("noop_provider", metrics(&noop_provider)),
        ("sdk", metrics(&provider)),
        ("sdk_dyn_provider", metrics(&provider as &dyn MeterProvider)),
        ("noop_provider_learned", metrics_learned(&noop_provider)),
    ] {
        for side in [Side::Server, Side::Client] {
            let row = format!("{name}_{side:?}").to_lowercase();
            group.bench_function(row, |b| {
                b.iter(|| drive_rpc(black_box(&handler), side, UNARY_PATH, Code::Ok));
            });
        }
    }
    let headers = org_id_headers(Some(TENANT));
    for (name, handler) in [
        ("noop_provider_headers", metrics(&noop_provider)),
        (
            "noop_provider_headers_tenant_allow_list",
            metrics_allow_list(&noop_provider),
        ),
        (
            "noop_provider_headers_tenant_first_seen",
            metrics_first_seen(&noop_provider),
        ),
        ("sdk_headers", metrics(&provider)),
        (
            "sdk_headers_tenant_allow_list",
            metrics_allow_list(&provider),
        ),
    ] {
        for side in [Side::Server, Side::Client] {
            let row = format!("{name}_{side:?}").to_lowercase();
            group.bench_function(row, |b| {
                b.iter(|| {
                    drive_rpc_with_headers(
                        black_box(&handler),
                        side,
                        UNARY_PATH,
                        black_box(&headers),
                        Code::Ok,
                    );
                });
            });
        }
    }
    group.finish();
}

/// A unary call whose 64 KiB request arrives gzip-compressed and which
/// tonic's server decodes (the echo routes accept gzip), in process: no
/// layer, the layer with two no-op handlers, `OtelMetrics` (SDK), and
/// `OtelMetrics` with `OtelTracing` (A72's `message-size` is the
/// uncompressed size: only that row's handlers ask for uncompressed sizes,
/// so only it decompresses each message a second time). Interleaved, then
/// as criterion rows.
fn server_gzip(c: &mut Criterion) {
    let rt = current_thread_runtime();
    let provider = sdk();
    let tracers = tracer_provider();
    let two_noops = || CombinedLayer::server().with(Noop).with(Noop);
    let metrics_only = || CombinedLayer::server().with(metrics(&provider));
    let traced = || {
        CombinedLayer::server()
            .with(metrics(&provider))
            .with(tracing(&tracers))
    };
    let mut variants: Vec<(&str, Round<'_>)> = vec![
        (
            "no_layer",
            service_round_with(&rt, gzip_routes(Identity::new()), gzip_request),
        ),
        (
            "combined_two_noop_handlers",
            service_round_with(&rt, gzip_routes(two_noops()), gzip_request),
        ),
        (
            "otel_metrics",
            service_round_with(&rt, gzip_routes(metrics_only()), gzip_request),
        ),
        (
            "otel_metrics_tracing",
            service_round_with(&rt, gzip_routes(traced()), gzip_request),
        ),
    ];
    interleaved::print_overhead("gzip 64 KiB server", &mut variants, 30, CALLS_PER_ROUND);
    drop(variants);

    let mut group = c.benchmark_group("otel/in_process_server_unary_gzip_64k");
    let g = &mut group;
    service_in_process(
        g,
        &rt,
        "no_layer",
        gzip_routes(Identity::new()),
        gzip_request,
    );
    let name = "combined_two_noop_handlers";
    service_in_process(g, &rt, name, gzip_routes(two_noops()), gzip_request);
    let name = "otel_metrics";
    service_in_process(g, &rt, name, gzip_routes(metrics_only()), gzip_request);
    let name = "otel_metrics_tracing";
    service_in_process(g, &rt, name, gzip_routes(traced()), gzip_request);
    group.finish();
}

criterion_group!(benches, server, client, handler, server_gzip);
criterion_main!(benches);
