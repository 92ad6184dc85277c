//! gRPC's OpenTelemetry plugin as ready-made stats handlers (feature `otel`).
//!
//! - [`OtelMetrics`]: the metrics of gRFC A66 (`grpc.server.call.*`,
//!   `grpc.client.attempt.*`, `grpc.client.call.duration`), recorded
//!   through any OpenTelemetry `MeterProvider` the application hands in.
//!
//! The handlers depend on the OpenTelemetry API crate only; the
//! application picks the SDK and exporter. Register them like any
//! [`StatsHandler`](super::StatsHandler), alone or beside others:
//! `CombinedLayer::server().with(metrics)`.

mod metrics;

pub use metrics::{MetricsRpcState, OtelMetrics, OtelMetricsBuilder, OtelMetricsError};
