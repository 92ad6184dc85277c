//! The server's link between a [`CombinedLayer`](super::CombinedLayer) and
//! the connections its [`StatsIncoming`](super::StatsIncoming) accepted.
//!
//! tonic puts a connection's `Connected::ConnectInfo` into every request's
//! extensions, and nothing else of the connection: the layer finds the
//! connection of a request by what that info says. A wrapped connection
//! keeps its IO's own `ConnectInfo` (so handlers and other layers see
//! exactly what tonic gives without the wrapper, `TlsConnectInfo` and
//! `peer_certs()` included) and registers under a key read from it:
//! - TCP (plain or TLS: tonic inserts the inner `TcpConnectInfo` beside
//!   `TlsConnectInfo`): the local and peer addresses, unique among open
//!   connections;
//! - Unix sockets: the identity of the `UdsConnectInfo`'s peer address,
//!   which tonic reads once per connection and clones into each request.
//!
//! Connections come and go rarely and RPCs look up often: the map is split
//! into shards (by key), each behind its own read-write lock, so RPCs of
//! different connections rarely touch the same lock. Only layers whose
//! handlers keep connection state ([`needs_conn_state`]) register or look
//! up anything.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, RandomState};
use std::net::SocketAddr;
use std::sync::{PoisonError, RwLock};

use http::Extensions;
use tonic::transport::server::TcpConnectInfo;

use super::StatsHandler;
use super::conn::ConnTag;

/// How many shards the map is split into.
const SHARDS: usize = 16;

/// What identifies an open connection from its `ConnectInfo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ConnKey {
    /// A TCP connection (plain or TLS): its local and peer addresses.
    Tcp { local: SocketAddr, peer: SocketAddr },
    /// A Unix socket connection: the address of its `UdsConnectInfo`'s
    /// shared peer address (alive while any request holds a clone).
    #[cfg(unix)]
    Unix(usize),
}

impl ConnKey {
    /// The key of a connection whose `ConnectInfo` is `info`, if it has
    /// one (TCP with both addresses known, or a Unix socket whose peer
    /// address could be read).
    pub(crate) fn of(info: &(dyn std::any::Any + 'static)) -> Option<Self> {
        if let Some(tcp) = info.downcast_ref::<TcpConnectInfo>() {
            return Self::tcp(tcp);
        }
        #[cfg(unix)]
        if let Some(uds) = info.downcast_ref::<tonic::transport::server::UdsConnectInfo>() {
            return Self::unix(uds);
        }
        None
    }

    /// The key of the connection a server request arrived on, from the
    /// connection info tonic put into its extensions.
    pub(crate) fn of_request(extensions: &Extensions) -> Option<Self> {
        if let Some(tcp) = extensions.get::<TcpConnectInfo>() {
            return Self::tcp(tcp);
        }
        #[cfg(unix)]
        if let Some(uds) = extensions.get::<tonic::transport::server::UdsConnectInfo>() {
            return Self::unix(uds);
        }
        None
    }

    fn tcp(info: &TcpConnectInfo) -> Option<Self> {
        Some(ConnKey::Tcp {
            local: info.local_addr?,
            peer: info.remote_addr?,
        })
    }

    #[cfg(unix)]
    fn unix(info: &tonic::transport::server::UdsConnectInfo) -> Option<Self> {
        let peer = info.peer_addr.as_ref()?;
        Some(ConnKey::Unix(std::sync::Arc::as_ptr(peer) as usize))
    }
}

/// Whether handlers of type `H` keep per-connection state worth linking
/// RPCs to. A zero-sized state carries nothing, so layers of such
/// handlers skip the registry entirely (their `tag_rpc` gets `None`).
#[inline(always)]
pub(crate) const fn needs_conn_state<H: StatsHandler>() -> bool {
    size_of::<H::ConnState>() != 0
}

/// The open connections of one server layer, by key.
pub(crate) struct ConnRegistry<H: StatsHandler> {
    hasher: RandomState,
    shards: [RwLock<HashMap<ConnKey, ConnTag<H>>>; SHARDS],
}

impl<H: StatsHandler> ConnRegistry<H> {
    pub(crate) fn new() -> Self {
        Self {
            hasher: RandomState::new(),
            shards: std::array::from_fn(|_| RwLock::new(HashMap::new())),
        }
    }

    fn shard(&self, key: &ConnKey) -> &RwLock<HashMap<ConnKey, ConnTag<H>>> {
        // The low bits of a SipHash are as good as any.
        &self.shards[self.hasher.hash_one(key) as usize % SHARDS]
    }

    /// Registers `tag` under `key` (again, if it already is).
    pub(crate) fn insert(&self, key: ConnKey, tag: &ConnTag<H>) {
        let replaced = self
            .shard(&key)
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, tag.clone());
        // A stale entry of a closed connection is released outside the lock.
        drop(replaced);
    }

    /// Unregisters `key` if it still names `tag`'s connection.
    pub(crate) fn remove(&self, key: &ConnKey, tag: &ConnTag<H>) {
        let removed = {
            let mut shard = self
                .shard(key)
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            match shard.get(key) {
                Some(present) if present.same_conn(tag) => shard.remove(key),
                _ => None,
            }
        };
        drop(removed);
    }

    /// The connection registered under `key`.
    pub(crate) fn get(&self, key: &ConnKey) -> Option<ConnTag<H>> {
        self.shard(key)
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .cloned()
    }
}

impl<H: StatsHandler> std::fmt::Debug for ConnRegistry<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnRegistry").finish_non_exhaustive()
    }
}
