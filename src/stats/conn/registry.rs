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
//!   connections, and as a rule among recently closed ones (the side
//!   that closed first holds the address pair in `TIME_WAIT`);
//! - Unix sockets: the identity of the `UdsConnectInfo`'s peer address,
//!   which tonic reads once per connection and clones into each request:
//!   alive while the connection or any of its requests is, so unique
//!   while either lives.
//!
//! A call stays linked to its connection when it is dispatched after the
//! connection closed, as grpc-go's `TagRPC` sees the transport's context
//! whenever it runs. That happens: hyper accepts a stream in the
//! connection's task but calls the service (this layer) at the first poll
//! of the stream's own task (hyper's `proto/h2/server.rs` spawns an
//! `H2Stream`; hyper-util's `TowerToHyperService::call` only returns a
//! `Oneshot`), and the connection's task may fail and drop its IO first,
//! e.g. when h2 answers a rapid-reset flood with GOAWAY
//! `ENHANCE_YOUR_CALM`. So a closed connection stays in the map until
//! [`ConnRegistry::CLOSED_KEPT`] later connections of the registry closed
//! (a FIFO); a call dispatched later than that gets `None`. Nothing a
//! peer sends changes the bound.
//!
//! Connections come and go rarely and RPCs look up often: the map is a
//! concurrent hash map whose reads take no lock and write nothing shared
//! (`papaya`), so RPCs on different cores never contend on the lookup;
//! only closing a connection takes the registry's lock (to queue it among
//! the closed). Only layers whose handlers keep connection state
//! ([`needs_conn_state`]) register or look up anything.

use std::collections::VecDeque;
use std::hash::Hash;
use std::net::SocketAddr;
use std::sync::{Mutex, PoisonError};

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

/// The open connections of one server layer, and its last closed ones,
/// by key.
pub(crate) struct ConnRegistry<H: StatsHandler> {
    /// Open connections, and the closed ones in `closed`.
    map: papaya::HashMap<ConnKey, ConnTag<H>>,
    /// The closed connections still in `map`, oldest first: at most
    /// [`CLOSED_KEPT`](Self::CLOSED_KEPT). Allocated at the first close.
    closed: Mutex<VecDeque<(ConnKey, ConnTag<H>)>>,
}

impl<H: StatsHandler> ConnRegistry<H> {
    /// How many closed connections a registry keeps findable for calls
    /// dispatched after their connection closed. A call waits for its
    /// first poll only behind the runtime's queued tasks, so this many
    /// other connections closing in between is a churn far past a
    /// flood's. Each one kept holds its handlers' connection states (with
    /// channelz, its socket's counters) until it is forgotten, so the
    /// bound is also what a layer keeps once connections stop.
    pub(crate) const CLOSED_KEPT: usize = 256;

    pub(crate) fn new() -> Self {
        Self {
            map: papaya::HashMap::builder()
                .resize_mode(papaya::ResizeMode::Blocking)
                .build(),
            closed: Mutex::new(VecDeque::new()),
        }
    }

    /// Registers `tag` under `key` (again, if it already is: the stale
    /// entry of a closed connection is replaced).
    pub(crate) fn insert(&self, key: ConnKey, tag: &ConnTag<H>) {
        self.map.pin().insert(key, tag.clone());
    }

    /// `tag`'s connection, registered under `key`, closed: it stays
    /// findable until [`CLOSED_KEPT`](Self::CLOSED_KEPT) later ones of
    /// this registry closed, then it is removed (unless a newer connection
    /// took its key). A connection that a newer one already replaced
    /// under `key` is not kept: no call can find it.
    pub(crate) fn close(&self, key: ConnKey, tag: &ConnTag<H>) {
        let map = self.map.pin();
        if !map.get(&key).is_some_and(|present| present.same_conn(tag)) {
            return;
        }
        let forgotten = {
            // Only tags are stored, and no handler code runs under the
            // lock: a poisoned lock holds nothing broken.
            let mut closed = self.closed.lock().unwrap_or_else(PoisonError::into_inner);
            // Made room for first: the queue never grows past its bound.
            let forgotten = if closed.len() >= Self::CLOSED_KEPT {
                closed.pop_front()
            } else {
                None
            };
            closed.push_back((key, tag.clone()));
            forgotten
        };
        if let Some((key, tag)) = &forgotten {
            let _ = map.remove_if(key, |_, present| present.same_conn(tag));
        }
        // The forgotten tag (maybe the last handle on its handlers'
        // states) is released outside the lock.
        drop(forgotten);
    }

