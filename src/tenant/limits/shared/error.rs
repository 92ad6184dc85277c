//! [`RedisBackendError`]: why a [`RedisBackend`](super::RedisBackend)
//! could not start.

use std::fmt;

use redis::RedisError;

/// Why [`RedisBackend::connect`](super::RedisBackend::connect) failed. Its
/// text names the address and the cause, never a password.
///
/// ```
/// use tonic_hotpath::tenant::limits::{RedisBackend, RedisBackendErrorKind};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let error = RedisBackend::connect("http://user:secret@host/").await.unwrap_err();
/// assert_eq!(error.kind(), RedisBackendErrorKind::InvalidConfig);
/// assert!(!error.to_string().contains("secret"));
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct RedisBackendError {
    kind: RedisBackendErrorKind,
    message: String,
}

/// The kind of a [`RedisBackendError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RedisBackendErrorKind {
    /// A URL that does not parse, an empty node list, an invalid key prefix.
    InvalidConfig,
    /// Redis refused the credentials (wrong password, unknown user, an
    /// ACL user without the commands the backend needs), or wants some.
    Auth,
    /// No connection: refused, timed out, or lost.
    Unavailable,
}

impl RedisBackendError {
    pub(crate) fn new(kind: RedisBackendErrorKind, message: String) -> Self {
        Self { kind, message }
    }

    /// `error` of the Redis at `address`, while `doing`.
    pub(crate) fn from_redis(address: &str, doing: &str, error: &RedisError) -> Self {
        let auth = matches!(error.kind(), redis::ErrorKind::AuthenticationFailed)
            || matches!(error.code(), Some("NOAUTH" | "WRONGPASS" | "NOPERM"))
            // A script's command refused by the user's ACL (Redis 7 reports
            // it as ERR): the user lacks a command or a key pattern.
            || error
                .detail()
                .is_some_and(|detail| detail.contains("user executing the script can't"));
        let kind = if auth {
            RedisBackendErrorKind::Auth
        } else if matches!(error.kind(), redis::ErrorKind::InvalidClientConfig) {
            RedisBackendErrorKind::InvalidConfig
        } else {
            RedisBackendErrorKind::Unavailable
        };
        Self::new(
            kind,
            format!(
                "Redis at {address}, {doing}: {}",
                super::backend::describe(error)
            ),
        )
    }

    /// What went wrong.
    pub fn kind(&self) -> RedisBackendErrorKind {
        self.kind
    }
}

impl fmt::Display for RedisBackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tenant limits backend: {}", self.message)
    }
}

impl std::error::Error for RedisBackendError {}
