//! [`RedisBackendBuilder`]: a [`RedisBackend`]'s settings (nodes,
//! credentials, TLS, key prefix, timeouts, lease policy) and `connect`.

use std::fmt;
use std::time::Duration;

use redis::IntoConnectionInfo;
use redis::cluster::ClusterClientBuilder;

use super::backend::{Backend, RedisBackend};
use super::connection::{Client, Link, OPEN_TIMEOUTS};
use super::error::{RedisBackendError, RedisBackendErrorKind, redact};
use super::policy::LeasePolicy;
#[cfg(feature = "limits-redis-tls")]
use super::tls::TlsSettings;

/// Default timeout of one Redis operation (a lease, a heartbeat, a
/// connection attempt).
const DEFAULT_TIMEOUT: Duration = Duration::from_millis(250);
/// Default interval between two heartbeats.
const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(1);
/// Default key prefix.
const DEFAULT_PREFIX: &str = "tonic-hotpath:limits";
/// The longest wait (ms) before a cluster request's one retry.
const CLUSTER_RETRY_WAIT_MS: u64 = 10;

/// The settings of a [`RedisBackend`], from [`RedisBackend::builder`].
#[must_use = "a builder does nothing until `connect` is awaited"]
pub struct RedisBackendBuilder {
    nodes: Vec<String>,
    cluster: bool,
    username: Option<String>,
    password: Option<String>,
    #[cfg(feature = "limits-redis-tls")]
    tls: TlsSettings,
    prefix: String,
    timeout: Duration,
    heartbeat: Duration,
    policy: LeasePolicy,
}

impl fmt::Debug for RedisBackendBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("RedisBackendBuilder");
        debug
            .field(
                "nodes",
                &self.nodes.iter().map(|url| redact(url)).collect::<Vec<_>>(),
            )
            .field("cluster", &self.cluster)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"));
        #[cfg(feature = "limits-redis-tls")]
        debug.field("tls", &self.tls);
        debug
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("heartbeat", &self.heartbeat)
            .field("policy", &self.policy)
            .finish()
    }
}

impl RedisBackend {
    /// The settings of a backend at `url`, for changes before
    /// [`connect`](RedisBackendBuilder::connect).
    pub fn builder(url: impl Into<String>) -> RedisBackendBuilder {
        RedisBackendBuilder {
            nodes: vec![url.into()],
            cluster: false,
            username: None,
            password: None,
            #[cfg(feature = "limits-redis-tls")]
            tls: TlsSettings::default(),
            prefix: DEFAULT_PREFIX.to_owned(),
            timeout: DEFAULT_TIMEOUT,
            heartbeat: DEFAULT_HEARTBEAT,
            policy: LeasePolicy::default(),
        }
    }
}

impl RedisBackendBuilder {
    /// A Redis Cluster reached through `nodes` (URLs of some of its
    /// primaries; the rest are discovered). Every key the backend writes
    /// is one tenant's bucket, and every script touches one key, so
    /// tenants spread over the cluster's slots.
    pub fn cluster<I>(mut self, nodes: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        self.nodes = nodes.into_iter().map(Into::into).collect();
        self.cluster = true;
        self
    }

    /// Authenticates as `username` (an ACL user; `None` for the default
    /// user, as with `requirepass`) with `password`, instead of any
    /// credentials in the URL.
    pub fn credentials(mut self, username: Option<&str>, password: &str) -> Self {
        self.username = username.map(str::to_owned);
        self.password = Some(password.to_owned());
        self
    }

    /// Trusts the CA certificates in `pem` (one or more PEM
    /// `CERTIFICATE` blocks) for the server's certificate, instead of the
    /// system's roots (feature `limits-redis-tls`; the URLs must be
    /// `rediss://`). A PEM that holds no certificate is an error at
    /// [`connect`](Self::connect).
    ///
    /// ```no_run
    /// use tonic_hotpath::limits::RedisBackend;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let backend = RedisBackend::builder("rediss://limiter:secret@redis.internal:6380/")
    ///     .tls_ca_certificate(std::fs::read("/etc/redis/ca.pem")?)
    ///     .connect()
    ///     .await?;
    /// # drop(backend);
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "limits-redis-tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "limits-redis-tls")))]
    pub fn tls_ca_certificate(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls.ca = Some(pem.into());
        self
    }

