//! The fleet's rate buckets in Redis (feature `limits-redis`): see
//! [`TenantLimitLayer::shared`](super::TenantLimitLayer::shared).

mod backend;
mod breaker;
mod error;
mod lease;
mod policy;
mod requests;
mod script;

pub use backend::{BackendStatus, RedisBackend, RedisBackendBuilder};
pub use error::{RedisBackendError, RedisBackendErrorKind};
pub(crate) use lease::{Lease, NoCredit, Take, ticks};
pub use policy::LeasePolicy;
pub(crate) use requests::{Bucket, SharedLimits};
