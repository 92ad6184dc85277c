//! [`AdaptiveHandle`] and [`AdaptiveStatus`]: what an adaptive limit has
//! learned, read at run time.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use super::admission::Admission;

/// What an [`AdaptiveLimitLayer`](super::AdaptiveLimitLayer) knows now.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct AdaptiveStatus {
    /// The concurrency limit in force.
    pub limit: u32,
    /// Calls in flight (admitted, not yet ended).
    pub in_flight: u32,
    /// The last window's mean latency of unary calls (zero before the
    /// first window).
    pub latency: Duration,
    /// The baseline: the least window mean over the horizon, the latency
    /// of a call that found no queue (the minimum RTT estimate; zero
    /// before the first window).
    pub baseline: Duration,
    /// Tenants tracked.
    pub tenants: usize,
}

impl AdaptiveStatus {
    pub(crate) fn of(admission: &Admission) -> Self {
        Self {
            limit: admission.limit(),
            in_flight: admission.in_flight(),
            latency: admission.latency(),
            baseline: admission.baseline(),
            tenants: admission.tenants(),
        }
    }

    /// Calls in flight ÷ the limit (above 1 while tenants within their
    /// share or never-shed calls run beyond it).
    pub fn utilization(&self) -> f64 {
        f64::from(self.in_flight) / f64::from(self.limit.max(1))
    }
}

/// Reads an [`AdaptiveLimitLayer`](super::AdaptiveLimitLayer)'s status at
/// run time (from [`handle`](super::AdaptiveLimitLayer::handle)); it
/// follows the layer through its builder methods.
///
/// ```
/// use tonic_hotpath::limits::{AdaptiveLimitLayer, Gradient};
///
/// let layer = AdaptiveLimitLayer::new();
/// let handle = layer.handle();
/// let layer = layer.gradient(Gradient::default().initial_limit(8));
/// assert_eq!(handle.status().limit, 8);
/// assert_eq!(handle.status().in_flight, 0);
/// # drop(layer);
/// ```
#[derive(Clone)]
pub struct AdaptiveHandle {
    admission: Arc<ArcSwap<Admission>>,
}

impl fmt::Debug for AdaptiveHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptiveHandle")
            .field("status", &self.status())
            .finish()
    }
}

impl AdaptiveHandle {
    pub(crate) fn new(admission: Arc<ArcSwap<Admission>>) -> Self {
        Self { admission }
    }

    /// The status now.
    pub fn status(&self) -> AdaptiveStatus {
        AdaptiveStatus::of(&self.admission.load())
    }
}
