//! [`RedisBackend`]: the connection to the Redis (or Valkey) that holds
//! the fleet's buckets, its settings, its health, and the heartbeat that
//! counts the replicas.

use std::fmt;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::{FromRedisValue, IntoConnectionInfo, RedisError, ScriptInvocation};

use super::breaker::Breaker;
use super::error::{RedisBackendError, RedisBackendErrorKind};
use super::policy::LeasePolicy;
use super::script::{LeaseAnswer, LeaseAsk, Scripts};
use crate::tenant::limits::limiter::Limiter;

/// Default timeout of one Redis operation (a lease, a heartbeat, a
/// connection attempt).
const DEFAULT_TIMEOUT: Duration = Duration::from_millis(250);
/// Default interval between two heartbeats.
const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(1);
/// Default key prefix.
const DEFAULT_PREFIX: &str = "tonic-hotpath:limits";

/// The Redis (or Valkey) that holds a fleet's rate buckets, one per tenant
/// and limit, for [`TenantLimitLayer::shared`](crate::tenant::limits::TenantLimitLayer::shared).
///
/// Made by [`connect`](Self::connect) (a URL) or [`builder`](Self::builder)
/// (a cluster, credentials, a key prefix, timeouts, the lease policy);
/// both connect at once, so a bad URL, a refused connection or refused
/// credentials are an error at start-up, not at the first call. Cloning
/// shares the connection.
///
/// While it runs, the backend sends a heartbeat every second (by default)
/// that marks this replica alive and counts the replicas alive: the count
/// the layer divides rates by when Redis is unavailable. Every operation
/// has a timeout; two failures in a row mark the backend down (the layer
/// falls back to the local strategy, and the failure is logged once
/// through `tracing`), and the next heartbeat that succeeds marks it up.
///
/// A password (from the URL or [`credentials`](RedisBackendBuilder::credentials))
/// appears in no error, log line or `Debug` output.
///
/// ```no_run
/// use tonic_hotpath::tenant::limits::{Limits, Rate, RedisBackend, TenantLimitLayer};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let backend = RedisBackend::builder("redis://limiter:secret@redis.internal:6379/")
///     .key_prefix("ingest:limits")
///     .connect()
///     .await?;
/// let layer = TenantLimitLayer::new(Limits::unlimited().with_rate(Rate::new(1000.0, 2000)?))
///     .shared(backend);
/// # drop(layer);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RedisBackend {
    pub(crate) inner: Arc<Backend>,
}

/// What a backend's clones share.
pub(crate) struct Backend {
    connection: Connection,
    scripts: Scripts,
    prefix: String,
    /// The address, without credentials (for `Debug`).
    address: String,
    pub(crate) timeout: Duration,
    heartbeat: Duration,
    pub(crate) policy: LeasePolicy,
    pub(crate) breaker: Breaker,
    /// This replica's id in the heartbeat set.
    replica_id: String,
    /// The replicas alive at the last heartbeat (at least 1).
    replicas: AtomicU32,
    /// The limiters to tell the replica count.
    limiters: Mutex<Vec<Weak<Limiter>>>,
    pub(crate) counts: Counts,
    /// The runtime the background work runs on (the one `connect` ran on).
    pub(crate) runtime: tokio::runtime::Handle,
}

/// Counts of the backend's work, for [`RedisBackend::status`].
#[derive(Debug, Default)]
pub(crate) struct Counts {
    pub(crate) leases: AtomicU64,
    pub(crate) failed_leases: AtomicU64,
    pub(crate) units_leased: AtomicU64,
    pub(crate) heartbeats: AtomicU64,
    pub(crate) lease_nanos: AtomicU64,
}

/// The connection: one server (redis-rs's connection manager, which
/// reconnects by itself) or a Redis Cluster.
#[derive(Clone)]
enum Connection {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl Connection {
    async fn invoke<T: FromRedisValue>(
        &self,
        call: &ScriptInvocation<'_>,
    ) -> Result<T, RedisError> {
        match self {
            Self::Single(manager) => call.invoke_async(&mut manager.clone()).await,
            Self::Cluster(cluster) => call.invoke_async(&mut cluster.clone()).await,
        }
    }

