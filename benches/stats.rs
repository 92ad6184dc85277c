//! `stats` benches: the `CombinedLayer` with 0/1/2/8 no-op handlers beside
//! no layer and beside 2 separately stacked layers (the naive way), in
//! process on the server stack and over loopback (sequential and 32 in
//! flight), client and server pinned to one current-thread runtime.
//! The no-op handlers ask for no payload times
//! (`StatsHandler::PAYLOAD_TIMES = false`); `timed_2` is two no-op handlers
//! that keep the default, to show what the two payload clock reads cost.
//! Allocations per RPC are printed first, from a counting allocator.
//! The interleaved lines end with two reference rows, the floor under the
//! layer: a pass-through layer of the same shape (request body, response
//! future and response body wrapped, one `Arc` shared among them) without
//! events, and the same with two clock reads per RPC (see
//! [`passthrough`]).
//!
//! Read the interleaved lines over several builds and runs: on the 2-vCPU
//! VM, code placement alone moves a variant's "over no layer" figure by
//! tens of ns from one build to the next. `tools/bench-layouts stats`
//! links this bench with its functions in several orders and prints each
//! variant's median over all runs (the README's figures).
//!
//! `cargo bench --bench stats -- --warm-up-time 1 --measurement-time 2`

#[path = "in_process/mod.rs"]
mod in_process;
#[path = "interleaved/mod.rs"]
mod interleaved;
#[path = "passthrough/mod.rs"]
mod passthrough;
use support::stats_harness;

use std::hint::black_box;

use bytes::Bytes;
use criterion::{
    BenchmarkGroup, Criterion, criterion_group, criterion_main, measurement::WallTime,
};
use in_process::{ALLOCATION_CALLS, CALLS_PER_ROUND, in_process, round, service_round};
use interleaved::Round;
use passthrough::PassthroughLayer;
use stats_harness::{
    Noop, Timed, allocations_per_call, allocations_per_in_process_rpc, call_in_process,
    current_thread_runtime, echo_transport, one_rpc, open_linked_connection, unary_body,
    unary_request,
};
use support::alloc_count::CountingAllocator;
use support::{EchoClient, combined, loopback_client};
use tokio::runtime::Runtime;
use tonic::codegen::StdError;
use tonic_hotpath::stats::CombinedLayer;
use tower::Layer;
use tower::layer::util::Identity;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

const IN_FLIGHT: usize = 32;

// ---- in process: Routes + layer, body driven to trailers ----

/// The layers' per-RPC cost, interleaved with no layer (see
/// [`interleaved`]).
fn interleaved_overhead() {
    let rt = current_thread_runtime();
    let mut variants: Vec<(&str, Round<'_>)> = vec![
        ("no_layer", round(&rt, Identity::new())),
        ("combined_1", round(&rt, combined!(server, 1))),
        ("combined_2", round(&rt, combined!(server, 2))),
        (
            "timed_2",
            round(&rt, CombinedLayer::server().with(Timed).with(Timed)),
        ),
        ("combined_8", round(&rt, combined!(server, 8))),
        ("stacked_2", round(&rt, combined!(server, stacked))),
        (
            "passthrough (floor)",
            round(&rt, PassthroughLayer::default()),
        ),
        (
            "passthrough + 2 clock reads (floor)",
            round(&rt, PassthroughLayer::with_clock()),
        ),
    ];
    interleaved::print_overhead("in-process server", &mut variants, 150, CALLS_PER_ROUND);
}

fn in_process_server(c: &mut Criterion) {
    interleaved_overhead();
    let rt = current_thread_runtime();
    let mut group = c.benchmark_group("stats/in_process_server_unary");
    in_process(&mut group, &rt, "no_layer", Identity::new());
    in_process(&mut group, &rt, "combined_0", CombinedLayer::server());
    in_process(&mut group, &rt, "combined_1", combined!(server, 1));
    in_process(&mut group, &rt, "combined_2", combined!(server, 2));
    let timed_2 = CombinedLayer::server().with(Timed).with(Timed);
    in_process(&mut group, &rt, "timed_2", timed_2);
    in_process(&mut group, &rt, "combined_8", combined!(server, 8));
    in_process(&mut group, &rt, "stacked_2", combined!(server, stacked));
    group.finish();
}

// ---- in process: the client layer over the echo routes ----

