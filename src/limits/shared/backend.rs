//! [`RedisBackend`]: the backend the layer's shared limits use (its
//! connection, settings and health), the lease requests, and the
//! heartbeat that counts the replicas and finds Redis back.

use std::fmt;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use redis::RedisError;

use super::breaker::Breaker;
use super::connection::{Link, timed_out};
use super::error::{RedisBackendError, describe};
use super::policy::LeasePolicy;
use super::script::{LeaseAnswer, LeaseAsk, Scripts};
use crate::limits::keeper::ReplicaCount;

/// The Redis (or Valkey) that holds a fleet's rate buckets, one per tenant
/// and limit, for [`TenantLimitLayer::shared`](crate::limits::TenantLimitLayer::shared).
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
/// has a timeout; two failures in a row mark the backend down (each
/// replica falls back to its recent share of each tenant's fleet traffic,
/// or `rate ÷ replicas` without one, and the failure is logged once
/// through `tracing`), and the next heartbeat that succeeds marks it up
/// (logged once too), whatever made Redis unavailable.
///
/// Unavailable means any failure while it lasts: a lost, refused or
/// timed-out connection; refused credentials (`NOAUTH`, `WRONGPASS`, a
/// password rotated), an ACL user without the keys or commands it needs
/// (`NOPERM`); a failover (`READONLY`, `MASTERDOWN`, `LOADING`). redis-rs
/// reconnects by itself only after I/O errors and keeps a connection
/// whose reconnect was refused, so while the backend is down, or after an
/// error redis-rs does not recover from, the heartbeat opens a fresh
/// connection (with the same address, credentials and TLS settings, at
/// most one per heartbeat, bounded by four times the
/// [`timeout`](super::RedisBackendBuilder::timeout)) and sends its heartbeat
/// through it. Calls never wait on that: with the default settings the
/// shared buckets are back in use within a heartbeat interval (the probe
/// runs every quarter interval while down) and the time to connect once
/// the cause is gone, without a restart.
///
/// Over TLS (`rediss://`, feature `limits-redis-tls`) it trusts the
/// system's roots or a given CA (`RedisBackendBuilder::tls_ca_certificate`),
/// and presents a client certificate where one is given
/// (`RedisBackendBuilder::tls_client_certificate`).
/// TLS is redis-rs's own (rustls); where the application has installed no
/// rustls crypto provider for the process, connecting installs rustls's
/// ring provider.
///
/// A password (from the URL or [`credentials`](super::RedisBackendBuilder::credentials))
/// or a client key appears in no error, log line or `Debug` output.
///
/// ```no_run
/// use tonic_hotpath::limits::{Limits, Rate, RedisBackend, TenantLimitLayer};
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
    link: Link,
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
    limiters: Mutex<Vec<ReplicaCount>>,
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

impl RedisBackend {
    /// Connects to the Redis at `url` (`redis://[user:password@]host:port[/db]`,
    /// `redis+unix:///path`, or with the feature `limits-redis-tls`
    /// `rediss://…`, trusting the system's roots) with the default
    /// settings.
    ///
    /// # Errors
    ///
    /// [`RedisBackendError`]: an invalid URL, a refused or timed-out
    /// connection, refused credentials, a server certificate that is not
    /// trusted.
    pub async fn connect(url: &str) -> Result<Self, RedisBackendError> {
        Self::builder(url).connect().await
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

impl Backend {
    /// A backend on `link`: sends the first heartbeat, then starts the
    /// heartbeat on the current runtime.
    pub(super) async fn start(
        link: Link,
        address: String,
        prefix: String,
        timeout: Duration,
        heartbeat: Duration,
        policy: LeasePolicy,
    ) -> Result<RedisBackend, RedisBackendError> {
        let backend = Arc::new(Self {
            link,
            scripts: Scripts::new(),
            prefix,
            address,
            timeout,
            heartbeat,
            policy,
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
        let reply = tokio::time::timeout(self.timeout, self.link.invoke::<Vec<i64>>(&call)).await;
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
        let count = tokio::time::timeout(self.timeout, self.link.invoke::<u32>(&call))
            .await
            .unwrap_or_else(|_| Err(timed_out(self.timeout)))?;
        self.counts.heartbeats.fetch_add(1, Ordering::Relaxed);
        Ok(count.max(1))
    }

    /// Adds a limiter to tell the replica count, and tells it now.
    pub(crate) fn attach(&self, limiter: ReplicaCount) {
        limiter(self.replicas());
        let mut limiters = self
            .limiters
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        limiters.push(limiter);
    }

    /// Tells every attached limiter the replica count (forgetting those
    /// gone).
    fn tell_replicas(&self, replicas: u32) {
        let previous = self.replicas.swap(replicas, Ordering::Relaxed);
        if previous == replicas {
            return;
        }
        self.limiters
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .retain(|limiter| limiter(replicas));
    }
}

impl Backend {
    /// One heartbeat of the background loop: through a fresh connection
    /// while down, or after an error redis-rs keeps (at most one rebuild
    /// per heartbeat); through the connection now otherwise.
    async fn beat(&self) -> Result<u32, RedisError> {
        // A failed rebuild is this heartbeat's failure: the breaker logs
        // the outage once, not each attempt.
        if !self.breaker.is_up() || self.link.is_stale() {
            self.link.rebuild().await?;
        }
        self.heartbeat_once(true).await
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
        match backend.beat().await {
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
        let connection = self.link.connection();
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
