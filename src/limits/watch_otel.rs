//! [`FileWatch::with_metrics`] (features `otel` and `limits-file`): a
//! watched overrides file's reload status as OpenTelemetry metrics, read
//! from the watch's own counters when the metrics are collected.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use opentelemetry::metrics::MeterProvider;
use opentelemetry::{KeyValue, StringValue};

use super::otel::{crate_meter, observe};
use super::watch::FileWatch;

impl FileWatch {
    /// Whether the last check of a watched overrides file succeeded: a gauge,
    /// 1 or 0 (Prometheus: `tonic_hotpath_tenant_limit_file_last_reload_successful`,
    /// as Cortex's `cortex_runtime_config_last_reload_successful`).
    pub const METRIC_LAST_RELOAD_SUCCESSFUL: &str =
        "tonic_hotpath.tenant.limit.file.last_reload_successful";
    /// When a check of a watched overrides file last succeeded, in seconds
    /// since the Unix epoch: a gauge, unit `s` (Prometheus:
    /// `tonic_hotpath_tenant_limit_file_last_reload_success_timestamp_seconds`).
    pub const METRIC_LAST_RELOAD_SUCCESS_TIMESTAMP: &str =
        "tonic_hotpath.tenant.limit.file.last_reload_success_timestamp";
    /// The versions of a watched overrides file applied: a counter, unit
    /// `{reload}` (Prometheus: `tonic_hotpath_tenant_limit_file_reloads_total`).
    pub const METRIC_RELOADS: &str = "tonic_hotpath.tenant.limit.file.reloads";
    /// The failures of a watched overrides file (bad versions, read errors),
    /// each counted once: a counter, unit `{failure}` (Prometheus:
    /// `tonic_hotpath_tenant_limit_file_reload_failures_total`).
    pub const METRIC_RELOAD_FAILURES: &str = "tonic_hotpath.tenant.limit.file.reload_failures";
    /// The attribute naming the watched file (OpenTelemetry's `file.path`;
    /// `file_path` in Prometheus): one series per watched file.
    pub const PATH_KEY: &str = "file.path";
}

impl FileWatch {
    /// Exports this watch's status through `provider`'s meter named
    /// `tonic-hotpath` (with the crate's version), each instrument with the
    /// attribute `file.path` (the path given to
    /// [`watch_file`](super::LimitsHandle::watch_file)):
    ///
    /// | Instrument | Kind | Value |
    /// |---|---|---|
    /// | `tonic_hotpath.tenant.limit.file.last_reload_successful` | gauge | 1 if the last check succeeded, 0 if it failed ([`last_error`](Self::last_error)) |
    /// | `tonic_hotpath.tenant.limit.file.last_reload_success_timestamp` (`s`) | gauge | [`last_success`](Self::last_success), Unix seconds |
    /// | `tonic_hotpath.tenant.limit.file.reloads` (`{reload}`) | counter | [`reloads`](Self::reloads): versions applied |
    /// | `tonic_hotpath.tenant.limit.file.reload_failures` (`{failure}`) | counter | [`failures`](Self::failures): bad versions and read errors, each once |
    ///
    /// A check succeeds when the file is read and valid, changed or not,
    /// so the timestamp advances on every good check and stops at the last
    /// good one while the file is bad: `time() -
    /// tonic_hotpath_tenant_limit_file_last_reload_success_timestamp_seconds`
    /// is how long the file has been failing. The gauges report nothing
    /// before the first check (the timestamp: before the first good one).
    ///
    /// The instruments are observed: their callbacks read the watch's
    /// counters when the metrics are collected, and the checks do no more
    /// work than without them. Once the watch is dropped they report
    /// nothing. Call it once per watch.
    ///
    /// ```
    /// use std::time::Duration;
    /// use opentelemetry_sdk::metrics::SdkMeterProvider;
    /// use tonic_hotpath::limits::{Limits, TenantLimitLayer};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let provider = SdkMeterProvider::default(); // the application's, with its exporter
    /// let handle = TenantLimitLayer::new(Limits::unlimited()).handle();
    /// let watch = handle
    ///     .watch_file("/etc/cortex/overrides.yaml", Duration::from_secs(10))
    ///     .with_metrics(&provider);
    /// # drop(watch);
    /// # }
    /// ```
    #[must_use]
    pub fn with_metrics<P: MeterProvider + ?Sized>(self, provider: &P) -> Self {
        let meter = crate_meter(provider);
        let path = KeyValue::new(
            FileWatch::PATH_KEY,
            StringValue::from(Arc::<str>::from(self.path.to_string_lossy())),
        );
        let watched = Arc::downgrade(&self.status);

        meter
            .u64_observable_gauge(FileWatch::METRIC_LAST_RELOAD_SUCCESSFUL)
            .with_description(
                "Whether the last check of the tenant limits overrides file succeeded (1) or failed (0).",
            )
            .with_callback(observe(&watched, &path, |status| {
                let checked = status.checks.load(Ordering::Acquire) > 0;
                checked.then(|| u64::from(!status.failing.load(Ordering::Acquire)))
            }))
            .build();
        meter
            .f64_observable_gauge(FileWatch::METRIC_LAST_RELOAD_SUCCESS_TIMESTAMP)
            .with_unit("s")
            .with_description(
                "When a check of the tenant limits overrides file last succeeded, in seconds since the Unix epoch.",
            )
            .with_callback(observe(&watched, &path, |status| {
                match status.last_success_ms.load(Ordering::Acquire) {
                    0 => None,
                    ms => Some(ms as f64 / 1000.0),
                }
            }))
            .build();
        meter
            .u64_observable_counter(FileWatch::METRIC_RELOADS)
            .with_unit("{reload}")
            .with_description("Versions of the tenant limits overrides file applied.")
            .with_callback(observe(&watched, &path, |status| {
                Some(status.reloads.load(Ordering::Acquire))
            }))
            .build();
        meter
            .u64_observable_counter(FileWatch::METRIC_RELOAD_FAILURES)
            .with_unit("{failure}")
            .with_description(
                "Failures of the tenant limits overrides file (bad versions, read errors), each counted once.",
            )
            .with_callback(observe(&watched, &path, |status| {
                Some(status.failures.load(Ordering::Acquire))
            }))
            .build();
        self
    }
}
