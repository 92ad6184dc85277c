//! Allocations per in-process unary call on the server stack: a call whose
//! handler never takes its recorder allocates exactly what it allocates
//! without `CallMetricsLayer` (gRFC A51's "costs nothing" holds); one that
//! takes it allocates more (so the count can tell).

use tonic_hotpath::orca::ServerMetricsRecorder;
use tonic_hotpath::orca::server::CallMetricsLayer;

use support::orca::records::Records;

use support::stats_harness::{allocations_per_in_process_rpc, layered_echo_routes};

#[tokio::test(flavor = "current_thread")]
async fn a_call_that_records_nothing_allocates_nothing_more() {
    const CALLS: u64 = 200;
    let without = allocations_per_in_process_rpc(
        &layered_echo_routes(tower::layer::util::Identity::new()),
        CALLS,
    )
    .await;
    assert!(without > 0.0, "the installed allocator is the one counted");

    let process = ServerMetricsRecorder::new();
    process.set_cpu_utilization(0.5);
    for layer in [
        CallMetricsLayer::new(),
        CallMetricsLayer::builder().server_metrics(process).build(),
    ] {
        let with = allocations_per_in_process_rpc(&layered_echo_routes(layer), CALLS).await;
        assert_eq!(with, without, "CallMetricsLayer, nothing recorded");
    }

    // Taking the recorder (and reporting) allocates: the count tells.
    let recording = tower::ServiceBuilder::new()
        .layer(CallMetricsLayer::new())
        .layer(tower::layer::layer_fn(Records))
        .service(tonic::service::Routes::new(support::EchoServer::new(
            support::EchoService,
        )));
    let taken = allocations_per_in_process_rpc(&recording, CALLS).await;
    assert!(
        taken > without,
        "{taken} allocations per call, {without} without"
    );
}
