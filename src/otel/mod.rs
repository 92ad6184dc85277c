//! gRPC's OpenTelemetry plugin as ready-made stats handlers (feature `otel`).
//!
//! - [`OtelMetrics`]: the metrics of gRFC A66 (`grpc.server.call.*`,
//!   `grpc.client.attempt.*`, `grpc.client.call.duration`), recorded
//!   through any OpenTelemetry `MeterProvider` the application hands in.
//! - [`OtelTracing`]: the spans of gRFC A72 (`Sent.*` / `Attempt.*` on a
//!   client, `Recv.*` on a server, one event per message), propagated
//!   with any `TextMapPropagator`: W3C `traceparent`, or
//!   [`GrpcTraceBinPropagator`] for grpc-go's `grpc-trace-bin`.
//!
//! The handlers depend on the OpenTelemetry API crate only; the
//! application picks the SDK and exporter. (Feature
//! `otel-bound-instruments` adds the SDK, to recognise its meter provider
//! and record through its bound instruments: see [`OtelMetrics`].) Register them like any
//! [`StatsHandler`](crate::stats::StatsHandler), alone or beside others:
//! `CombinedLayer::server().with(metrics).with(tracing)`.

mod metrics;
mod propagation;
mod tracing;

#[cfg(feature = "tenant")]
pub use self::metrics::TenantAttribute;
pub use self::metrics::{MetricsRpcState, OtelMetrics, OtelMetricsBuilder, OtelMetricsError};
pub use self::propagation::GrpcTraceBinPropagator;
pub use self::tracing::{OtelTracing, OtelTracingState};
#[allow(deprecated)]
pub use self::{propagation::GRPC_TRACE_BIN, tracing::TRACER_NAME};