    async fn ping(&self) -> Result<(), RedisError> {
        let ping = redis::cmd("PING");
        match self {
            Self::Single(manager) => manager.clone().req_packed_command(&ping).await.map(drop),
            Self::Cluster(cluster) => cluster.clone().req_packed_command(&ping).await.map(drop),
        }
    }
}

/// The settings of a [`RedisBackend`], from [`RedisBackend::builder`].
#[must_use = "a builder does nothing until `connect` is awaited"]
pub struct RedisBackendBuilder {
    nodes: Vec<String>,
    cluster: bool,
    username: Option<String>,
    password: Option<String>,
    prefix: String,
    timeout: Duration,
    heartbeat: Duration,
    policy: LeasePolicy,
}

impl fmt::Debug for RedisBackendBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisBackendBuilder")
            .field(
                "nodes",
                &self.nodes.iter().map(|url| redact(url)).collect::<Vec<_>>(),
            )
            .field("cluster", &self.cluster)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("heartbeat", &self.heartbeat)
            .field("policy", &self.policy)
            .finish()
    }
}

impl RedisBackend {
    /// Connects to the Redis at `url` (`redis://[user:password@]host:port[/db]`
    /// or `redis+unix:///path`; TLS, `rediss://`, is not supported yet)
    /// with the default settings.
    ///
    /// # Errors
    ///
    /// [`RedisBackendError`]: an invalid URL, a refused or timed-out
    /// connection, refused credentials.
    pub async fn connect(url: &str) -> Result<Self, RedisBackendError> {
        Self::builder(url).connect().await
    }

    /// The settings of a backend at `url`, for changes before
    /// [`connect`](RedisBackendBuilder::connect).
    pub fn builder(url: impl Into<String>) -> RedisBackendBuilder {
        RedisBackendBuilder {
            nodes: vec![url.into()],
            cluster: false,
            username: None,
            password: None,
            prefix: DEFAULT_PREFIX.to_owned(),
            timeout: DEFAULT_TIMEOUT,
            heartbeat: DEFAULT_HEARTBEAT,
            policy: LeasePolicy::default(),
        }
    }

    /// The backend's state now.
    pub fn status(&self) -> RedisBackendStatus {
        let backend = &self.inner;
        let counts = &backend.counts;
        RedisBackendStatus {
            up: backend.breaker.is_up(),
            replicas: backend.replicas(),
            leases: counts.leases.load(Ordering::Relaxed),
            failed_leases: counts.failed_leases.load(Ordering::Relaxed),
            units_leased: counts.units_leased.load(Ordering::Relaxed),
            lease_time: Duration::from_nanos(counts.lease_nanos.load(Ordering::Relaxed)),
            heartbeats: counts.heartbeats.load(Ordering::Relaxed),
            time_down: backend.breaker.time_down(),
        }
    }

    /// The key prefix.
    pub fn key_prefix(&self) -> &str {
        &self.inner.prefix
    }
}

impl fmt::Debug for RedisBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisBackend")
            .field("address", &self.inner.address)
            .field("prefix", &self.inner.prefix)
            .field("status", &self.status())
            .finish_non_exhaustive()
    }
}

