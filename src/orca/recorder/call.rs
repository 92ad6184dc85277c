//! The per-call recorder ([`CallMetricsRecorder`]).

use std::sync::{Arc, Mutex, PoisonError};

use super::scope;
use crate::orca::BackendMetrics;
use crate::orca::metrics::Range;

/// One call's metrics, as grpc-go's `orca.CallMetricsRecorder`: what the
/// handler sets here becomes the call's `endpoint-load-metrics-bin`
/// trailer, over the process's values where both set the same one (gRFC
/// A51).
///
/// A handler behind [`CallMetricsLayer`](crate::orca::server::CallMetricsLayer)
/// takes it with [`current`](Self::current), as grpc-go's handlers call
/// `CallMetricsRecorderFromContext(ctx)`: it is made on that first call
/// (grpc-go makes it lazily too), and a call that never asks for it costs
/// no allocation and sends no trailer. Once taken, the handle is the
/// call's wherever it goes: clone it into a spawned task, keep it in a
/// response stream; what is set before the call's trailers are written is
/// sent.
///
/// The utilization setters take grpc-go's ranges (out of range or NaN is
/// ignored); request costs and named metrics take any number but NaN.
///
/// ```
/// use tonic::{Request, Response, Status};
/// use tonic_hotpath::orca::CallMetricsRecorder;
///
/// async fn handler(request: Request<()>) -> Result<Response<()>, Status> {
///     // `None` when no CallMetricsLayer serves this call.
///     if let Some(recorder) = CallMetricsRecorder::current() {
///         recorder.set_request_cost("db_rows", 12.0);
///         recorder.set_named_metric("cache_hit", 1.0);
///         recorder.set_cpu_utilization(0.7);
///     }
///     Ok(Response::new(()))
/// }
/// # let _ = handler;
/// ```
#[derive(Clone, Default)]
pub struct CallMetricsRecorder {
    metrics: Arc<Mutex<BackendMetrics>>,
}

impl CallMetricsRecorder {
    /// The recorder of the call whose handler is running on this thread
    /// (made on the first call of this), or `None` outside a call served
    /// through [`CallMetricsLayer`](crate::orca::server::CallMetricsLayer).
    ///
    /// "Running" means polled by the layer's response future or body: a
    /// handler's own code, and a response stream the layer's body polls.
    /// A task the handler spawns runs elsewhere: take the recorder first
    /// and move the handle into it.
    pub fn current() -> Option<Self> {
        scope::current_recorder()
    }

    /// A recorder of no call: what is set here reaches no trailer (tests,
    /// or code that takes a recorder whether or not a call has one).
    pub fn detached() -> Self {
        Self::default()
    }

    /// The values set so far (a copy).
    pub fn metrics(&self) -> BackendMetrics {
        self.lock(|metrics| metrics.clone())
    }

    /// Sets the request cost `name` (any number but NaN). Request costs are
    /// per call: the out-of-band service never sends them.
    pub fn set_request_cost(&self, name: impl Into<String>, value: f64) {
        if Range::Any.accepts(value) {
            let name = name.into();
            self.lock(move |m| m.request_cost.insert(name, value));
        }
    }

    /// Removes the request cost `name`.
    pub fn delete_request_cost(&self, name: &str) {
        self.lock(|m| m.request_cost.remove(name));
    }

    /// Sets the named metric `name` (any number but NaN).
    pub fn set_named_metric(&self, name: impl Into<String>, value: f64) {
        if Range::Any.accepts(value) {
            let name = name.into();
            self.lock(move |m| m.named_metrics.insert(name, value));
        }
    }

    /// Removes the named metric `name`.
    pub fn delete_named_metric(&self, name: &str) {
        self.lock(|m| m.named_metrics.remove(name));
    }

    /// Runs `read` on the values; a panic elsewhere while they were held
    /// leaves them as they were (the lock is one call's, never contended
    /// but by the call's own tasks).
    pub(crate) fn lock<R>(&self, read: impl FnOnce(&mut BackendMetrics) -> R) -> R {
        read(&mut self.metrics.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Changes the values (the shared setters' hook).
    fn update(&self, change: impl Fn(&mut BackendMetrics)) {
        self.lock(change);
    }
}

utilization_setters!(CallMetricsRecorder);

impl std::fmt::Debug for CallMetricsRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("CallMetricsRecorder")
            .field(&self.metrics())
            .finish()
    }
}
