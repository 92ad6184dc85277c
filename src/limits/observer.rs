//! [`LimitObserver`]: what the limiter reports (each refusal), for
//! metrics and logs.

use std::sync::Arc;

use super::overload::OverloadError;
use super::refusal::LimitError;

/// Told of every call [`TenantLimitLayer`](super::TenantLimitLayer)
/// refuses, on the refusing thread, before the refusal is answered: count
/// it, log it. Keep it cheap; it runs on the request path (refusals
/// only: admitted calls are not reported).
///
/// `LimitMetrics` (feature `otel`) counts refusals
/// by tenant and reason as an OpenTelemetry counter.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use tonic_hotpath::limits::{LimitError, LimitObserver, Limits, TenantLimitLayer};
///
/// #[derive(Debug, Default)]
/// struct CountRefusals(AtomicU64);
///
/// impl LimitObserver for CountRefusals {
///     fn on_refused(&self, refused: &LimitError) {
///         self.0.fetch_add(1, Ordering::Relaxed);
///         eprintln!("refused: {refused}");
///     }
/// }
///
/// let layer = TenantLimitLayer::new(Limits::unlimited().with_max_in_flight(16))
///     .observer(CountRefusals::default());
/// # drop(layer);
/// ```
pub trait LimitObserver: Send + Sync + 'static {
    /// A call was refused.
    fn on_refused(&self, refused: &LimitError);

    /// A call was refused for overload by
    /// [`AdaptiveLimitLayer`](super::AdaptiveLimitLayer) (with its
    /// [`observer`](super::AdaptiveLimitLayer::observer)). Nothing by
    /// default.
    fn on_overloaded(&self, refused: &OverloadError) {
        let _ = refused;
    }
}

impl<T: LimitObserver> LimitObserver for Arc<T> {
    fn on_refused(&self, refused: &LimitError) {
        (**self).on_refused(refused);
    }

    fn on_overloaded(&self, refused: &OverloadError) {
        (**self).on_overloaded(refused);
    }
}
