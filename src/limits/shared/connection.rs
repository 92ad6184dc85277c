//! The connection to the Redis that holds the fleet's buckets: one server
//! (redis-rs's connection manager) or a Redis Cluster; how it is opened,
//! and how the heartbeat rebuilds it where redis-rs keeps a bad one.
//!
//! redis-rs's connection manager reconnects by itself after an I/O error,
//! but a reconnect that fails otherwise (refused credentials after a
//! password rotation, say) is kept: every later operation gets that same
//! error, even once the credentials are right again. So the connection
//! lives in an [`ArcSwap`], and [`Link::rebuild`] opens a fresh one from
//! the same client (address, credentials, TLS settings) and swaps it in.
//! Only the heartbeat rebuilds, at most once per beat; calls never do.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{FromRedisValue, RedisError, ScriptInvocation};

/// Opening a connection (connect, handshake, credentials, a `PING`; for a
/// cluster, its slots too) may take this many operation timeouts.
pub(super) const OPEN_TIMEOUTS: u32 = 4;

/// An open connection: one server (redis-rs's connection manager, which
/// reconnects by itself after I/O errors) or a Redis Cluster.
#[derive(Clone)]
pub(super) enum Connection {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl Connection {
    pub(super) async fn invoke<T: FromRedisValue>(
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

/// What opens connections: a client holding the address, the credentials
/// and the TLS settings, so a rebuilt connection has them all.
#[derive(Clone)]
pub(super) enum Client {
    Single(Box<redis::Client>),
    Cluster(Box<ClusterClient>),
}

impl Client {
    /// Opens a connection and checks it with a `PING` (which fails on
    /// refused credentials). Not bounded here: callers bound it.
    async fn open(&self, timeout: Duration) -> Result<Connection, RedisError> {
        let connection = match self {
            Self::Single(client) => {
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(timeout))
                    .set_response_timeout(Some(timeout))
                    .set_number_of_retries(1)
                    .set_max_delay(timeout);
                Connection::Single(
                    ConnectionManager::new_with_config((**client).clone(), config).await?,
                )
            }
            Self::Cluster(client) => Connection::Cluster(client.get_async_connection().await?),
        };
        connection.ping().await?;
        Ok(connection)
    }
}

/// The backend's connection, and what it takes to rebuild it.
pub(super) struct Link {
    current: ArcSwap<Connection>,
    client: Client,
    /// The backend's operation timeout.
    timeout: Duration,
    /// An operation failed with an error redis-rs does not recover from
    /// by itself: the next heartbeat rebuilds the connection.
    stale: AtomicBool,
}

impl Link {
    /// Opens the first connection (not bounded here: the caller bounds
    /// it, to [`OPEN_TIMEOUTS`] × `timeout`).
    pub(super) async fn open(client: Client, timeout: Duration) -> Result<Self, RedisError> {
        let connection = client.open(timeout).await?;
        Ok(Self {
            current: ArcSwap::from_pointee(connection),
            client,
            timeout,
            stale: AtomicBool::new(false),
        })
    }

    /// The connection now (shared; cheap to clone).
    pub(super) fn connection(&self) -> Arc<Connection> {
        self.current.load_full()
    }

    /// Runs `call` on the connection now (not bounded here: callers bound
    /// it); an error redis-rs keeps marks the connection for a rebuild.
    pub(super) async fn invoke<T: FromRedisValue>(
        &self,
        call: &ScriptInvocation<'_>,
    ) -> Result<T, RedisError> {
        let result = self.connection().invoke(call).await;
        if let Err(error) = &result
            && !redis_rs_recovers(error)
        {
            self.stale.store(true, Ordering::Relaxed);
        }
        result
    }

    /// Whether an operation failed in a way only a rebuild recovers from.
    pub(super) fn is_stale(&self) -> bool {
        self.stale.load(Ordering::Relaxed)
    }

    /// Opens a fresh connection from the same client, within
    /// [`OPEN_TIMEOUTS`] × the timeout, and puts it in place of the one
    /// now (which is closed once the operations on it have ended). On an
    /// error the connection now stays.
    pub(super) async fn rebuild(&self) -> Result<(), RedisError> {
        let fresh = open_within(&self.client, self.timeout).await?;
        self.current.store(Arc::new(fresh));
        self.stale.store(false, Ordering::Relaxed);
        Ok(())
    }
}

/// [`Client::open`] within [`OPEN_TIMEOUTS`] × `timeout`.
async fn open_within(client: &Client, timeout: Duration) -> Result<Connection, RedisError> {
    let bound = timeout.saturating_mul(OPEN_TIMEOUTS);
    tokio::time::timeout(bound, client.open(timeout))
        .await
        .unwrap_or_else(|_| Err(timed_out(bound)))
}

/// The error of an operation that got no answer within `bound`.
pub(super) fn timed_out(bound: Duration) -> RedisError {
    RedisError::from((
        redis::ErrorKind::Io,
        "timed out",
        format!("no answer within {bound:?}"),
    ))
}

/// Whether redis-rs recovers from `error` by itself: an I/O error (a
/// connection lost, refused or timed out), after which the connection
/// manager and the cluster connection reconnect. Anything else (refused
/// credentials, `NOAUTH`, `WRONGPASS`, `NOPERM`, `READONLY` after a
/// failover, `MASTERDOWN`, `LOADING`, a cluster it cannot route) may be
/// kept, or may last only as long as this connection does.
fn redis_rs_recovers(error: &RedisError) -> bool {
    error.is_io_error()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_io_errors_are_left_to_redis_rs() {
        assert!(redis_rs_recovers(&timed_out(Duration::from_millis(1))));
        let io = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert!(redis_rs_recovers(&io));
        let auth = RedisError::from((redis::ErrorKind::AuthenticationFailed, "refused"));
        assert!(!redis_rs_recovers(&auth));
        let read_only = RedisError::from((
            redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly),
            "read only",
        ));
        assert!(!redis_rs_recovers(&read_only));
    }
}
