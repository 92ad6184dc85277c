//! The server's link between a [`CombinedLayer`] and
//! the connections its [`StatsIncoming`] accepted.
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
//! Connections come and go rarely and RPCs look up often: the map is a
//! concurrent hash map whose reads take no lock and write nothing shared
//! (`papaya`), so RPCs on different cores never contend on the lookup. Only layers whose
//! handlers keep connection state ([`needs_conn_state`]) register or look
//! up anything.

use std::hash::Hash;
use std::net::SocketAddr;

use http::Extensions;
use tonic::transport::server::TcpConnectInfo;

use super::tag::ConnTag;
use crate::stats::StatsHandler;

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
    map: papaya::HashMap<ConnKey, ConnTag<H>>,
}

impl<H: StatsHandler> ConnRegistry<H> {
    pub(crate) fn new() -> Self {
        Self {
            map: papaya::HashMap::builder()
                .resize_mode(papaya::ResizeMode::Blocking)
                .build(),
        }
    }

    /// Registers `tag` under `key` (again, if it already is: the stale
    /// entry of a closed connection is replaced).
    pub(crate) fn insert(&self, key: ConnKey, tag: &ConnTag<H>) {
        self.map.pin().insert(key, tag.clone());
    }

    /// Unregisters `key` if it still names `tag`'s connection.
    pub(crate) fn remove(&self, key: &ConnKey, tag: &ConnTag<H>) {
        let _ = self
            .map
            .pin()
            .remove_if(key, |_, present| present.same_conn(tag));
    }

    /// The connection registered under `key`.
    pub(crate) fn get(&self, key: &ConnKey) -> Option<ConnTag<H>> {
        self.map.pin().get(key).cloned()
    }
}

impl<H: StatsHandler> std::fmt::Debug for ConnRegistry<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnRegistry").finish_non_exhaustive()
    }
}
