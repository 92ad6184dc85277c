//! Allocations per in-process unary call on the server stack: a call whose
//! handler never takes its recorder allocates exactly what it allocates
//! without `CallMetricsLayer` (gRFC A51's "costs nothing" holds); one that
//! takes it allocates more (so the count can tell).

use std::task::{Context, Poll};

use tonic_hotpath::orca::server::CallMetricsLayer;
use tonic_hotpath::orca::{CallMetricsRecorder, ServerMetricsRecorder};

use super::stats_harness::{allocations_per_in_process_rpc, layered_echo_routes};

/// Calls its inner service with the call's recorder taken (as a handler
/// that records would), below `CallMetricsLayer`.
#[derive(Clone)]
struct TakesRecorder<S>(S);

impl<S: tower::Service<R>, R> tower::Service<R> for TakesRecorder<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> S::Future {
        CallMetricsRecorder::current()
            .expect("below the layer")
            .set_request_cost("cost", 1.0);
        self.0.call(request)
    }
}

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
        .layer(tower::layer::layer_fn(TakesRecorder))
        .service(tonic::service::Routes::new(
            super::support::EchoServer::new(super::support::EchoService),
        ));
    let taken = allocations_per_in_process_rpc(&recording, CALLS).await;
    assert!(
        taken > without,
        "{taken} allocations per call, {without} without"
    );
}
