//! What the layer learns from admitted calls: unary calls are latency
//! samples, streams are not, and a deadline shorter than the latency
//! learned is refused at once.

use std::time::{Duration, Instant};

use support::limits::{HOLD, burst, call, client, count, outcomes, request, serve};
use support::wait_until;
use tonic::Code;
use tonic_hotpath::limits::AdaptiveLimitLayer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unary_calls_teach_the_latency_and_a_shorter_deadline_is_refused_at_once() {
    let layer = AdaptiveLimitLayer::new();
    let handle = layer.handle();
    let (addr, gate) = serve(layer).await;
    let client = client(addr).await;
    assert_eq!(handle.status().latency, Duration::ZERO);

    // Ten calls held for at least 2 s: one window of ten samples.
    let started = Instant::now();
    let (held, _) = burst(&client, "a", HOLD, 10);
    wait_until("ten calls held", || gate.entered() == 10).await;
    let hold = Duration::from_secs(2);
    tokio::time::sleep(hold.saturating_sub(started.elapsed())).await;
    gate.open();
    assert_eq!(count(&outcomes(held).await, Code::Ok), 10);
    // Each was held at least 2 s less the time it took to arrive.
    wait_until("a window of ten samples", || {
        handle.status().latency >= Duration::from_secs(1)
    })
    .await;
    let status = handle.status();
    assert_eq!(status.baseline, status.latency, "{status:?}");

    // A call that has half a second left cannot be answered in time.
    let mut short = request(Some("a"), "quick");
    short.set_timeout(Duration::from_millis(500));
    let refused = client
        .clone()
        .unary_echo(short)
        .await
        .expect_err("refused for its deadline");
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");
    assert!(
        refused
            .message()
            .starts_with("server overloaded: deadline 500ms is shorter than the current latency"),
        "{refused:?}"
    );
    // One without a deadline, or with a long one, is admitted.
    assert_eq!(call(&client, Some("a"), "quick").await.0, Code::Ok);
    let mut long = request(Some("a"), "quick");
    long.set_timeout(Duration::from_secs(30));
    assert!(client.clone().unary_echo(long).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_are_no_latency_samples() {
    let layer = AdaptiveLimitLayer::new();
    let handle = layer.handle();
    // The plain echo: a message per word.
    let (addr, incoming) = support::bind().await;
    support::stacks::spawn_echo(layer, support::EchoService, incoming);
    let client = client(addr).await;
    // Streams of two messages, ended, for well over ten windows' time: the
    // windows close without a sample (after ten windows' wait), and the
    // latency stays unknown.
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(1_500) {
        let mut stream = client
            .clone()
            .server_streaming_echo(request(Some("a"), "one two"))
            .await
            .expect("a stream")
            .into_inner();
        while stream.message().await.expect("the stream").is_some() {}
    }
    wait_until("every place given back", || handle.status().in_flight == 0).await;
    assert_eq!(handle.status().latency, Duration::ZERO);
    // Unary calls are samples: a window closes on them (30 of them, or
    // fewer once it is a second old).
    let deadline = support::deadline();
    while handle.status().latency.is_zero() {
        assert_eq!(call(&client, Some("a"), "x").await.0, Code::Ok);
        assert!(Instant::now() < deadline, "no window of unary samples");
    }
}
