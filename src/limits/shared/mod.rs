//! The fleet's rate buckets in Redis (feature `limits-redis`): see
//! [`TenantLimitLayer::shared`](super::TenantLimitLayer::shared).
//!
//! A leaf: the limiter's shared rate keeper (`rates.rs`, the seam's
//! `SharedRates`); it imports the seam and the types below it (state,
//! rates, clock), and nothing in the limiter imports it (the layer's
//! `shared` and the handle's `shared_status` plug it in, from
//! `limits/fleet.rs`).

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
mod rates;
mod requests;
mod script;
mod share;
mod tenant;
mod tick;
#[cfg(feature = "limits-redis-tls")]
mod tls;

pub use backend::{RedisBackend, RedisBackendStatus};
pub use builder::RedisBackendBuilder;
pub use error::{RedisBackendError, RedisBackendErrorKind};
pub use policy::LeasePolicy;
pub(crate) use requests::SharedLimits;
