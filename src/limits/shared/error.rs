//! [`RedisBackendError`]: why a [`RedisBackend`](super::RedisBackend)
//! could not start.

use std::fmt;

use redis::RedisError;

/// Why [`RedisBackend::connect`](super::RedisBackend::connect) failed. Its
/// text names the address and the cause, never a password.
///
/// ```
/// use tonic_hotpath::limits::{RedisBackend, RedisBackendErrorKind};
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
    /// TLS (`rediss://`) failed: a CA certificate, client certificate or
    /// key that is not valid PEM, a server certificate that is not
    /// trusted (or not for that host), a client certificate the server
    /// demands or refuses.
    Tls,
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
        let described = describe(error);
        let tls = tls_problem(&described);
        let kind = if auth {
            RedisBackendErrorKind::Auth
        } else if tls.is_some() {
            RedisBackendErrorKind::Tls
        } else if matches!(error.kind(), redis::ErrorKind::InvalidClientConfig) {
            RedisBackendErrorKind::InvalidConfig
        } else {
            RedisBackendErrorKind::Unavailable
        };
        let message = match tls {
            Some(problem) => format!("Redis at {address}, {doing}: {problem} ({described})"),
            None => format!("Redis at {address}, {doing}: {described}"),
        };
        Self::new(kind, message)
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

/// What a TLS failure in redis-rs's words (rustls's, through an I/O
/// error) means, if `described` is one.
fn tls_problem(described: &str) -> Option<&'static str> {
    if described.contains("invalid peer certificate") {
        Some(
            "TLS: the server's certificate is not trusted (not signed by a trusted CA, \
             or not valid for this host)",
        )
    } else if described.contains("CertificateRequired") {
        Some("TLS: the server demands a client certificate (`tls_client_certificate`)")
    } else if described.contains("received fatal alert") {
        Some("TLS: the server refused the handshake (a client certificate it does not trust?)")
    } else if described.contains("Unable to build client with TLS parameters") {
        Some("TLS: the client certificate and key are not usable together")
    } else {
        None
    }
}

/// A Redis error in words, without anything the URL carried.
pub(crate) fn describe(error: &RedisError) -> String {
    // redis-rs writes the kind, code and detail: none of them holds the
    // connection's credentials.
    error.to_string()
}

/// `url` with its password replaced by `***`.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or("", |(user, _)| user);
            format!("{scheme}://{user}:***@{host}{path}")
        }
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_shown_without_its_password() {
        assert_eq!(
            redact("redis://limiter:s3cret@host:6379/0"),
            "redis://limiter:***@host:6379/0"
        );
        assert_eq!(redact("redis://:s3cret@host"), "redis://:***@host");
        assert_eq!(redact("redis://host:6379"), "redis://host:6379");
        assert_eq!(redact("not a url"), "not a url");
    }

    #[test]
    fn a_refused_certificate_is_a_tls_error() {
        let io = std::io::Error::other("invalid peer certificate: UnknownIssuer");
        let error = RedisBackendError::from_redis("h:1", "connecting", &RedisError::from(io));
        assert_eq!(error.kind(), RedisBackendErrorKind::Tls);
        assert!(error.to_string().contains("not trusted"), "{error}");
    }
}
