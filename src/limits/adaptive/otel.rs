//! [`AdaptiveLimitLayer::with_metrics`] (feature `otel`): what an adaptive
//! limit learned, as OpenTelemetry gauges read when the metrics are
//! collected.

use std::sync::Arc;

use arc_swap::ArcSwap;
use opentelemetry::metrics::MeterProvider;
use opentelemetry::{KeyValue, StringValue};

use super::admission::Admission;
use super::layer::AdaptiveLimitLayer;
use crate::limits::otel::{crate_meter, observe};

impl AdaptiveLimitLayer {
    /// The concurrency limit in force: a gauge, unit `{call}`.
    pub const METRIC_LIMIT: &str = "tonic_hotpath.limits.adaptive.limit";
    /// Calls in flight: a gauge, unit `{call}`.
    pub const METRIC_IN_FLIGHT: &str = "tonic_hotpath.limits.adaptive.in_flight";
    /// The baseline latency (the minimum RTT estimate): a gauge, unit `s`.
    pub const METRIC_BASELINE: &str = "tonic_hotpath.limits.adaptive.baseline_latency";
    /// The last window's mean latency: a gauge, unit `s`.
    pub const METRIC_LATENCY: &str = "tonic_hotpath.limits.adaptive.latency";
    /// The attribute naming the limit (one series per layer).
    pub const LIMITER_KEY: &str = "limiter";

    /// Exports the limit's state through `provider`'s meter named
    /// `tonic-hotpath` (with the crate's version), each gauge with the
    /// attribute `limiter` = `name`:
    ///
    /// | Instrument | Unit | Value |
    /// |---|---|---|
    /// | `tonic_hotpath.limits.adaptive.limit` | `{call}` | the concurrency limit |
    /// | `tonic_hotpath.limits.adaptive.in_flight` | `{call}` | calls in flight |
    /// | `tonic_hotpath.limits.adaptive.baseline_latency` | `s` | the minimum RTT estimate |
    /// | `tonic_hotpath.limits.adaptive.latency` | `s` | the last window's mean latency |
    ///
    /// Observed: the callbacks read the layer's state at collection; no
    /// call does more work. Refusals by tenant and reason are counted by
    /// `LimitMetrics` as the layer's [`observer`](Self::observer). Call it
    /// once, after the other builder methods.
    ///
    /// ```
    /// use opentelemetry_sdk::metrics::SdkMeterProvider;
    /// use tonic_hotpath::limits::{AdaptiveLimitLayer, LimitMetrics, TenantLabels};
    ///
    /// let provider = SdkMeterProvider::default(); // the application's, with its exporter
    /// let layer = AdaptiveLimitLayer::new()
    ///     .observer(LimitMetrics::new(&provider, TenantLabels::first_seen(100)))
    ///     .with_metrics(&provider, "grpc");
    /// # drop(layer);
    /// ```
    pub fn with_metrics<P: MeterProvider + ?Sized>(self, provider: &P, name: &str) -> Self {
        let meter = crate_meter(provider);
        let limiter = KeyValue::new(
            AdaptiveLimitLayer::LIMITER_KEY,
            StringValue::from(Arc::<str>::from(name)),
        );
        let state = Arc::downgrade(self.cell());
        let read = |value: fn(&Admission) -> f64| {
            move |cell: &ArcSwap<Admission>| Some(value(&cell.load()))
        };
        meter
            .u64_observable_gauge(AdaptiveLimitLayer::METRIC_LIMIT)
            .with_unit("{call}")
            .with_description("The concurrency limit an adaptive limit learned.")
            .with_callback(observe(&state, &limiter, |cell: &ArcSwap<Admission>| {
                Some(u64::from(cell.load().limit()))
            }))
            .build();
        meter
            .u64_observable_gauge(AdaptiveLimitLayer::METRIC_IN_FLIGHT)
            .with_unit("{call}")
            .with_description("Calls in flight under an adaptive limit.")
            .with_callback(observe(&state, &limiter, |cell: &ArcSwap<Admission>| {
                Some(u64::from(cell.load().in_flight()))
            }))
            .build();
        meter
            .f64_observable_gauge(AdaptiveLimitLayer::METRIC_BASELINE)
            .with_unit("s")
            .with_description("The latency of an unqueued call (minimum RTT estimate).")
            .with_callback(observe(
                &state,
                &limiter,
                read(|admission| admission.baseline().as_secs_f64()),
            ))
            .build();
        meter
            .f64_observable_gauge(AdaptiveLimitLayer::METRIC_LATENCY)
            .with_unit("s")
            .with_description("The mean latency of the last window's unary calls.")
            .with_callback(observe(
                &state,
                &limiter,
                read(|admission| admission.latency().as_secs_f64()),
            ))
            .build();
        self
    }
}
