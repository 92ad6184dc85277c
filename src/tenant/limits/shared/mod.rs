//! The fleet's rate buckets in Redis (feature `limits-redis`): see
//! [`TenantLimitLayer::shared`](super::TenantLimitLayer::shared).

mod answer;
mod backend;
mod breaker;
mod error;
mod lease;
#[cfg(feature = "otel")]
mod otel;
mod policy;
mod requests;
mod script;

pub(crate) use answer::AnswerWait;
pub use backend::{BackendStatus, RedisBackend, RedisBackendBuilder};
pub use error::{RedisBackendError, RedisBackendErrorKind};
pub(crate) use lease::{CreditLimits, Lease, NoCredit, Take, ticks};
#[cfg(feature = "otel")]
pub use otel::{
    REDIS_FALLBACK_TIME, REDIS_KEY_PREFIX_KEY, REDIS_LEASE_FAILURES, REDIS_LEASE_TIME,
    REDIS_LEASES, REDIS_REPLICAS, REDIS_UP,
};
pub use policy::LeasePolicy;
pub(crate) use requests::{Bucket, SharedLimits};
