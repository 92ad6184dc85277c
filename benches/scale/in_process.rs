//! The in-process part: each layered service is built once over tonic's
//! `Routes` with `tonic_health`'s service, then N OS threads (each with
//! its own current-thread runtime, so no runtime is shared and none is
//! what is measured) call `/grpc.health.v1.Health/Check` through it,
//! cloning the service per request as hyper-util does
//! (`service.clone().oneshot(request)`) and driving the response body to
//! its trailers. Each thread reads its own CPU clock and context-switch
//! counters around its calls (after a warm-up and a barrier that starts
//! all threads together).

use std::sync::Barrier;

use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderValue, Request, Response};
use opentelemetry::metrics::{MeterProvider, NoopMeterProvider};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, SdkMeterProvider};
use prost::Message;
use tonic::body::Body;
use tonic::service::Routes;
use tonic_health::pb::HealthCheckRequest;
use tonic_hotpath::channelz::ServerEntry;
use tonic_hotpath::limits::AdaptiveThrottleLayer;
use tonic_hotpath::metadata::OutgoingMetadataLayer;
use tonic_hotpath::otel::{OtelMetrics, TenantAttribute};
use tonic_hotpath::stats::{CombinedLayer, RpcEvent, ShardedCounter, StatsHandler};
use tonic_hotpath::tenant::{OrgId, RequireOrgIdLayer, SetOrgIdLayer};
use tower::layer::util::Identity;
use tower::{BoxError, Layer, Service, ServiceBuilder, ServiceExt};

use super::clock::{Spent, ThreadClock};
use super::operator::generous_limits;
use super::table::{Table, median, spaced};
use support::otel::sdk_provider;
use support::stats_harness::{Noop, call_in_process};

/// The method every RPC calls.
pub const CHECK_PATH: &str = "/grpc.health.v1.Health/Check";

/// The org id tenant requests carry.
pub const ORG_ID: &str = "team-a";

/// What to run.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Thread counts, in the order run.
    pub threads: Vec<usize>,
    /// Timed RPCs per thread per cell.
    pub rpcs: u64,
    /// Rounds: every mode once per round, in an order rotated per round.
    pub rounds: usize,
}

/// A way of calling the health service: its names and the run of one
/// cell (N threads, RPCs per thread).
pub struct Mode {
    /// The name `SCALE_MODES` takes.
    pub key: &'static str,
    /// The column heading.
    pub column: &'static str,
    /// What it runs, for the legend.
    pub label: &'static str,
    run: Box<dyn Fn(usize, u64) -> Cell>,
    /// A line printed after the tables (what a binary log did with its
    /// entries), if the mode has one.
    summary: Option<Box<dyn Fn() -> String>>,
}

/// The meter providers the OpenTelemetry modes record into; kept alive
/// for the whole run.
pub struct Providers {
    sdk: SdkMeterProvider,
    noop: NoopMeterProvider,
}

impl Providers {
    pub fn new() -> Self {
        Self {
            sdk: sdk_provider(InMemoryMetricExporter::default()),
            noop: NoopMeterProvider::new(),
        }
    }

    /// The 0.33 SDK: a periodic reader (60 s interval, so no export runs
    /// during a run) exporting to memory.
    pub fn sdk(&self) -> &SdkMeterProvider {
        &self.sdk
    }
}

/// Counts `End`s in a `ShardedCounter`, the README's example handler
/// shape (it keeps the default `PAYLOAD_TIMES`, as the README's does).
#[derive(Debug, Default)]
pub struct CountEnds {
    ends: ShardedCounter,
}

impl StatsHandler for CountEnds {
    type RpcState = ();
    type ConnState = ();

    fn handle_rpc(&self, _: &mut (), event: &RpcEvent<'_>) {
        if let RpcEvent::End(_) = event {
            self.ends.add(1);
        }
    }
}