/// A [`RedisBackend`]'s state ([`RedisBackend::status`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedisBackendStatus {
    /// Whether the layer uses the fleet's buckets now (false: Redis is
    /// unavailable and the local strategy applies).
    pub up: bool,
    /// The replicas alive at the last heartbeat (at least 1).
    pub replicas: u32,
    /// Lease requests answered.
    pub leases: u64,
    /// Lease requests that failed (timed out, refused, connection lost).
    pub failed_leases: u64,
    /// Units leased (calls and work units).
    pub units_leased: u64,
    /// Time spent waiting on lease answers, in total.
    pub lease_time: Duration,
    /// Heartbeats answered.
    pub heartbeats: u64,
    /// Time spent down (in the fallback), in total.
    pub time_down: Duration,
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
    /// policy's `answer_wait`, whatever this timeout.)
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The interval between heartbeats (default 1 s). A replica counts as
    /// alive for three intervals after its last heartbeat; while the
    /// backend is down, the heartbeat is also the probe that finds Redis
    /// back.
    pub fn heartbeat_interval(mut self, interval: Duration) -> Self {
        self.heartbeat = interval;
        self
    }

    /// How leases are sized and how long they last.
    pub fn lease_policy(mut self, policy: LeasePolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Connects, checks the credentials, sends the first heartbeat, and
    /// starts the heartbeat on the current tokio runtime.
    ///
    /// # Errors
    ///
    /// [`RedisBackendError`]: an invalid URL or key prefix, a refused or
    /// timed-out connection, refused credentials.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub async fn connect(self) -> Result<RedisBackend, RedisBackendError> {
        if self.prefix.is_empty() || self.prefix.contains(['{', '}']) {
            return Err(RedisBackendError::new(
                RedisBackendErrorKind::InvalidConfig,
                format!(
                    "invalid key prefix {:?}: empty, or with `{{` or `}}`",
                    self.prefix
                ),
            ));
        }
        let mut infos = Vec::with_capacity(self.nodes.len());
        for url in &self.nodes {
            let info = url.as_str().into_connection_info().map_err(|error| {
                RedisBackendError::new(
                    RedisBackendErrorKind::InvalidConfig,
                    format!("invalid Redis URL {}: {}", redact(url), describe(&error)),
                )
            })?;
            infos.push(with_credentials(
                info,
                &self.username,
                self.password.as_deref(),
            ));
        }
        let Some(first) = infos.first() else {
            return Err(RedisBackendError::new(
                RedisBackendErrorKind::InvalidConfig,
                "no Redis node given".to_owned(),
            ));
        };
        let address = first.addr().to_string();
        let connection = tokio::time::timeout(self.timeout * 4, open(&self, infos))
            .await
            .map_err(|_| {
                RedisBackendError::new(
                    RedisBackendErrorKind::Unavailable,
                    format!(
                        "no answer from Redis at {address} within {:?}",
                        self.timeout * 4
                    ),
                )
            })??;
        let backend = Arc::new(Backend {
            connection,
            scripts: Scripts::new(),
            prefix: self.prefix,
            address,
            timeout: self.timeout,
            heartbeat: self.heartbeat,
            policy: self.policy,
            breaker: Breaker::new(),
            replica_id: replica_id(),
            replicas: AtomicU32::new(1),
            limiters: Mutex::new(Vec::new()),
            counts: Counts::default(),
            runtime: tokio::runtime::Handle::current(),
        });
        let replicas = backend.heartbeat_once(true).await.map_err(|error| {
            RedisBackendError::from_redis(&backend.address, "the first heartbeat failed", &error)
        })?;
        backend.replicas.store(replicas, Ordering::Relaxed);
        backend.runtime.spawn(heartbeats(Arc::downgrade(&backend)));
        Ok(RedisBackend { inner: backend })
    }
}

/// Opens the connection and checks it with a `PING` (which fails on
/// refused credentials).
async fn open(
    builder: &RedisBackendBuilder,
    infos: Vec<redis::ConnectionInfo>,
) -> Result<Connection, RedisBackendError> {
    let address = infos[0].addr().to_string();
    let failed = |error: RedisError| RedisBackendError::from_redis(&address, "connecting", &error);
    let connection = if builder.cluster {
        let client = ClusterClientBuilder::new(infos)
            .connection_timeout(builder.timeout)
            .response_timeout(builder.timeout)
            .retries(0)
            .build()
            .map_err(failed)?;
        Connection::Cluster(client.get_async_connection().await.map_err(failed)?)
    } else {
        let info = infos.into_iter().next().expect("one node");
        let client = redis::Client::open(info).map_err(failed)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(builder.timeout))
            .set_response_timeout(Some(builder.timeout))
            .set_number_of_retries(1)
            .set_max_delay(builder.timeout);
        Connection::Single(
            ConnectionManager::new_with_config(client, config)
                .await
                .map_err(failed)?,
        )
    };
    connection.ping().await.map_err(failed)?;
    Ok(connection)
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

impl Backend {
    /// The replicas alive at the last heartbeat.
    pub(crate) fn replicas(&self) -> u32 {
        self.replicas.load(Ordering::Relaxed).max(1)
    }

    /// The key of `tenant`'s bucket `kind` (`calls` or `work`): the tenant
    /// in a hash tag, so its buckets share a Redis Cluster slot.
    pub(crate) fn bucket_key(&self, tenant: &str, kind: &str) -> String {
        format!("{}:{{{tenant}}}:{kind}", self.prefix)
    }

