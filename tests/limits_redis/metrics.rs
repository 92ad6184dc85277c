//! `RedisBackend::with_metrics` (features `otel` and `limits-redis`): the
//! backend's state read back from the OpenTelemetry SDK's in-memory
//! exporter while Redis answers, after it is killed (the fallback's time
//! counting), and after it is back.

use std::time::Duration;

use tonic_hotpath::limits::{Limits, Rate, RedisBackend, TenantLimitLayer};

use crate::fleet::Replica;
use crate::redis_server::RedisServer;
use support::deadline;
use support::limits::call;
use support::otel::{Point, Sdk};

const ATTRS: &[(&str, &str)] = &[(RedisBackend::KEY_PREFIX_KEY, "metrics")];

fn gauge(sdk: &Sdk, name: &str) -> f64 {
    match sdk.point(name, ATTRS) {
        Some(Point::Gauge(value)) => value,
        other => panic!("{name}: {other:?}"),
    }
}

fn counter(sdk: &Sdk, name: &str) -> u64 {
    match sdk.point(name, ATTRS) {
        Some(Point::Counter(value)) => value,
        other => panic!("{name}: {other:?}"),
    }
}

fn total(sdk: &Sdk, name: &str) -> f64 {
    match sdk.point(name, ATTRS) {
        Some(Point::Total(value)) => value,
        other => panic!("{name}: {other:?}"),
    }
}

/// Waits (at most `support::PATIENCE`) until `done` holds of the export.
async fn wait(what: &str, sdk: &Sdk, done: impl Fn(&Sdk) -> bool) {
    let deadline = deadline();
    while !done(sdk) {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backend_exports_up_leases_and_the_fallbacks_time() {
    let Some(mut redis) = RedisServer::start(&[]).await else {
        return;
    };
    let sdk = Sdk::exporting_on_demand();
    let backend = RedisBackend::builder(redis.url())
        .key_prefix("metrics")
        .heartbeat_interval(Duration::from_millis(100))
        .connect()
        .await
        .expect("connect")
        .with_metrics(sdk.provider());
    let limits = Limits::unlimited().with_rate(Rate::new(100.0, 10).expect("a valid rate"));
    let replica = Replica::start(TenantLimitLayer::new(limits).shared(backend)).await;
    assert_eq!(gauge(&sdk, RedisBackend::METRIC_UP), 1.0);
    assert_eq!(gauge(&sdk, RedisBackend::METRIC_REPLICAS), 1.0);
    assert_eq!(total(&sdk, RedisBackend::METRIC_FALLBACK_TIME), 0.0);
    // Calls take leases.
    for _ in 0..5 {
        call(&replica.clients[0], Some("t"), "x").await;
    }
    wait("a lease", &sdk, |sdk| {
        counter(sdk, RedisBackend::METRIC_LEASES) >= 1
    })
    .await;
    assert!(total(&sdk, RedisBackend::METRIC_LEASE_TIME) > 0.0);
    assert_eq!(counter(&sdk, RedisBackend::METRIC_LEASE_FAILURES), 0);

    redis.kill();
    wait("the fallback", &sdk, |sdk| {
        gauge(sdk, RedisBackend::METRIC_UP) == 0.0
    })
    .await;
    wait("time in the fallback", &sdk, |sdk| {
        total(sdk, RedisBackend::METRIC_FALLBACK_TIME) > 0.0
    })
    .await;
    redis.restart().await;
    wait("Redis back", &sdk, |sdk| {
        gauge(sdk, RedisBackend::METRIC_UP) == 1.0
    })
    .await;
    let down = total(&sdk, RedisBackend::METRIC_FALLBACK_TIME);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        total(&sdk, RedisBackend::METRIC_FALLBACK_TIME),
        down,
        "no longer counting"
    );
}