/// Every mode, `bare` first (the baseline of the ratios).
pub fn modes(providers: &Providers) -> Vec<Mode> {
    let set_org_id = SetOrgIdLayer::new(OrgId::new(ORG_ID).expect("valid org id"));
    let mut modes = vec![
        server(
            ("bare", "bare", "no layer: the health routes alone"),
            Identity::new(),
        ),
        server(
            (
                "noop2",
                "2 no-op",
                "CombinedLayer::server() with 2 no-op handlers",
            ),
            CombinedLayer::server().with(Noop).with(Noop),
        ),
        server(
            (
                "noop1",
                "1 no-op",
                "CombinedLayer::server() with 1 no-op handler",
            ),
            CombinedLayer::server().with(Noop),
        ),
        server(
            (
                "channelz",
                "channelz",
                "CombinedLayer::server() with channelz's ServerEntry (server calls counted per thread slot)",
            ),
            CombinedLayer::server().with(ServerEntry::new()),
        ),
        server(
            (
                "count2",
                "2 counting",
                "CombinedLayer::server() with 2 handlers counting Ends in a ShardedCounter each",
            ),
            CombinedLayer::server()
                .with(CountEnds::default())
                .with(CountEnds::default()),
        ),
        server(
            (
                "otel-sdk",
                "OtelMetrics SDK",
                "OtelMetrics (A66) into the 0.33 SDK (periodic reader, in-memory exporter)",
            ),
            CombinedLayer::server().with(otel_metrics(&providers.sdk)),
        ),
        server(
            (
                "otel-tenant",
                "OtelMetrics tenant",
                "OtelMetrics with the tenant attribute (the requests' team-a allow-listed) into the 0.33 SDK",
            ),
            CombinedLayer::server().with(otel_metrics_tenant(&providers.sdk)),
        ),
        server(
            (
                "otel-noop",
                "OtelMetrics no-op",
                "OtelMetrics over the no-op meter provider",
            ),
            CombinedLayer::server().with(otel_metrics(&providers.noop)),
        ),
        server(
            (
                "otel-tenant-noop",
                "OtelMetrics tenant no-op",
                "OtelMetrics with the tenant attribute over the no-op meter provider (the handler's own tenant lookup)",
            ),
            CombinedLayer::server().with(otel_metrics_tenant(&providers.noop)),
        ),
        server(
            (
                "peer",
                "tonic-otel-layer",
                "tonic-otel-layer 0.2 into the 0.32 SDK",
            ),
            tonic_otel_layer(),
        ),
        server(
            (
                "require-org",
                "RequireOrgId",
                "RequireOrgIdLayer (every server request carries x-scope-orgid)",
            ),
            RequireOrgIdLayer::new(),
        ),
        server(
            (
                "tenant-limit",
                "TenantLimit 1 tenant",
                "TenantLimitLayer under its limits (in-flight and rate), every request for one tenant",
            ),
            generous_limits(),
        ),
        service_mode(
            (
                "tenant-limit-many",
                "TenantLimit many tenants",
                "TenantLimitLayer under its limits, each thread's requests going round 1 024 tenants",
            ),
            generous_limits().layer(health_routes()),
            many_tenants_request,
        ),
        server(
            (
                "adaptive",
                "AdaptiveLimit 1 tenant",
                "AdaptiveLimitLayer under its limit (pinned at 100 000: the controller runs, never refuses), every request for one tenant",
            ),
            tonic_hotpath::limits::AdaptiveLimitLayer::new()
                .never_shed_services(Vec::<&str>::new())
                .gradient(
                    tonic_hotpath::limits::Gradient::default()
                        .initial_limit(100_000)
                        .limits(100_000, 100_000),
                ),
        ),
        service_mode(
            (
                "set-org",
                "client SetOrgId",
                "client side: SetOrgIdLayer over OutgoingMetadataLayer over the routes (no chain attached)",
            ),
            ServiceBuilder::new()
                .layer(set_org_id)
                .layer(OutgoingMetadataLayer::new())
                .service(health_transport()),
            client_request,
        ),
        service_mode(
            (
                "throttle",
                "client AdaptiveThrottle",
                "client side: AdaptiveThrottleLayer over the routes (every call accepted: it rejects none)",
            ),
            AdaptiveThrottleLayer::new().layer(health_transport()),
            client_request,
        ),
    ];
    #[cfg(feature = "binlog")]
    modes.extend(binlog::modes(providers));
    #[cfg(feature = "orca")]
    modes.extend(orca::modes());
    modes
}

/// The per-call load reports' modes (feature `orca`): `CallMetricsLayer`
/// over a handler that never takes its recorder, and over one that
/// records a request cost and two named metrics on every call, over
/// process-wide values (a `ServerMetricsRecorder` every call reads).
#[cfg(feature = "orca")]
mod orca {
    use tonic_hotpath::orca::ServerMetricsRecorder;
    use tonic_hotpath::orca::server::CallMetricsLayer;
    use tower::ServiceBuilder;

