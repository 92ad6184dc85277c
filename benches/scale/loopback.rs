//! The loopback part: a tonic server on a multi-threaded runtime
//! (`Server::builder()` on 127.0.0.1:0, the health service) and a client
//! on another multi-threaded runtime, C connections (one `Channel` each)
//! with K calls in flight per connection, unary
//! `/grpc.health.v1.Health/Check` for T seconds per mode after a warm-up.
//! Every mode's server and connections are set up once, before the first
//! round; the modes then take turns (order rotated per round).
//!
//! Reported per mode: RPC/s (calls that began and ended inside the
//! measured window, over the window), p50 and p99 latency of those calls,
//! and the process's CPU time per RPC (client and server together, every
//! thread), each the median over rounds; the overhead is the change in
//! RPC/s against no layers, in % (grpc-go's "TotalOps" terms).

use std::hint::black_box;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::runtime::Runtime;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;
use tonic_hotpath::otel::OtelMetrics;
use tonic_hotpath::stats::CombinedLayer;
use tonic_hotpath::tenant::{OrgId, RequireOrgIdLayer, SetOrgIdLayer};
use tower::ServiceBuilder;

use super::clock::process_cpu;
use super::in_process::{CHECK_PATH, ORG_ID, Providers};
use super::table::{Table, median, spaced};
use support::endpoint;
use support::stats_harness::Noop;

/// What to run.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Worker threads of the server's runtime.
    pub server_threads: usize,
    /// Worker threads of the client's runtime.
    pub client_threads: usize,
    /// Connections (one `Channel` each).
    pub connections: usize,
    /// Calls in flight per connection.
    pub in_flight: usize,
    /// Warm-up before each measured window.
    pub warm_up: Duration,
    /// Measured window per mode per round.
    pub window: Duration,
    /// Rounds: every mode once per round, in an order rotated per round.
    pub rounds: usize,
}

/// One mode's set-up: a label and the run of one window.
struct Mode {
    label: &'static str,
    run: Window,
}

/// Runs one measured window on the client's runtime.
type Window = Box<dyn FnMut(&Runtime, &Settings) -> Sample>;

/// One window's figures.
#[derive(Debug, Clone, Copy)]
struct Sample {
    rpc_per_s: f64,
    p50: Duration,
    p99: Duration,
    cpu_per_rpc: Duration,
}

/// Serves the health service on `$rt` behind `$layer`, accepting from
/// `$incoming`.
macro_rules! serve {
    ($rt:expr, $layer:expr, $incoming:expr) => {{
        let (_reporter, health) = tonic_health::server::health_reporter();
        $rt.spawn(
            Server::builder()
                .layer($layer)
                .add_service(health)
                .serve_with_incoming($incoming),
        );
    }};
}

fn listen(rt: &Runtime) -> (SocketAddr, TcpListener) {
    let listener = rt
        .block_on(TcpListener::bind("127.0.0.1:0"))
        .expect("bind 127.0.0.1:0");
    (listener.local_addr().expect("local addr"), listener)
}

/// tonic's own incoming stream as `Server::serve` makes it (`TCP_NODELAY`).
fn plain_incoming(listener: TcpListener) -> TcpIncoming {
    TcpIncoming::from(listener).with_nodelay(Some(true))
}

