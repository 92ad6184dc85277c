//! The OpenTelemetry tests, one binary (`cargo test --test otel`), each
//! former test file a module: `otel_stacks` needs the `bench-internals`
//! feature, so it is built only with it.

/// For `otel_metrics_alloc`; it counts per thread, so the other tests of
/// this binary, running in parallel, do not disturb its counts.
#[global_allocator]
static ALLOCATOR: support::alloc_count::CountingAllocator = support::alloc_count::CountingAllocator;

mod otel_interop_go;
mod otel_metrics;
mod otel_metrics_alloc;
mod otel_metrics_bound;
mod otel_metrics_methods;
mod otel_metrics_tenant;
#[cfg(feature = "bench-internals")]
mod otel_stacks;
mod otel_tracing;
mod otel_tracing_status;