    use super::{Mode, server};
    use crate::records::Records;

    pub fn modes() -> Vec<Mode> {
        let process = ServerMetricsRecorder::new();
        process.set_cpu_utilization(0.42);
        process.set_qps(950.0);
        vec![
            server(
                (
                    "orca-untouched",
                    "ORCA untouched",
                    "CallMetricsLayer over a handler that never takes its recorder (no trailer)",
                ),
                CallMetricsLayer::new(),
            ),
            server(
                (
                    "orca-records",
                    "ORCA records",
                    "CallMetricsLayer over process-wide values (CPU, QPS), the handler recording a request cost and two named metrics per call",
                ),
                ServiceBuilder::new()
                    .layer(CallMetricsLayer::builder().server_metrics(process).build())
                    .layer(tower::layer::layer_fn(Records)),
            ),
        ]
    }
}

/// The binary log's modes (feature `binlog`): `BinaryLog` with the health
/// method excluded by its filter (one lookup per RPC, nothing shared
/// touched); logging every call to a sink that takes whole buffers of
/// framed entries and keeps nothing; and logging every call to a
/// `FileSink` on a tmpfs file (`/dev/shm` where there is one); and the
/// stack an operator runs (`operator`: every observer on one layer, the
/// log leaving the check out, then the tenant's checks). The log's writer
/// thread is not one of the timed threads: its CPU time is not in the
/// figures; entries that find their thread's buffer full are dropped
/// (counted, printed after the tables with the file's throughput).
#[cfg(feature = "binlog")]
mod binlog {
    use std::path::PathBuf;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use tonic_hotpath::binlog::{BinaryLog, FileSink, Filter, Framing};
    use tonic_hotpath::stats::CombinedLayer;

    use super::super::operator::{Discard, log_leaving_out, operator_stack};
    use super::{CHECK_PATH, Mode, Providers, generous_limits, otel_metrics, server};

    /// The tmpfs file the `binlog-file` mode writes.
    fn tmpfs_path() -> PathBuf {
        let shm = std::path::Path::new("/dev/shm");
        let dir = if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        dir.join(format!("tonic-hotpath-scale-{}.binlog", std::process::id()))
    }

    /// A log whose filter leaves the health check out
    /// (`other.Service/*,-grpc.health.v1.Health/Check`).
    fn excluding() -> BinaryLog {
        log_leaving_out(CHECK_PATH)
    }

    pub fn modes(providers: &Providers) -> Vec<Mode> {
        let excluded = excluding();
        let logged = BinaryLog::builder(Filter::all(), Discard)
            .build()
            .expect("writer thread");
        let path = tmpfs_path();
        let file = FileSink::create(&path, Framing::Grpc).expect("tmpfs file");
        let to_file = BinaryLog::builder(Filter::all(), file)
            .build()
            .expect("writer thread");
        let mut modes: Vec<Mode> = [
            (
                (
                    "binlog-excluded",
                    "BinaryLog excluded",
                    "BinaryLog whose filter excludes the health check (other.Service/*,-grpc.health.v1.Health/Check)",
                ),
                excluded,
            ),
            (
                (
                    "binlog-logged",
                    "BinaryLog logging",
                    "BinaryLog logging every call (*) to a sink that takes whole buffers of framed entries and keeps nothing",
                ),
                logged,
            ),
        ]
        .into_iter()
        .map(|(names, log)| {
            let mut mode = server(names, CombinedLayer::server().with(log.clone()));
            let key = names.0;
            mode.summary = Some(Box::new(move || {
                // Every entry logged is written or counted by then.
                let shutdown = log.shutdown();
                let counts = log.counts();
                format!(
                    "- `{key}`: entries written {}, dropped (buffers full) {}, failed {} ({shutdown:?})",
                    counts.written, counts.dropped, counts.failed
                )
            }));
            mode
        })
        .collect();

        let mut mode = server(
            (
                "binlog-file",
                "BinaryLog to file",
                "BinaryLog logging every call (*) to a FileSink on a tmpfs file (grpc-go's framing)",
            ),
            CombinedLayer::server().with(to_file.clone()),
        );
        // The time the mode's cells ran: the entries' arrival rate.
        let spent = Arc::new(Mutex::new(Duration::ZERO));
        let run = mode.run;
        let timed = Arc::clone(&spent);
        mode.run = Box::new(move |threads, rpcs| {
            let started = Instant::now();
            let cell = run(threads, rpcs);
            *timed.lock().expect("timer") += started.elapsed();
            cell
        });
        mode.summary = Some(Box::new(move || {
            let shutdown = to_file.shutdown();
            let counts = to_file.counts();
            let bytes = std::fs::metadata(&path).map_or(0, |meta| meta.len());
            let _ = std::fs::remove_file(&path);
            let seconds = spent.lock().expect("timer").as_secs_f64();
            format!(
                "- `binlog-file`: entries written {}, dropped (buffers full) {}, failed {} \
                 ({shutdown:?}); {:.0} entries/s and {:.1} MB/s into {} over the {seconds:.1} s \
                 its cells ran (warm-ups included)",
                counts.written,
                counts.dropped,
                counts.failed,
                counts.written as f64 / seconds,
                bytes as f64 / seconds / 1e6,
                path.display(),
            )
        }));
        modes.push(mode);

        // The stack an operator runs: every observer on one layer, then
        // the tenant's checks.
        modes.push(server(
            (
                "operator",
                "operator stack",
                "CombinedLayer::server() with OtelMetrics (SDK), channelz's ServerEntry and a BinaryLog that leaves the check out, then RequireOrgIdLayer and TenantLimitLayer (under its limits)",
            ),
            operator_stack(
                otel_metrics(providers.sdk()),
                excluding(),
                generous_limits(),
            ),
        ));
        modes
    }
}