    /// Presents the client certificate (chain) in `certificate_pem`, with
    /// its private key in `key_pem` (PKCS#8, PKCS#1 or SEC1), to a Redis
    /// that asks for one (`tls-auth-clients yes`: mutual TLS; feature
    /// `limits-redis-tls`; the URLs must be `rediss://`). The key appears
    /// in no error, log line or `Debug` output.
    ///
    /// ```no_run
    /// use tonic_hotpath::limits::RedisBackend;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let backend = RedisBackend::builder("rediss://redis.internal:6380/")
    ///     .tls_ca_certificate(std::fs::read("/etc/redis/ca.pem")?)
    ///     .tls_client_certificate(
    ///         std::fs::read("/etc/limiter/client.pem")?,
    ///         std::fs::read("/etc/limiter/client.key")?,
    ///     )
    ///     .connect()
    ///     .await?;
    /// # drop(backend);
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "limits-redis-tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "limits-redis-tls")))]
    pub fn tls_client_certificate(
        mut self,
        certificate_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> Self {
        self.tls.client = Some((certificate_pem.into(), key_pem.into()));
        self
    }

    /// Puts every key under `prefix` (default `tonic-hotpath:limits`):
    /// `<prefix>:{<tenant>}:calls`, `<prefix>:{<tenant>}:work` and
    /// `<prefix>:replicas`. Services sharing a Redis use different
    /// prefixes; the replicas of one service use the same. It may not
    /// contain `{` or `}` (Redis Cluster's hash tags) or be empty.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The timeout of each Redis operation and connection attempt
    /// (default 250 ms): how long a lease request may take before it
    /// counts as a failure. (A call waits on an answer at most the lease
    /// policy's `answer_wait`, whatever this timeout.) Opening a
    /// connection (connect, TLS, credentials, a `PING`), at start-up or
    /// when the heartbeat rebuilds it, may take four times this.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The interval between heartbeats (default 1 s). A replica counts as
    /// alive for three intervals after its last heartbeat; while the
    /// backend is down, the heartbeat is also the probe that finds Redis
    /// back (every quarter interval).
    pub fn heartbeat_interval(mut self, interval: Duration) -> Self {
        self.heartbeat = interval;
        self
    }

    /// How leases are sized and how long they last.
    pub fn lease_policy(mut self, policy: LeasePolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Connects, checks the credentials (and, over TLS, the certificates),
    /// sends the first heartbeat, and starts the heartbeat on the current
    /// tokio runtime.
    ///
    /// # Errors
    ///
    /// [`RedisBackendError`]: an invalid URL or key prefix, a refused or
    /// timed-out connection, refused credentials; over TLS, a certificate
    /// or key that is not valid PEM, a server certificate that is not
    /// trusted, a client certificate the server demands or refuses
    /// ([`RedisBackendErrorKind::Tls`]).
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub async fn connect(self) -> Result<RedisBackend, RedisBackendError> {
        if self.prefix.is_empty() || self.prefix.contains(['{', '}']) {
            return Err(invalid(format!(
                "invalid key prefix {:?}: empty, or with `{{` or `}}`",
                self.prefix
            )));
        }
        let mut infos = Vec::with_capacity(self.nodes.len());
        for url in &self.nodes {
            let info = url
                .as_str()
                .into_connection_info()
                .map_err(|error| invalid_url(url, &error))?;
            infos.push(with_credentials(
                info,
                &self.username,
                self.password.as_deref(),
            ));
        }
        let Some(first) = infos.first() else {
            return Err(invalid("no Redis node given".to_owned()));
        };
        let address = first.addr().to_string();
        let client = self.client(infos, &address)?;
        let bound = self.timeout.saturating_mul(OPEN_TIMEOUTS);
        let link = tokio::time::timeout(bound, Link::open(client, self.timeout))
            .await
            .map_err(|_| {
                RedisBackendError::new(
                    RedisBackendErrorKind::Unavailable,
                    format!("no answer from Redis at {address} within {bound:?}"),
                )
            })?
            .map_err(|error| RedisBackendError::from_redis(&address, "connecting", &error))?;
        Backend::start(
            link,
            address,
            self.prefix,
            self.timeout,
            self.heartbeat,
            self.policy,
        )
        .await
    }

    /// The client that opens connections (and rebuilds them), with the
    /// TLS settings.
    fn client(
        &self,
        infos: Vec<redis::ConnectionInfo>,
        address: &str,
    ) -> Result<Client, RedisBackendError> {
        let failed = |error: redis::RedisError| {
            RedisBackendError::from_redis(address, "setting up the client", &error)
        };
        #[cfg(feature = "limits-redis-tls")]
        let certificates = {
            let tls = infos
                .iter()
                .filter(|info| matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. }))
                .count();
            if tls != 0 && tls != infos.len() {
                return Err(invalid(
                    "some nodes are `rediss://` and some are not: all or none use TLS".to_owned(),
                ));
            }
            if tls == 0 && self.tls.is_set() {
                return Err(invalid(
                    "TLS certificates given for a node that is not `rediss://`".to_owned(),
                ));
            }
            if tls != 0 {
                super::tls::ensure_crypto_provider();
            }
            if self.tls.is_set() {
                Some(self.tls.certificates()?)
            } else {
                None
            }
        };
        if self.cluster {
            let builder = ClusterClientBuilder::new(infos)
                .connection_timeout(self.timeout)
                .response_timeout(self.timeout)
                // One retry, as the single-node connection manager has:
                // enough to follow a MOVED or ASK redirect (a slot map
                // that changed, or a connection rebuilt while a node was
                // still refusing its password) to the node that owns the
                // tenant's slot, rather than counting it as Redis down.
                // A wait before that retry (LOADING, TRYAGAIN) stays
                // short: the lease timeout bounds the whole request.
                .retries(1)
                .min_retry_wait(0)
                .max_retry_wait(CLUSTER_RETRY_WAIT_MS);
            #[cfg(feature = "limits-redis-tls")]
            let builder = match certificates {
                Some(certificates) => builder.certs(certificates),
                None => builder,
            };
            return builder
                .build()
                .map(|client| Client::Cluster(Box::new(client)))
                .map_err(failed);
        }
        let info = infos.into_iter().next().expect("one node");
        #[cfg(feature = "limits-redis-tls")]
        if let Some(certificates) = certificates {
            return redis::Client::build_with_tls(info, certificates)
                .map(|client| Client::Single(Box::new(client)))
                .map_err(failed);
        }
        redis::Client::open(info)
            .map(|client| Client::Single(Box::new(client)))
            .map_err(failed)
    }
}

