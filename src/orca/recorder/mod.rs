//! The recorders a server sets its metrics through, as grpc-go's:
//! [`ServerMetricsRecorder`] for the process (read lock-free by every call
//! and by the out-of-band service) and [`CallMetricsRecorder`] for one
//! call (its values win over the process's in that call's trailer).
//!
//! - `setters.rs`: the setters both share, with grpc-go's ranges.
//! - `server.rs`: the process-wide recorder.
//! - `call.rs`: the per-call recorder and [`CallMetricsRecorder::current`].
//! - `scope.rs`: the call a thread is polling, which `current` finds.

#[macro_use]
mod setters;
mod call;
pub(crate) mod scope;
mod server;

pub use call::CallMetricsRecorder;
pub use server::ServerMetricsRecorder;