/// Tenants of [`many_tenants_request`].
const MANY_TENANTS: usize = 1_024;

/// A server request (as [`server_request`]) for the next of
/// [`MANY_TENANTS`] tenants, each thread starting at its own.
fn many_tenants_request(body: &Bytes) -> Request<Body> {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicUsize, Ordering};
    static THREADS: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static TENANTS: Vec<String> = (0..MANY_TENANTS).map(|i| format!("tenant-{i:04}")).collect();
        static NEXT: Cell<usize> = Cell::new(THREADS.fetch_add(97, Ordering::Relaxed));
    }
    let tenant = NEXT.with(|next| {
        let i = next.get();
        next.set(i.wrapping_add(1));
        i % MANY_TENANTS
    });
    let mut request = client_request(body);
    TENANTS.with(|tenants| {
        request.headers_mut().insert(
            OrgId::HEADER,
            HeaderValue::from_bytes(tenants[tenant].as_bytes()).expect("valid header value"),
        );
    });
    request
}

/// `OtelMetrics` (gRFC A66) with the health method registered. The
/// provider is taken by its type: an `SdkMeterProvider` is recorded
/// through bound instruments with the feature `otel-bound-instruments`.
pub fn otel_metrics<P: MeterProvider + ?Sized>(provider: &P) -> OtelMetrics {
    OtelMetrics::builder(provider)
        .with_method(CHECK_PATH)
        .build()
        .expect("valid method path")
}

/// [`otel_metrics`] with the tenant attribute: the requests' org id
/// allow-listed, so every RPC records it by name.
pub fn otel_metrics_tenant<P: MeterProvider + ?Sized>(provider: &P) -> OtelMetrics {
    OtelMetrics::builder(provider)
        .with_method(CHECK_PATH)
        .with_tenant_attribute(TenantAttribute::allow_list([ORG_ID]))
        .build()
        .expect("valid method path and tenant")
}

/// The crates.io peer, 0.2 (its newest), on the 0.32 SDK it is built for,
/// set up as `benches/otel.rs` does.
fn tonic_otel_layer() -> tonic_otel_layer::MetricsLayer {
    use opentelemetry_sdk_0_32::metrics as m;
    let provider = m::SdkMeterProvider::builder()
        .with_reader(m::PeriodicReader::builder(m::InMemoryMetricExporter::default()).build())
        .build();
    tonic_otel_layer::MetricsLayerBuilder::new()
        .with_provider(provider)
        .build()
}

/// The health service's `Routes`, as tonic builds them below its own
/// layers (the service reports `SERVING` for `""`).
pub fn health_routes() -> Routes {
    let (_reporter, service) = tonic_health::server::health_reporter();
    Routes::new(service)
}

/// The health routes standing in for a client `Channel` (their error
/// boxed, as a client transport's is).
fn health_transport()
-> impl Service<Request<Body>, Response = Response<Body>, Error = BoxError, Future: Send> + Clone + Send
{
    ServiceExt::<Request<Body>>::map_err(health_routes(), BoxError::from)
}