    /// The connection registered under `key`: open, or among the last
    /// closed.
    pub(crate) fn get(&self, key: &ConnKey) -> Option<ConnTag<H>> {
        self.map.pin().get(key).cloned()
    }
}

impl<H: StatsHandler> std::fmt::Debug for ConnRegistry<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnRegistry").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::sync::Arc;

    use super::{ConnKey, ConnRegistry, ConnTag};
    use crate::stats::{ConnInfo, Side, StatsHandler};

    /// A handler whose connection state is not zero-sized.
    #[derive(Debug)]
    struct Stateful;

    impl StatsHandler for Stateful {
        type RpcState = ();
        type ConnState = u32;
    }

    type Registry = ConnRegistry<Stateful>;

    fn conn(port: u16) -> (ConnKey, ConnTag<Stateful>) {
        let peer = SocketAddr::from(([127, 0, 0, 1], port));
        let local = SocketAddr::from(([127, 0, 0, 1], 50051));
        let info = ConnInfo::new(Side::Server, Some(peer), Some(local));
        let tag = ConnTag::begin(Arc::new(Stateful), info, None);
        (ConnKey::Tcp { local, peer }, tag)
    }

    /// Opens and closes one connection per port in `ports`.
    fn churn(registry: &Registry, ports: std::ops::RangeInclusive<u16>) {
        for port in ports {
            let (key, tag) = conn(port);
            registry.insert(key, &tag);
            registry.close(key, &tag);
        }
    }

    fn finds(registry: &Registry, key: &ConnKey, tag: &ConnTag<Stateful>) -> bool {
        registry.get(key).is_some_and(|found| found.same_conn(tag))
    }

    #[test]
    fn a_closed_connection_stays_findable_until_enough_later_ones_closed() {
        let registry = Registry::new();
        let (key, tag) = conn(1);
        registry.insert(key, &tag);
        registry.close(key, &tag);
        assert!(finds(&registry, &key, &tag), "found once closed");
        churn(&registry, 2..=Registry::CLOSED_KEPT as u16);
        assert!(finds(&registry, &key, &tag), "found while among the kept");
        let (last, last_tag) = conn(Registry::CLOSED_KEPT as u16 + 1);
        registry.insert(last, &last_tag);
        registry.close(last, &last_tag);
        assert!(registry.get(&key).is_none(), "forgotten past the bound");
        assert!(finds(&registry, &last, &last_tag));
        assert_eq!(
            registry.closed.lock().unwrap().len(),
            Registry::CLOSED_KEPT,
            "the queue stays at its bound"
        );
    }

    #[test]
    fn a_newer_connection_under_the_same_key_wins_and_stays() {
        let registry = Registry::new();
        let (key, old) = conn(1);
        registry.insert(key, &old);
        registry.close(key, &old);
        // The key comes back (a Unix socket's reused address, or a TCP
        // address pair out of TIME_WAIT): the new connection replaces the
        // closed one.
        let (_, new) = conn(1);
        registry.insert(key, &new);
        assert!(finds(&registry, &key, &new));
        // Forgetting the old one leaves the new one registered.
        churn(&registry, 2..=Registry::CLOSED_KEPT as u16 + 1);
        assert!(finds(&registry, &key, &new), "the open connection stays");
    }

    #[test]
    fn a_replaced_connection_is_not_kept() {
        let registry = Registry::new();
        let (key, old) = conn(1);
        let (_, new) = conn(1);
        registry.insert(key, &old);
        registry.insert(key, &new);
        registry.close(key, &old);
        assert!(finds(&registry, &key, &new));
        assert!(registry.closed.lock().unwrap().is_empty());
    }

    #[test]
    fn an_unknown_key_is_not_found() {
        let registry = Registry::new();
        let (key, _) = conn(1);
        assert!(registry.get(&key).is_none());
        assert_eq!(
            registry.closed.lock().unwrap().capacity(),
            0,
            "nothing allocated"
        );
    }
}