/// Sets every mode up (servers on `server_rt`, channels on `client_rt`).
fn modes(
    server_rt: &Runtime,
    client_rt: &Runtime,
    providers: &Providers,
    settings: &Settings,
) -> Vec<Mode> {
    let connections = settings.connections;
    let connect = |addr: SocketAddr| {
        client_rt
            .block_on(endpoint(addr).connect())
            .expect("connect")
    };
    let mut modes = Vec::new();

    // No layers.
    let (addr, listener) = listen(server_rt);
    serve!(
        server_rt,
        tower::layer::util::Identity::new(),
        plain_incoming(listener)
    );
    let clients = (0..connections).map(|_| connect(addr)).collect();
    modes.push(mode("no layers", clients));

    // CombinedLayer with 2 no-op handlers on each side, set up as the
    // README does: the server's incoming stream and the client's connector
    // from the layer (connection events, RPCs linked to connections); one
    // client layer per channel.
    let (addr, listener) = listen(server_rt);
    let layer = CombinedLayer::server().with(Noop).with(Noop);
    serve!(server_rt, layer.clone(), layer.incoming_tcp(listener));
    let clients = (0..connections)
        .map(|_| {
            let layer = CombinedLayer::client().with(Noop).with(Noop);
            let channel = client_rt
                .block_on(endpoint(addr).connect_with_connector(layer.connector()))
                .expect("connect");
            ServiceBuilder::new().layer(layer).service(channel)
        })
        .collect();
    modes.push(mode("CombinedLayer, 2 no-op handlers", clients));

    // The naive way: 2 layers of one no-op handler each, stacked, their
    // connection wrappers nested.
    let (addr, listener) = listen(server_rt);
    let (outer, inner) = (
        CombinedLayer::server().with(Noop),
        CombinedLayer::server().with(Noop),
    );
    let incoming = outer.incoming(inner.incoming_tcp(listener));
    serve!(
        server_rt,
        ServiceBuilder::new().layer(outer).layer(inner),
        incoming
    );
    let clients = (0..connections)
        .map(|_| {
            let (outer, inner) = (
                CombinedLayer::client().with(Noop),
                CombinedLayer::client().with(Noop),
            );
            let connector = outer.connector_with(inner.connector());
            let channel = client_rt
                .block_on(endpoint(addr).connect_with_connector(connector))
                .expect("connect");
            ServiceBuilder::new()
                .layer(outer)
                .layer(inner)
                .service(channel)
        })
        .collect();
    modes.push(mode("2 stacked layers, 1 no-op handler each", clients));

    // gRFC A66 metrics on both sides, into the 0.33 SDK.
    let (addr, listener) = listen(server_rt);
    let layer = CombinedLayer::server().with(super::in_process::otel_metrics(providers.sdk()));
    serve!(server_rt, layer.clone(), layer.incoming_tcp(listener));
    let target = format!("http://{addr}");
    let clients = (0..connections)
        .map(|_| {
            let metrics = OtelMetrics::builder(providers.sdk())
                .with_method(CHECK_PATH)
                .with_target(target.clone())
                .build()
                .expect("valid method path");
            let layer = CombinedLayer::client().with(metrics);
            let channel = client_rt
                .block_on(endpoint(addr).connect_with_connector(layer.connector()))
                .expect("connect");
            ServiceBuilder::new().layer(layer).service(channel)
        })
        .collect();
    modes.push(mode("OtelMetrics (SDK), both sides", clients));

    // Tenant: the client stamps the org id, the server requires it.
    let (addr, listener) = listen(server_rt);
    serve!(
        server_rt,
        RequireOrgIdLayer::new(),
        plain_incoming(listener)
    );
    let org_id = OrgId::new(ORG_ID).expect("valid org id");
    let clients = (0..connections)
        .map(|_| {
            ServiceBuilder::new()
                .layer(SetOrgIdLayer::new(org_id.clone()))
                .service(connect(addr))
        })
        .collect();
    modes.push(mode("tenant: SetOrgIdLayer → RequireOrgIdLayer", clients));

    modes
}