fn invalid(message: String) -> RedisBackendError {
    RedisBackendError::new(RedisBackendErrorKind::InvalidConfig, message)
}

/// A URL redis-rs refused.
fn invalid_url(url: &str, error: &redis::RedisError) -> RedisBackendError {
    let url = redact(url);
    if cfg!(not(feature = "limits-redis-tls")) && url.starts_with("rediss://") {
        return invalid(format!(
            "invalid Redis URL {url}: TLS (`rediss://`) needs the feature `limits-redis-tls`"
        ));
    }
    invalid(format!(
        "invalid Redis URL {url}: {}",
        super::error::describe(error)
    ))
}

/// `info` with the credentials given in code, if any.
fn with_credentials(
    info: redis::ConnectionInfo,
    username: &Option<String>,
    password: Option<&str>,
) -> redis::ConnectionInfo {
    let Some(password) = password else {
        return info;
    };
    let mut settings = info.redis_settings().clone().set_password(password);
    if let Some(username) = username {
        settings = settings.set_username(username);
    }
    info.set_redis_settings(settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bad_settings_are_refused_before_connecting() {
        let error = RedisBackend::builder("redis://:pw@127.0.0.1:1")
            .key_prefix("a{b}")
            .connect()
            .await
            .unwrap_err();
        assert_eq!(error.kind(), RedisBackendErrorKind::InvalidConfig);
        let error = RedisBackend::connect("http://user:s3cret@host/")
            .await
            .unwrap_err();
        assert_eq!(error.kind(), RedisBackendErrorKind::InvalidConfig);
        assert!(!error.to_string().contains("s3cret"), "{error}");
        assert!(!format!("{error:?}").contains("s3cret"), "{error:?}");
    }

    #[cfg(not(feature = "limits-redis-tls"))]
    #[tokio::test]
    async fn tls_without_its_feature_is_refused_naming_the_feature() {
        let error = RedisBackend::connect("rediss://:s3cret@127.0.0.1:1/")
            .await
            .unwrap_err();
        assert_eq!(error.kind(), RedisBackendErrorKind::InvalidConfig);
        assert!(error.to_string().contains("limits-redis-tls"), "{error}");
        assert!(!error.to_string().contains("s3cret"), "{error}");
    }

    #[cfg(feature = "limits-redis-tls")]
    #[tokio::test]
    async fn tls_settings_need_rediss_and_valid_pem() {
        let error = RedisBackend::builder("redis://127.0.0.1:1/")
            .tls_ca_certificate("x")
            .connect()
            .await
            .unwrap_err();
        assert_eq!(error.kind(), RedisBackendErrorKind::InvalidConfig);
        assert!(error.to_string().contains("rediss://"), "{error}");
        let error = RedisBackend::builder("rediss://127.0.0.1:1/")
            .tls_client_certificate("no certificate", "no key")
            .connect()
            .await
            .unwrap_err();
        assert_eq!(error.kind(), RedisBackendErrorKind::Tls);
        assert!(
            error.to_string().contains("the client certificate"),
            "{error}"
        );
    }
}
