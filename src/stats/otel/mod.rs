//! gRPC's OpenTelemetry instrumentation as ready-made stats handlers (feature `otel`).

mod propagation;
mod tracing;

pub use self::propagation::{GRPC_TRACE_BIN, GrpcTraceBinPropagator};
pub use self::tracing::{OtelTracing, OtelTracingState, TRACER_NAME};