/// The client layer's cost of linking RPCs to the connection its
/// connector opened (`combined_1_linked`: a real TCP connection made by
/// `layer.connector()` is open, so each RPC reads it) beside the same
/// layer without a connector (`combined_1`), in process, interleaved
/// with no layer first, then as criterion rows.
fn in_process_client(c: &mut Criterion) {
    let rt = current_thread_runtime();
    let mut group = c.benchmark_group("stats/in_process_client_unary");
    let body = unary_body("hello");
    let plain = CombinedLayer::client().with(Noop);
    let linked = CombinedLayer::client().with(Noop);
    // Kept open for the whole group.
    let _open = rt.block_on(open_linked_connection(&linked));
    let mut variants: Vec<(&str, Round<'_>)> = vec![
        ("no_layer", service_round(&rt, echo_transport())),
        (
            "combined_1",
            service_round(&rt, plain.layer(echo_transport())),
        ),
        (
            "combined_1_linked",
            service_round(&rt, linked.layer(echo_transport())),
        ),
    ];
    interleaved::print_overhead("in-process client", &mut variants, 150, CALLS_PER_ROUND);
    drop(variants);
    for (name, layer) in [("combined_1", plain), ("combined_1_linked", linked)] {
        let service = layer.layer(echo_transport());
        let per_rpc = rt.block_on(allocations_per_in_process_rpc(&service, ALLOCATION_CALLS));
        println!("allocations/rpc  in-process client  {name:<18} {per_rpc:.2}");
        group.bench_function(name, |b| {
            b.to_async(&rt).iter(|| async {
                black_box(call_in_process(&service, unary_request(&body)).await)
            });
        });
    }
    group.finish();
}

// ---- loopback: a real client and server on one current-thread runtime ----

/// Loopback RPCs one after another, or `IN_FLIGHT` at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Load {
    Sequential,
    InFlight,
}

fn loopback<T>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    load: Load,
    rt: &Runtime,
    name: &str,
    client: EchoClient<T>,
) where
    T: tonic::client::GrpcService<tonic::body::Body> + Clone + Send + 'static,
    T::Future: Send,
    T::Error: Into<StdError>,
    T::ResponseBody: http_body::Body<Data = Bytes> + Send + 'static,
    <T::ResponseBody as http_body::Body>::Error: Into<StdError> + Send,
{
    if load == Load::Sequential {
        let per_rpc = rt.block_on(allocations_per_call(ALLOCATION_CALLS, || {
            one_rpc(client.clone())
        }));
        println!("allocations/rpc  loopback (c+s)     {name:<18} {per_rpc:.2}");
        group.bench_function(name, |b| {
            b.to_async(rt).iter(|| one_rpc(client.clone()));
        });
        return;
    }
    group.bench_function(name, |b| {
        b.to_async(rt).iter(|| async {
            let mut tasks = tokio::task::JoinSet::new();
            for _ in 0..IN_FLIGHT {
                tasks.spawn(one_rpc(client.clone()));
            }
            while let Some(done) = tasks.join_next().await {
                done.expect("rpc task");
            }
        });
    });
}

fn loopback_unary(c: &mut Criterion) {
    let rt = current_thread_runtime();
    for (load, group_name) in [
        (Load::Sequential, "stats/loopback_unary_sequential"),
        (Load::InFlight, "stats/loopback_unary_32_in_flight"),
    ] {
        let mut group = c.benchmark_group(group_name);
        let g = &mut group;
        let client = rt.block_on(loopback_client!(Identity::new(), Identity::new()));
        loopback(g, load, &rt, "no_layer", client);
        let client = rt.block_on(loopback_client!(
            CombinedLayer::server(),
            CombinedLayer::client()
        ));
        loopback(g, load, &rt, "combined_0", client);
        let client = rt.block_on(loopback_client!(combined!(server, 1), combined!(client, 1)));
        loopback(g, load, &rt, "combined_1", client);
        let client = rt.block_on(loopback_client!(combined!(server, 2), combined!(client, 2)));
        loopback(g, load, &rt, "combined_2", client);
        let client = rt.block_on(loopback_client!(combined!(server, 8), combined!(client, 8)));
        loopback(g, load, &rt, "combined_8", client);
        let client = rt.block_on(loopback_client!(
            combined!(server, stacked),
            combined!(client, stacked)
        ));
        loopback(g, load, &rt, "stacked_2", client);
        group.finish();
    }
}

criterion_group!(
    benches,
    in_process_server,
    in_process_client,
    loopback_unary
);
criterion_main!(benches);
