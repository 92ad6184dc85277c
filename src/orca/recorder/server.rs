//! The process-wide recorder ([`ServerMetricsRecorder`]).

use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::orca::{BackendMetrics, ServerMetricsProvider};

/// The process's metrics, as grpc-go's `orca.ServerMetricsRecorder`: set
/// from anywhere (a sampler task, a handler), read lock-free by every
/// call's trailer and by the out-of-band
/// [`OrcaService`](crate::orca::OrcaService) stream.
///
/// Cloning gives another handle to the same values. A setter copies the
/// current values, changes the copy and publishes it (grpc-go's
/// copy-on-write, through [`ArcSwap`]): setting costs a copy, reading costs
/// no lock and no write to shared memory beyond the swap's own. A value out
/// of its range (see [`BackendMetrics`]) or NaN is ignored, as grpc-go's
/// setters ignore it.
///
/// ```
/// use tonic_hotpath::orca::{ServerMetricsProvider, ServerMetricsRecorder};
///
/// let recorder = ServerMetricsRecorder::new();
/// recorder.set_cpu_utilization(0.42);
/// recorder.set_qps(950.0);
/// recorder.set_memory_utilization(1.5); // out of [0, 1]: ignored
/// recorder.set_named_utilization("disk", 0.3);
///
/// let now = recorder.server_metrics();
/// assert_eq!(now.cpu_utilization, Some(0.42));
/// assert_eq!(now.mem_utilization, None);
/// assert_eq!(now.utilization["disk"], 0.3);
/// ```
#[derive(Clone, Default)]
pub struct ServerMetricsRecorder {
    state: Arc<ArcSwap<BackendMetrics>>,
}

impl ServerMetricsRecorder {
    /// A recorder with nothing set.
    pub fn new() -> Self {
        Self::default()
    }

    /// The current values, without copying them.
    pub(crate) fn load(&self) -> arc_swap::Guard<Arc<BackendMetrics>> {
        self.state.load()
    }

    /// Publishes a changed copy of the current values (retried if another
    /// setter published first, so no change is lost).
    fn update(&self, change: impl Fn(&mut BackendMetrics)) {
        self.state.rcu(|current| {
            let mut next = BackendMetrics::clone(current);
            change(&mut next);
            next
        });
    }
}

utilization_setters!(ServerMetricsRecorder);

impl ServerMetricsProvider for ServerMetricsRecorder {
    fn server_metrics(&self) -> BackendMetrics {
        BackendMetrics::clone(&self.state.load())
    }
}

impl std::fmt::Debug for ServerMetricsRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ServerMetricsRecorder")
            .field(&**self.state.load())
            .finish()
    }
}
