//! `orca` bench: what per-call load reports (`CallMetricsLayer`, gRFC A51)
//! cost per RPC on the server stack in process (single thread, unary echo
//! with a small message, `Routes` + layer, body driven to its trailers),
//! beside no layer:
//!
//! - `no_layer`: the echo routes alone (the baseline of every ratio);
//! - `untouched`: `CallMetricsLayer::new()` over a handler that never takes
//!   its recorder (no trailer; 0 allocations more, as `tests/orca/alloc.rs`
//!   asserts);
//! - `cost_and_two_named`: the handler takes its recorder and records a
//!   request cost and two named metrics (grpc-go's interop test's shape;
//!   `interop/orca-go/bench_test.go` measures grpc-go doing the same);
//! - `cost_and_two_named_over_process`: the same with process-wide values
//!   (CPU utilization and QPS in a `ServerMetricsRecorder`) merged under
//!   the call's.
//!
//! First interleaved (rounds of 1 000 calls per variant in turn, each
//! variant's fastest round and its cost over `no_layer` in the same run),
//! then criterion rows of one group, `orca/unary_in_process`, each after
//! its allocations per RPC.
//!
//! Then the same variants over loopback (`orca/loopback_unary`): a tonic
//! client and server on one current-thread runtime over TCP on 127.0.0.1,
//! one call at a time, the client reading the trailer as any tonic client
//! does: the whole call's cost, as grpc-go's own bench
//! (`interop/orca-go/bench_test.go`, over `bufconn`) measures it.
//! Interleaved rounds of 200 calls, then criterion rows, each after its
//! allocations per call (client and server).
//!
//! `cargo bench --features orca --bench orca -- --warm-up-time 1 --measurement-time 3`

#[path = "in_process/mod.rs"]
mod in_process;
#[path = "interleaved/mod.rs"]
mod interleaved;
use support::orca::records;
use support::stats_harness;

use criterion::{Criterion, criterion_group, criterion_main};
use in_process::{ALLOCATION_CALLS, CALLS_PER_ROUND, service_in_process, service_round};
use interleaved::{Round, print_overhead};
use records::Records;
use stats_harness::{allocations_per_call, current_thread_runtime, one_rpc, unary_request};
use support::alloc_count::CountingAllocator;
use support::loopback_client;
use tonic::service::Routes;
use tonic_hotpath::orca::ServerMetricsRecorder;
use tonic_hotpath::orca::server::CallMetricsLayer;
use tower::ServiceBuilder;
use tower::layer::util::Identity;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// Interleaved rounds per variant.
const ROUNDS: usize = 100;

fn routes() -> Routes {
    Routes::new(support::EchoServer::new(support::EchoService))
}

fn process() -> ServerMetricsRecorder {
    let process = ServerMetricsRecorder::new();
    process.set_cpu_utilization(0.42);
    process.set_qps(950.0);
    process
}

macro_rules! stacks {
    ($each:ident) => {{
        $each!(
            "no_layer",
            ServiceBuilder::new()
                .layer(Identity::new())
                .service(routes())
        );
        $each!(
            "untouched",
            ServiceBuilder::new()
                .layer(CallMetricsLayer::new())
                .service(routes())
        );
        $each!(
            "cost_and_two_named",
            ServiceBuilder::new()
                .layer(CallMetricsLayer::new())
                .layer(tower::layer::layer_fn(Records))
                .service(routes())
        );
        $each!(
            "cost_and_two_named_over_process",
            ServiceBuilder::new()
                .layer(
                    CallMetricsLayer::builder()
                        .server_metrics(process())
                        .build()
                )
                .layer(tower::layer::layer_fn(Records))
                .service(routes())
        );
    }};
}

fn bench(c: &mut Criterion) {
    let rt = current_thread_runtime();

    let mut variants: Vec<(&str, Round<'_>)> = Vec::new();
    macro_rules! interleave {
        ($name:expr, $service:expr) => {
            variants.push(($name, service_round(&rt, $service)));
        };
    }
    stacks!(interleave);
    print_overhead("orca", &mut variants, ROUNDS, CALLS_PER_ROUND);
    drop(variants);

    let mut group = c.benchmark_group("orca/unary_in_process");
    macro_rules! row {
        ($name:expr, $service:expr) => {
            service_in_process(&mut group, &rt, $name, $service, unary_request);
        };
    }
    stacks!(row);
    group.finish();
}

/// Loopback calls per interleaved round.
const LOOPBACK_CALLS_PER_ROUND: u32 = 200;

/// The server layers of the loopback rows (over the echo service).
macro_rules! loopback_stacks {
    ($each:ident) => {{
        $each!("no_layer", Identity::new());
        $each!("untouched", CallMetricsLayer::new());
        $each!(
            "cost_and_two_named",
            ServiceBuilder::new()
                .layer(CallMetricsLayer::new())
                .layer(tower::layer::layer_fn(Records))
                .into_inner()
        );
    }};
}

fn loopback(c: &mut Criterion) {
    let rt = current_thread_runtime();
    let mut variants: Vec<(&str, Round<'_>)> = Vec::new();
    macro_rules! interleave {
        ($name:expr, $layer:expr) => {{
            let client = rt.block_on(loopback_client!($layer, Identity::new()));
            let rt = &rt;
            variants.push((
                $name,
                Box::new(move || {
                    rt.block_on(async {
                        let started = std::time::Instant::now();
                        for _ in 0..LOOPBACK_CALLS_PER_ROUND {
                            one_rpc(client.clone()).await;
                        }
                        started.elapsed()
                    })
                }),
            ));
        }};
    }
    loopback_stacks!(interleave);
    print_overhead(
        "orca loopback",
        &mut variants,
        ROUNDS,
        LOOPBACK_CALLS_PER_ROUND,
    );
    drop(variants);

    let mut group = c.benchmark_group("orca/loopback_unary");
    macro_rules! row {
        ($name:expr, $layer:expr) => {{
            let client = rt.block_on(loopback_client!($layer, Identity::new()));
            let per_rpc = rt.block_on(allocations_per_call(ALLOCATION_CALLS, || {
                one_rpc(client.clone())
            }));
            println!(
                "allocations/rpc  loopback (c+s)     {:<18} {per_rpc:.2}",
                $name
            );
            group.bench_function($name, |b| {
                b.to_async(&rt).iter(|| one_rpc(client.clone()));
            });
        }};
    }
    loopback_stacks!(row);
    group.finish();
}

criterion_group!(benches, bench, loopback);
criterion_main!(benches);
