//! What an adaptive limit says: refusals by tenant and reason
//! (`LimitMetrics`), its state as gauges, utilization into ORCA.

use support::limits::{HOLD, burst, call, client, count, outcomes, serve};
use support::otel::Sdk;
use support::wait_until;
use tonic::Code;
use tonic_hotpath::limits::{AdaptiveLimitLayer, Gradient, LimitMetrics, TenantLabels};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_counted_by_tenant_and_reason_and_the_state_is_observed() {
    let sdk = Sdk::new();
    let layer = AdaptiveLimitLayer::new()
        .gradient(Gradient::default().initial_limit(2).limits(2, 2))
        .observer(LimitMetrics::new(
            sdk.provider(),
            TenantLabels::first_seen(1),
        ))
        .with_metrics(sdk.provider(), "echo");
    let (addr, gate) = serve(layer).await;
    let client = client(addr).await;
    let (held, _) = burst(&client, "a", HOLD, 2);
    wait_until("two calls held", || gate.entered() == 2).await;
    for tenant in [Some("a"), Some("a"), Some("b"), None] {
        // b and the call without a tenant are within their share (1 of
        // 2), so they pass; a is refused twice.
        let code = call(&client, tenant, "x").await.0;
        assert_eq!(code == Code::Ok, tenant != Some("a"), "{tenant:?}");
    }
    let counts = sdk.counts_by(LimitMetrics::REJECTIONS, "reason");
    assert_eq!(
        counts.get(&Some("concurrency_limited".to_owned())),
        Some(&2)
    );
    let by_tenant = sdk.counts_by(LimitMetrics::REJECTIONS, LimitMetrics::TENANT_KEY);
    assert_eq!(by_tenant.get(&Some("a".to_owned())), Some(&2));

    let limiter = [(AdaptiveLimitLayer::LIMITER_KEY, "echo")];
    let gauge = |name| match sdk.point(name, &limiter) {
        Some(support::otel::Point::Gauge(value)) => value,
        other => panic!("{name}: {other:?}"),
    };
    assert_eq!(gauge(AdaptiveLimitLayer::METRIC_LIMIT), 2.0);
    assert_eq!(gauge(AdaptiveLimitLayer::METRIC_IN_FLIGHT), 2.0);
    gate.open();
    assert_eq!(count(&outcomes(held).await, Code::Ok), 2);
    wait_until("no call in flight", || {
        matches!(
            sdk.point(AdaptiveLimitLayer::METRIC_IN_FLIGHT, &limiter),
            Some(support::otel::Point::Gauge(value)) if value == 0.0
        )
    })
    .await;
}

#[cfg(feature = "orca")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn utilization_is_published_into_orca_after_each_window() {
    use tonic_hotpath::orca::{ServerMetricsProvider, ServerMetricsRecorder};
    let recorder = ServerMetricsRecorder::new();
    let layer = AdaptiveLimitLayer::new()
        .gradient(
            Gradient::default()
                .initial_limit(4)
                .limits(4, 4)
                .min_samples(1),
        )
        .report_utilization(recorder.clone());
    let (addr, gate) = serve(layer).await;
    let client = client(addr).await;
    // Two calls held while a third ends after the first window: 2 in
    // flight of 4 when the window closes.
    let (held, _) = burst(&client, "a", HOLD, 2);
    wait_until("two calls held", || gate.entered() == 2).await;
    let deadline = support::deadline();
    while recorder.server_metrics().application_utilization != Some(0.5) {
        // Each quick call may close a window (once 100 ms have passed).
        assert_eq!(call(&client, Some("b"), "x").await.0, Code::Ok);
        assert!(
            std::time::Instant::now() < deadline,
            "utilization never published"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    gate.open();
    assert_eq!(count(&outcomes(held).await, Code::Ok), 2);
}
