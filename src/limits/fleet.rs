//! The Redis backend plugged into the layer (feature `limits-redis`):
//! [`TenantLimitLayer::shared`] and [`LimitsHandle::shared_status`]. The
//! top floor of `limits` (see its module docs): it joins the layer to the
//! backend, which is a leaf the limiter does not know.

use std::any::Any;
use std::sync::Arc;

use super::handle::LimitsHandle;
use super::keeper::{Keeper, SharedRates};
use super::layer::TenantLimitLayer;
use super::shared::{RedisBackend, RedisBackendStatus, SharedLimits};

impl TenantLimitLayer {
    /// Keeps the tenants' rates (calls and work units) in `backend`, one
    /// fleet-wide bucket per tenant shared by every replica that uses the
    /// same Redis and key prefix (feature `limits-redis`; see the
    /// [module docs](crate::limits), "Across a fleet"). Limits still come from the
    /// defaults, the overrides and the overrides file, as configured on
    /// each replica; in-flight limits stay per replica. The replica count
    /// (for the fallback while Redis is unavailable) comes from the
    /// backend's heartbeat, replacing [`replicas`](Self::replicas).
    ///
    /// ```no_run
    /// use tonic_hotpath::limits::{Limits, Rate, RedisBackend, TenantLimitLayer};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let backend = RedisBackend::connect("redis://127.0.0.1:6379/").await?;
    /// let layer = TenantLimitLayer::new(Limits::unlimited().with_rate(Rate::new(1000.0, 2000)?))
    ///     .shared(backend);
    /// # drop(layer);
    /// # Ok(())
    /// # }
    /// ```
    pub fn shared(self, backend: RedisBackend) -> Self {
        let shared: Arc<dyn SharedRates> = SharedLimits::new(backend, self.clock().clone());
        self.keep_rates(Keeper::Shared(shared))
    }
}

impl LimitsHandle {
    /// The shared backend's state (feature `limits-redis`): `None` without
    /// one.
    pub fn shared_status(&self) -> Option<RedisBackendStatus> {
        match &self.limiter.config.load().keeper {
            Keeper::Shared(shared) => {
                let shared: &dyn Any = &**shared;
                shared
                    .downcast_ref::<SharedLimits>()
                    .map(|shared| shared.backend().status())
            }
            Keeper::Local => None,
        }
    }
}
