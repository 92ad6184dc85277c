//! `channelz` benches: the channelz handlers' cost per RPC beside a no-op
//! handler on the same layer, in process and over loopback.
//!
//! - In-process server: the echo `Routes` under `CombinedLayer::server()`
//!   with no handler's work (`noop_1`: no payload times; `timed_1`: a
//!   no-op that takes payload times, as channelz does), and with
//!   channelz's `ServerEntry` (the server's calls: per-thread-slot
//!   counters and the last start). In process there is no connection, so
//!   no socket.
//! - In-process client, linked: `CombinedLayer::client()` with a
//!   connection open from the layer's connector, so every RPC also counts
//!   on its socket and subchannel (`ChannelEntry`), beside a no-op.
//! - Loopback, linked on both sides (server from the layer's incoming
//!   stream, channel from its connector): no layer, no-op handlers, the
//!   channelz handlers; client and server on one current-thread runtime.
//!
//! Interleaved lines first (drift hits every variant alike), then the
//! criterion rows. The multi-thread figure is the `channelz` mode of
//! `benches/scale.rs`; memory per socket is `tests/channelz/channelz_alloc.rs`.
//!
//! `cargo bench --bench channelz --features channelz -- --warm-up-time 1 --measurement-time 2`

#[path = "in_process/mod.rs"]
mod in_process;
#[path = "interleaved/mod.rs"]
mod interleaved;
use support::stats_harness;

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use in_process::{CALLS_PER_ROUND, in_process, round, service_round};
use interleaved::Round;
use stats_harness::{
    Noop, Timed, call_in_process, current_thread_runtime, echo_transport, linked_loopback_client,
    one_rpc, open_linked_connection, unary_body, unary_request,
};
use support::alloc_count::CountingAllocator;
use tonic::transport::Server;
use tonic_hotpath::channelz::{ChannelEntry, ServerEntry};
use tonic_hotpath::stats::CombinedLayer;
use tower::Layer;
use tower::layer::util::Identity;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fn in_process_server(c: &mut Criterion) {
    let rt = current_thread_runtime();
    let mut variants: Vec<(&str, Round<'_>)> = vec![
        ("no_layer", round(&rt, Identity::new())),
        ("noop_1", round(&rt, CombinedLayer::server().with(Noop))),
        ("timed_1", round(&rt, CombinedLayer::server().with(Timed))),
        (
            "channelz_server",
            round(&rt, CombinedLayer::server().with(ServerEntry::new())),
        ),
    ];
    interleaved::print_overhead("in-process server", &mut variants, 150, CALLS_PER_ROUND);
    drop(variants);
    let mut group = c.benchmark_group("channelz/in_process_server_unary");
    in_process(&mut group, &rt, "no_layer", Identity::new());
    in_process(
        &mut group,
        &rt,
        "noop_1",
        CombinedLayer::server().with(Noop),
    );
    in_process(
        &mut group,
        &rt,
        "timed_1",
        CombinedLayer::server().with(Timed),
    );
    let channelz = CombinedLayer::server().with(ServerEntry::new());
    in_process(&mut group, &rt, "channelz_server", channelz);
    group.finish();
}

fn in_process_client(c: &mut Criterion) {
    let rt = current_thread_runtime();
    let noop = CombinedLayer::client().with(Timed);
    let channelz = CombinedLayer::client().with(ChannelEntry::new("bench"));
    // Kept open for the whole group: every RPC of each layer reads it.
    let _noop_conn = rt.block_on(open_linked_connection(&noop));
    let _channelz_conn = rt.block_on(open_linked_connection(&channelz));
    let mut variants: Vec<(&str, Round<'_>)> = vec![
        ("no_layer", service_round(&rt, echo_transport())),
        (
            "timed_1_linked",
            service_round(&rt, noop.layer(echo_transport())),
        ),
        (
            "channelz_client_linked",
            service_round(&rt, channelz.layer(echo_transport())),
        ),
    ];
    interleaved::print_overhead("in-process client", &mut variants, 150, CALLS_PER_ROUND);
    drop(variants);
    let mut group = c.benchmark_group("channelz/in_process_client_unary");
    let body = unary_body("hello");
    let noop = noop.layer(echo_transport());
    group.bench_function("timed_1_linked", |b| {
        b.to_async(&rt)
            .iter(|| async { black_box(call_in_process(&noop, unary_request(&body)).await) });
    });
    let channelz = channelz.layer(echo_transport());
    group.bench_function("channelz_client_linked", |b| {
        b.to_async(&rt)
            .iter(|| async { black_box(call_in_process(&channelz, unary_request(&body)).await) });
    });
    group.finish();
}

fn loopback_linked(c: &mut Criterion) {
    let rt = current_thread_runtime();
    let mut group = c.benchmark_group("channelz/loopback_unary_linked");
    let plain = rt.block_on(async {
        let (addr, incoming) = support::bind().await;
        tokio::spawn(
            Server::builder()
                .add_service(support::EchoServer::new(support::EchoService))
                .serve_with_incoming(incoming),
        );
        support::EchoClient::new(support::connect(addr).await)
    });
    group.bench_function("no_layer", |b| {
        b.to_async(&rt).iter(|| one_rpc(plain.clone()))
    });
    let noop = rt.block_on(linked_loopback_client(Timed, Timed));
    group.bench_function("timed_1", |b| {
        b.to_async(&rt).iter(|| one_rpc(noop.clone()))
    });
    let channelz = rt.block_on(linked_loopback_client(
        ServerEntry::new(),
        ChannelEntry::new("bench"),
    ));
    group.bench_function("channelz", |b| {
        b.to_async(&rt).iter(|| one_rpc(channelz.clone()))
    });
    group.finish();
}

criterion_group!(
    benches,
    in_process_server,
    in_process_client,
    loopback_linked
);
criterion_main!(benches);
