//! `AdaptiveLimitLayer` on real tonic servers on 127.0.0.1: refusals at
//! the limit (`UNAVAILABLE` with a pushback), fair shares by tenant,
//! priority classes, deadlines, streams, and what it says (metrics, ORCA).

mod admission;
mod learning;
#[cfg(feature = "otel")]
mod metrics;
mod retry_go;