/// One length-prefixed `HealthCheckRequest` for `""` (the server as a
/// whole) as a gRPC request body.
fn check_body() -> Bytes {
    let request = HealthCheckRequest::default();
    let mut wire = BytesMut::with_capacity(5 + request.encoded_len());
    wire.put_u8(0);
    wire.put_u32(request.encoded_len() as u32);
    request
        .encode(&mut wire)
        .expect("encode into a sized buffer");
    wire.freeze()
}

/// A health check as tonic's server hands it to user layers: every server
/// mode gets the same request, `x-scope-orgid` included (its value copied,
/// as h2 decodes it off the wire).
fn server_request(body: &Bytes) -> Request<Body> {
    let mut request = client_request(body);
    request.headers_mut().insert(
        OrgId::HEADER,
        HeaderValue::from_bytes(ORG_ID.as_bytes()).expect("valid header value"),
    );
    request
}

/// A health check as client layers see it below a generated client: no
/// org id (the layer stamps it), the method in the extensions.
fn client_request(body: &Bytes) -> Request<Body> {
    let mut request = Request::builder()
        .method(http::Method::POST)
        .uri(CHECK_PATH)
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(Body::new(http_body_util::Full::new(body.clone())))
        .expect("valid request");
    request
        .extensions_mut()
        .insert(tonic::GrpcMethod::new("grpc.health.v1.Health", "Check"));
    request
}

/// A mode's key, column heading and description.
type Names = (&'static str, &'static str, &'static str);

/// A server mode: `layer` over the health routes, built once.
fn server<L, B>(names: Names, layer: L) -> Mode
where
    L: Layer<Routes>,
    L::Service: Service<Request<Body>, Response = Response<B>> + Clone + Send + 'static,
    <L::Service as Service<Request<Body>>>::Error: std::fmt::Debug,
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    service_mode(names, layer.layer(health_routes()), server_request)
}

fn service_mode<S, B>(
    (key, column, label): Names,
    service: S,
    request: fn(&Bytes) -> Request<Body>,
) -> Mode
where
    S: Service<Request<Body>, Response = Response<B>> + Clone + Send + 'static,
    S::Error: std::fmt::Debug,
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    Mode {
        key,
        column,
        label,
        run: Box::new(move |threads, rpcs| run_cell(&service, request, threads, rpcs)),
        summary: None,
    }
}

/// One cell: `threads` threads, each with its clone of `service` (as each
/// connection holds one), `rpcs` timed calls each.
fn run_cell<S, B>(
    service: &S,
    request: fn(&Bytes) -> Request<Body>,
    threads: usize,
    rpcs: u64,
) -> Cell
where
    S: Service<Request<Body>, Response = Response<B>> + Clone + Send,
    S::Error: std::fmt::Debug,
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    let ready = Barrier::new(threads);
    let spent: Vec<Spent> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let service = service.clone();
                let ready = &ready;
                scope.spawn(move || calls(service, request, rpcs, ready))
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().expect("bench thread"))
            .collect()
    });
    Cell::of(&spent, rpcs)
}

/// One thread's part of a cell: a warm-up, the barrier, then `rpcs` timed
/// calls (every reply checked).
fn calls<S, B>(
    service: S,
    request: fn(&Bytes) -> Request<Body>,
    rpcs: u64,
    ready: &Barrier,
) -> Spent
where
    S: Service<Request<Body>, Response = Response<B>> + Clone,
    S::Error: std::fmt::Debug,
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    let body = check_body();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        for _ in 0..(rpcs / 10).clamp(100, 2_000) {
            let status = call_in_process(&service, request(&body)).await;
            assert_eq!(status, Some(0), "the health check answers OK");
        }
        ready.wait();
        let clock = ThreadClock::now();
        let mut not_ok = 0_u64;
        for _ in 0..rpcs {
            not_ok += u64::from(call_in_process(&service, request(&body)).await != Some(0));
        }
        let spent = clock.elapsed();
        // A refused call is cheaper: the figures would read too low.
        assert_eq!(not_ok, 0, "every timed call answers OK");
        spent
    })
}

/// One cell's figures, per RPC over all its threads.
#[derive(Debug, Clone, Copy)]
pub struct Cell {
    /// Thread CPU time per RPC (ns).
    cpu_ns: f64,
    /// Wall time per RPC of one thread (ns): CPU time plus time blocked or
    /// preempted.
    wall_ns: f64,
    /// Voluntary context switches per 1 000 RPCs.
    voluntary: f64,
    /// Involuntary context switches per 1 000 RPCs.
    involuntary: f64,
}