    /// Asks for a lease, within the timeout; feeds the breaker.
    pub(crate) async fn lease(&self, key: &str, ask: LeaseAsk) -> Result<LeaseAnswer, ()> {
        let start = std::time::Instant::now();
        let call = self.scripts.lease_call(key, ask);
        let reply =
            tokio::time::timeout(self.timeout, self.connection.invoke::<Vec<i64>>(&call)).await;
        let elapsed = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.counts
            .lease_nanos
            .fetch_add(elapsed, Ordering::Relaxed);
        let answer = match reply {
            Ok(Ok(reply)) => LeaseAnswer::from_reply(&reply).ok_or_else(|| {
                format!("a lease script answered {reply:?}, not four non-negative integers")
            }),
            Ok(Err(error)) => Err(format!("a lease request failed: {}", describe(&error))),
            Err(_) => Err(format!(
                "a lease request timed out after {:?}",
                self.timeout
            )),
        };
        match answer {
            Ok(answer) => {
                self.counts.leases.fetch_add(1, Ordering::Relaxed);
                self.counts
                    .units_leased
                    .fetch_add(answer.granted, Ordering::Relaxed);
                self.breaker.success(&self.address);
                Ok(answer)
            }
            Err(why) => {
                self.counts.failed_leases.fetch_add(1, Ordering::Relaxed);
                self.breaker.failure(&self.address, &why);
                Err(())
            }
        }
    }

    /// One heartbeat (`alive`: false to leave the set): the replicas alive.
    async fn heartbeat_once(&self, alive: bool) -> Result<u32, RedisError> {
        let alive_for = self.heartbeat.saturating_mul(3).as_millis().max(1);
        let mut call = self.scripts.heartbeat.prepare_invoke();
        call.key(format!("{}:replicas", self.prefix))
            .arg(&self.replica_id)
            .arg(u64::try_from(alive_for).unwrap_or(u64::MAX))
            .arg(if alive { "1" } else { "0" });
        let count =
            match tokio::time::timeout(self.timeout, self.connection.invoke::<u32>(&call)).await {
                Ok(reply) => reply?,
                Err(_) => {
                    return Err(RedisError::from((
                        redis::ErrorKind::Io,
                        "timed out",
                        format!("no answer within {:?}", self.timeout),
                    )));
                }
            };
        self.counts.heartbeats.fetch_add(1, Ordering::Relaxed);
        Ok(count.max(1))
    }

    /// Adds a limiter to tell the replica count, and tells it now.
    pub(crate) fn attach(&self, limiter: &Arc<Limiter>) {
        let mut limiters = self
            .limiters
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        limiters.retain(|weak| weak.strong_count() > 0);
        limiters.push(Arc::downgrade(limiter));
        drop(limiters);
        set_replicas(limiter, self.replicas());
    }

    /// Tells every attached limiter the replica count.
    fn tell_replicas(&self, replicas: u32) {
        let previous = self.replicas.swap(replicas, Ordering::Relaxed);
        if previous == replicas {
            return;
        }
        let limiters = self
            .limiters
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        for limiter in limiters.iter().filter_map(Weak::upgrade) {
            set_replicas(&limiter, replicas);
        }
    }
}

fn set_replicas(limiter: &Limiter, replicas: u32) {
    if limiter.config.load().replicas() != replicas {
        limiter.update(|config| config.with_replicas(replicas));
    }
}

/// The heartbeat: every interval while up, every interval ÷ 4 while down
/// (the probe that finds Redis back), until the backend is dropped; then
/// this replica leaves the set.
async fn heartbeats(backend: Weak<Backend>) {
    loop {
        let Some(pause) = backend.upgrade().map(|backend| {
            if backend.breaker.is_up() {
                backend.heartbeat
            } else {
                backend.heartbeat / 4
            }
        }) else {
            return;
        };
        tokio::time::sleep(pause).await;
        let Some(backend) = backend.upgrade() else {
            return;
        };
        match backend.heartbeat_once(true).await {
            Ok(replicas) => {
                backend.breaker.success(&backend.address);
                backend.tell_replicas(replicas);
            }
            Err(error) => backend.breaker.failure(
                &backend.address,
                &format!("a heartbeat failed: {}", describe(&error)),
            ),
        }
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        // Leave the replica set now rather than after three intervals, if
        // the runtime still runs (best effort: the set expires it anyway).
        let connection = self.connection.clone();
        let key = format!("{}:replicas", self.prefix);
        let id = std::mem::take(&mut self.replica_id);
        let script = redis::Script::new("return redis.call('ZREM', KEYS[1], ARGV[1])");
        let timeout = self.timeout;
        // Detached: the task runs on; its handle is not needed.
        drop(self.runtime.spawn(async move {
            let mut call = script.prepare_invoke();
            call.key(key).arg(id);
            let _ = tokio::time::timeout(timeout, connection.invoke::<i64>(&call)).await;
        }));
    }
}

/// A random id for this replica in the heartbeat set.
fn replica_id() -> String {
    use std::hash::BuildHasher;
    let random = std::collections::hash_map::RandomState::new().hash_one(std::process::id());
    format!("{:016x}", random)
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
}
