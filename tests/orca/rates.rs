//! `CallRates`: a server's queries and errors per second, counted by the
//! stats layer on real calls and published into the recorder the reports
//! are made from.

use std::time::{Duration, Instant};

use tonic_hotpath::orca::server::CallMetricsLayer;
use tonic_hotpath::orca::{CallRates, ServerMetricsProvider, ServerMetricsRecorder};
use tonic_hotpath::stats::CombinedLayer;
use tower::ServiceBuilder;

use super::server::{request, serve_with, unary};
use support::orca::grpc_testing::SimpleRequest;

#[tokio::test]
async fn counted_calls_become_qps_and_eps_in_the_report() {
    let recorder = ServerMetricsRecorder::new();
    let rates = CallRates::new(recorder.clone());
    let started = Instant::now();
    let stack = ServiceBuilder::new()
        .layer(CombinedLayer::server().with(rates.clone()))
        .layer(
            CallMetricsLayer::builder()
                .server_metrics(recorder.clone())
                .build(),
        )
        .into_inner();
    let mut client = serve_with(stack).await;
    for _ in 0..6 {
        assert!(unary(&mut client, "none").await.is_none());
    }
    for _ in 0..2 {
        let failed = client
            .unary_call(request(SimpleRequest::default(), "fail"))
            .await
            .unwrap_err();
        assert_eq!(failed.code(), tonic::Code::ResourceExhausted);
    }
    // `End` is delivered when the server's response body ends, which may
    // be just after the client has its answer.
    let deadline = Instant::now() + Duration::from_secs(10);
    while rates.counts() != (8, 2) {
        assert!(Instant::now() < deadline, "counts {:?}", rates.counts());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // A rate needs at least a millisecond since the last publish.
    tokio::time::sleep(Duration::from_millis(2)).await;
    let (qps, eps) = rates.publish().expect("a rate");
    let elapsed = started.elapsed().as_secs_f64();
    // 8 calls and 2 errors over at most `elapsed` seconds.
    assert!(qps >= 8.0 / elapsed, "qps {qps} over {elapsed} s");
    assert!((qps / eps - 4.0).abs() < 1e-9, "qps {qps}, eps {eps}");
    let published = recorder.server_metrics();
    assert_eq!((published.qps, published.eps), (Some(qps), Some(eps)));

    // The next report carries them (the handler takes its recorder).
    let report = unary(&mut client, "take-only").await.expect("a report");
    assert_eq!((report.rps_fractional, report.eps), (qps, eps));

    // Only that call ended since: a rate without errors; then nothing.
    while rates.counts() != (9, 2) {
        assert!(Instant::now() < deadline, "counts {:?}", rates.counts());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(2)).await;
    let (qps, eps) = rates.publish().expect("a rate");
    assert!(qps > 0.0 && eps == 0.0, "qps {qps}, eps {eps}");
    tokio::time::sleep(Duration::from_millis(2)).await;
    assert_eq!(rates.publish(), Some((0.0, 0.0)));
    let published = recorder.server_metrics();
    assert_eq!((published.qps, published.eps), (Some(0.0), Some(0.0)));
}