/// A mode over its clients (one per connection).
fn mode<C>(label: &'static str, clients: Vec<C>) -> Mode
where
    C: tonic::client::GrpcService<tonic::body::Body> + Clone + Send + 'static,
    C::Error: Into<tonic::codegen::StdError>,
    C::Future: Send,
    C::ResponseBody: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    <C::ResponseBody as http_body::Body>::Error: Into<tonic::codegen::StdError> + Send,
{
    Mode {
        label,
        run: Box::new(move |rt, settings| rt.block_on(window(&clients, settings))),
    }
}

/// One window: K tasks per connection calling back to back.
async fn window<C>(clients: &[C], settings: &Settings) -> Sample
where
    C: tonic::client::GrpcService<tonic::body::Body> + Clone + Send + 'static,
    C::Error: Into<tonic::codegen::StdError>,
    C::Future: Send,
    C::ResponseBody: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    <C::ResponseBody as http_body::Body>::Error: Into<tonic::codegen::StdError> + Send,
{
    let from = Instant::now() + settings.warm_up;
    let until = from + settings.window;
    let mut tasks = tokio::task::JoinSet::new();
    for client in clients {
        for _ in 0..settings.in_flight {
            let mut client = HealthClient::new(client.clone());
            tasks.spawn(async move {
                let mut latencies = Vec::new();
                loop {
                    let sent = Instant::now();
                    if sent >= until {
                        break latencies;
                    }
                    let reply = client
                        .check(HealthCheckRequest::default())
                        .await
                        .expect("health check");
                    black_box(reply);
                    let done = Instant::now();
                    if sent >= from && done <= until {
                        latencies.push(done - sent);
                    }
                }
            });
        }
    }
    tokio::time::sleep_until(from.into()).await;
    let cpu = process_cpu();
    tokio::time::sleep_until(until.into()).await;
    let cpu = process_cpu() - cpu;
    let mut latencies = Vec::new();
    while let Some(task) = tasks.join_next().await {
        latencies.extend(task.expect("load task"));
    }
    latencies.sort_unstable();
    let rpcs = latencies.len().max(1);
    let at = |q: f64| latencies[((rpcs as f64 * q) as usize).min(rpcs - 1)];
    Sample {
        rpc_per_s: latencies.len() as f64 / settings.window.as_secs_f64(),
        p50: at(0.50),
        p99: at(0.99),
        cpu_per_rpc: cpu / rpcs as u32,
    }
}

fn runtime(name: &str, threads: usize) -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name(name)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Sets up every mode, runs the rounds and prints the table.
pub fn run(settings: &Settings, providers: &Providers) {
    let server_rt = runtime("scale-server", settings.server_threads);
    let client_rt = runtime("scale-client", settings.client_threads);
    let mut modes = modes(&server_rt, &client_rt, providers, settings);
    let mut samples = vec![Vec::with_capacity(settings.rounds); modes.len()];
    for round in 0..settings.rounds {
        for i in 0..modes.len() {
            let m = (i + round) % modes.len();
            samples[m].push((modes[m].run)(&client_rt, settings));
        }
        eprintln!(
            "scale: loopback round {} of {} done",
            round + 1,
            settings.rounds
        );
    }

    let mut table = Table::new(
        [
            "mode",
            "RPC/s",
            "RPC/s vs no layers",
            "p50 µs",
            "p99 µs",
            "CPU µs/RPC (client + server)",
            "CPU/RPC vs no layers",
        ]
        .map(str::to_owned)
        .to_vec(),
    );
    let micros = |d: Duration| d.as_nanos() as f64 / 1_000.0;
    let change = |x: f64, bare: f64| format!("{:+.1} %", (x / bare - 1.0) * 100.0);
    let rate = |samples: &[Sample]| median(samples.iter().map(|s| s.rpc_per_s));
    let cpu = |samples: &[Sample]| median(samples.iter().map(|s| micros(s.cpu_per_rpc)));
    let (bare_rate, bare_cpu) = (rate(&samples[0]), cpu(&samples[0]));
    for (m, (mode, samples)) in modes.iter().zip(&samples).enumerate() {
        let (rate, cpu) = (rate(samples), cpu(samples));
        let (rate_change, cpu_change) = if m == 0 {
            ("—".to_owned(), "—".to_owned())
        } else {
            (change(rate, bare_rate), change(cpu, bare_cpu))
        };
        table.row(vec![
            mode.label.to_owned(),
            spaced(rate),
            rate_change,
            spaced(median(samples.iter().map(|s| micros(s.p50)))),
            spaced(median(samples.iter().map(|s| micros(s.p99)))),
            format!("{cpu:.1}"),
            cpu_change,
        ]);
    }
    println!(
        "\nLoopback, unary health checks: {} connections × {} in flight, server runtime {} \
         worker threads, client runtime {}; median of {} rounds of {:.1} s (after {:.1} s \
         warm-up each):\n",
        settings.connections,
        settings.in_flight,
        settings.server_threads,
        settings.client_threads,
        settings.rounds,
        settings.window.as_secs_f64(),
        settings.warm_up.as_secs_f64(),
    );
    table.print();
    drop(modes);
    server_rt.shutdown_background();
    client_rt.shutdown_background();
}
