//! The fleet's rate buckets in Redis (feature `limits-redis`): see
//! [`TenantLimitLayer::shared`](super::TenantLimitLayer::shared).

mod answer;
mod backend;
mod breaker;
mod builder;
mod connection;
mod error;
mod lease;
#[cfg(feature = "otel")]
mod otel;
mod policy;
mod requests;
mod script;
mod share;
#[cfg(feature = "limits-redis-tls")]
mod tls;

pub(crate) use answer::AnswerWait;
pub use backend::{RedisBackend, RedisBackendStatus};
pub use builder::RedisBackendBuilder;
pub use error::{RedisBackendError, RedisBackendErrorKind};
pub(crate) use lease::{CreditLimits, Lease, NoCredit, Take, ticks};
pub use policy::LeasePolicy;
pub(crate) use requests::{Bucket, SharedLimits};