impl Cell {
    fn of(spent: &[Spent], rpcs_per_thread: u64) -> Self {
        let rpcs = (rpcs_per_thread * spent.len() as u64) as f64;
        let sum = |f: fn(&Spent) -> f64| spent.iter().map(f).sum::<f64>();
        Self {
            cpu_ns: sum(|s| s.cpu.as_nanos() as f64) / rpcs,
            wall_ns: sum(|s| s.wall.as_nanos() as f64) / rpcs,
            voluntary: sum(|s| s.voluntary_switches as f64) * 1_000.0 / rpcs,
            involuntary: sum(|s| s.involuntary_switches as f64) * 1_000.0 / rpcs,
        }
    }
}

/// Runs every mode at every thread count, `rounds` times, the modes
/// interleaved within a round (their order rotated by one each round),
/// and prints the tables: the median over rounds per cell.
pub fn run(settings: &Settings, modes: &[Mode]) {
    let mut cells =
        vec![vec![Vec::with_capacity(settings.rounds); modes.len()]; settings.threads.len()];
    for (row, &threads) in settings.threads.iter().enumerate() {
        for round in 0..settings.rounds {
            for i in 0..modes.len() {
                let m = (i + round) % modes.len();
                cells[row][m].push((modes[m].run)(threads, settings.rpcs));
            }
        }
        let bare = median(cells[row][0].iter().map(|c| c.cpu_ns));
        eprintln!(
            "scale: {threads} thread(s) done ({} rounds; bare {} ns/RPC)",
            settings.rounds,
            spaced(bare)
        );
    }

    let header = |first: &str| {
        std::iter::once(first.to_owned())
            .chain(modes.iter().map(|m| m.column.to_owned()))
            .collect::<Vec<_>>()
    };
    let medians = |row: usize, f: fn(&Cell) -> f64| -> Vec<f64> {
        cells[row].iter().map(|c| median(c.iter().map(f))).collect()
    };

    let mut cpu = Table::new(header("threads"));
    let mut wall = Table::new(header("threads"));
    let mut switches = Table::new(header("threads"));
    for (row, &threads) in settings.threads.iter().enumerate() {
        let cpu_ns = medians(row, |c| c.cpu_ns);
        let wall_ns = medians(row, |c| c.wall_ns);
        let voluntary = medians(row, |c| c.voluntary);
        let involuntary = medians(row, |c| c.involuntary);
        cpu.row(ratio_row(threads, &cpu_ns));
        wall.row(ratio_row(threads, &wall_ns));
        switches.row(
            std::iter::once(threads.to_string())
                .chain(
                    voluntary
                        .iter()
                        .zip(&involuntary)
                        .map(|(v, i)| format!("{v:.1} ({i:.1})")),
                )
                .collect(),
        );
    }
    println!("\nIn process, the columns (SCALE_MODES keys in brackets):\n");
    for mode in modes {
        println!("- {} (`{}`): {}", mode.column, mode.key, mode.label);
    }
    println!(
        "\nIn process, thread CPU time per RPC, ns (ratio to bare at the same thread count); \
         median of {} rounds of {} RPCs per thread:\n",
        settings.rounds,
        spaced(settings.rpcs as f64)
    );
    cpu.print();
    println!("\nIn process, wall time per RPC of one thread, ns (ratio to bare):\n");
    wall.print();
    println!(
        "\nIn process, context switches per 1 000 RPCs: voluntary (the thread blocked) \
         and, in brackets, involuntary (preempted):\n"
    );
    switches.print();
    let summaries: Vec<String> = modes
        .iter()
        .filter_map(|mode| mode.summary.as_ref().map(|summary| summary()))
        .collect();
    if !summaries.is_empty() {
        println!(
            "\nIn process, what the binary logs did with their entries (every cell, warm-ups included):\n"
        );
        for line in summaries {
            println!("{line}");
        }
    }
}

/// `threads`, then each figure with its ratio to the first (bare).
fn ratio_row(threads: usize, figures: &[f64]) -> Vec<String> {
    let bare = figures[0];
    std::iter::once(threads.to_string())
        .chain(figures.iter().enumerate().map(|(i, &x)| {
            if i == 0 {
                spaced(x)
            } else {
                format!("{} ({:.2}×)", spaced(x), x / bare)
            }
        }))
        .collect()
}
