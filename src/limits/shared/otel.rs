//! [`RedisBackend::with_metrics`] (features `otel` and `limits-redis`): the
//! shared backend's state as OpenTelemetry metrics, read from its own
//! counters when the metrics are collected.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use opentelemetry::metrics::MeterProvider;
use opentelemetry::{KeyValue, StringValue};

use super::backend::RedisBackend;
use crate::limits::otel::{crate_meter, observe};

impl RedisBackend {
    /// Whether the fleet's buckets are in use (1) or the replica is in the
    /// fallback (0): a gauge (Prometheus:
    /// `tonic_hotpath_tenant_limit_redis_up`).
    pub const METRIC_UP: &str = "tonic_hotpath.tenant.limit.redis.up";
    /// The replicas alive at the last heartbeat: a gauge, unit `{replica}`.
    pub const METRIC_REPLICAS: &str = "tonic_hotpath.tenant.limit.redis.replicas";
    /// Lease requests answered: a counter, unit `{lease}`.
    pub const METRIC_LEASES: &str = "tonic_hotpath.tenant.limit.redis.leases";
    /// Lease requests that failed (timed out, refused, connection lost): a
    /// counter, unit `{lease}`.
    pub const METRIC_LEASE_FAILURES: &str = "tonic_hotpath.tenant.limit.redis.lease_failures";
    /// Time spent waiting on lease answers, in total: a counter, unit `s`
    /// (with [`METRIC_LEASES`](Self::METRIC_LEASES) and
    /// [`METRIC_LEASE_FAILURES`](Self::METRIC_LEASE_FAILURES), the mean
    /// round trip).
    pub const METRIC_LEASE_TIME: &str = "tonic_hotpath.tenant.limit.redis.lease_time";
    /// Time spent in the fallback (Redis unavailable), in total: a counter,
    /// unit `s`.
    pub const METRIC_FALLBACK_TIME: &str = "tonic_hotpath.tenant.limit.redis.fallback_time";
    /// The attribute naming the backend's key prefix: one series per backend.
    pub const KEY_PREFIX_KEY: &str = "key_prefix";
}

impl RedisBackend {
    /// Exports this backend's state through `provider`'s meter named
    /// `tonic-hotpath` (with the crate's version), each instrument with the
    /// attribute `key_prefix`:
    ///
    /// | Instrument | Kind | Value |
    /// |---|---|---|
    /// | `tonic_hotpath.tenant.limit.redis.up` | gauge | 1 while the fleet's buckets are in use, 0 in the fallback |
    /// | `tonic_hotpath.tenant.limit.redis.replicas` (`{replica}`) | gauge | replicas alive at the last heartbeat |
    /// | `tonic_hotpath.tenant.limit.redis.leases` (`{lease}`) | counter | lease requests answered |
    /// | `tonic_hotpath.tenant.limit.redis.lease_failures` (`{lease}`) | counter | lease requests failed |
    /// | `tonic_hotpath.tenant.limit.redis.lease_time` (`s`) | counter | time waiting on lease answers |
    /// | `tonic_hotpath.tenant.limit.redis.fallback_time` (`s`) | counter | time in the fallback |
    ///
    /// The instruments are observed: their callbacks read the backend's
    /// counters when the metrics are collected; no call does more work.
    /// Once every clone of the backend is dropped they report nothing.
    /// Call it once per backend.
    ///
    /// ```no_run
    /// use opentelemetry_sdk::metrics::SdkMeterProvider;
    /// use tonic_hotpath::limits::RedisBackend;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let provider = SdkMeterProvider::default(); // the application's, with its exporter
    /// let backend = RedisBackend::connect("redis://127.0.0.1:6379/").await?.with_metrics(&provider);
    /// # drop(backend);
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn with_metrics<P: MeterProvider + ?Sized>(self, provider: &P) -> Self {
        let meter = crate_meter(provider);
        let prefix = KeyValue::new(
            RedisBackend::KEY_PREFIX_KEY,
            StringValue::from(Arc::<str>::from(self.key_prefix())),
        );
        let backend = Arc::downgrade(&self.inner);
        meter
            .u64_observable_gauge(RedisBackend::METRIC_UP)
            .with_description(
                "Whether the tenant limits use the fleet's buckets in Redis (1) or the local fallback (0).",
            )
            .with_callback(observe(&backend, &prefix, |backend| {
                Some(u64::from(backend.breaker.is_up()))
            }))
            .build();
        meter
            .u64_observable_gauge(RedisBackend::METRIC_REPLICAS)
            .with_unit("{replica}")
            .with_description("Replicas alive at the last heartbeat.")
            .with_callback(observe(&backend, &prefix, |backend| {
                Some(u64::from(backend.replicas()))
            }))
            .build();
        meter
            .u64_observable_counter(RedisBackend::METRIC_LEASES)
            .with_unit("{lease}")
            .with_description("Lease requests answered by Redis.")
            .with_callback(observe(&backend, &prefix, |backend| {
                Some(backend.counts.leases.load(Ordering::Relaxed))
            }))
            .build();
        meter
            .u64_observable_counter(RedisBackend::METRIC_LEASE_FAILURES)
            .with_unit("{lease}")
            .with_description("Lease requests that failed (timed out, refused, connection lost).")
            .with_callback(observe(&backend, &prefix, |backend| {
                Some(backend.counts.failed_leases.load(Ordering::Relaxed))
            }))
            .build();
        meter
            .f64_observable_counter(RedisBackend::METRIC_LEASE_TIME)
            .with_unit("s")
            .with_description("Time spent waiting on lease answers.")
            .with_callback(observe(&backend, &prefix, |backend| {
                Some(backend.counts.lease_nanos.load(Ordering::Relaxed) as f64 / 1e9)
            }))
            .build();
        meter
            .f64_observable_counter(RedisBackend::METRIC_FALLBACK_TIME)
            .with_unit("s")
            .with_description("Time spent in the local fallback while Redis was unavailable.")
            .with_callback(observe(&backend, &prefix, |backend| {
                Some(backend.breaker.time_down().as_secs_f64())
            }))
            .build();
        self
    }
}
