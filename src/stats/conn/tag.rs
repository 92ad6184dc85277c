//! A connection's tag ([`ConnTag`]): its handler states and addresses,
//! made when the connection begins (`ConnBegin`) and ended once
//! (`ConnEnd`).

use http::uri::Authority;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

#[cfg(doc)]
use crate::stats::{CombinedLayer, RpcInfo, StatsIo};
use crate::stats::{ConnEvent, ConnInfo, StatsHandler};

/// A connection's handler states and addresses.
///
/// On the server, a [`StatsIo`] keeps its IO's own `Connected::ConnectInfo`
/// (tonic's `TcpConnectInfo`, `TlsConnectInfo`, `UdsConnectInfo`, ...), so
/// handlers and every layer see what tonic gives without the wrapper; the
/// server layer that made the incoming stream
/// ([`CombinedLayer::incoming`](CombinedLayer::incoming)) finds the
/// connection of each request by that info (TCP and Unix sockets; see
/// `registry.rs`) and hands each handler its connection state in
/// [`StatsHandler::tag_rpc`]. A call accepted on a connection gets it also
/// when hyper dispatches the call after the connection ended (`ConnEnd`
/// first, as when h2 gives up on a peer that floods it with resets),
/// unless more than 256 other connections of the layer closed in between.
///
/// On the client, the connection a layer's connector
/// ([`CombinedLayer::connector`](CombinedLayer::connector)) opened
/// last is linked to that layer while it is open: RPCs that begin then get
/// its state in `tag_rpc` and its addresses in [`RpcInfo`](RpcInfo).
pub struct ConnTag<H: StatsHandler> {
    shared: Arc<ConnShared<H>>,
}

struct ConnShared<H: StatsHandler> {
    handler: Arc<H>,
    info: ConnInfo,
    authority: Option<Authority>,
    state: H::ConnState,
}

impl<H: StatsHandler> Clone for ConnTag<H> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<H: StatsHandler> fmt::Debug for ConnTag<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnTag")
            .field("info", &self.shared.info)
            .finish_non_exhaustive()
    }
}

impl<H: StatsHandler> ConnTag<H> {
    pub(super) fn begin(handler: Arc<H>, info: ConnInfo, authority: Option<Authority>) -> Self {
        let state = handler.tag_conn(&info);
        handler.handle_conn(
            &state,
            &ConnEvent::Begin {
                time: Instant::now(),
            },
        );
        Self {
            shared: Arc::new(ConnShared {
                handler,
                info,
                authority,
                state,
            }),
        }
    }

    pub(super) fn end(&self) {
        let shared = &*self.shared;
        shared.handler.handle_conn(
            &shared.state,
            &ConnEvent::End {
                time: Instant::now(),
            },
        );
    }

    /// Whether both tags are of the same connection.
    pub(crate) fn same_conn(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    /// What was known when the connection was tagged.
    pub fn info(&self) -> &ConnInfo {
        &self.shared.info
    }

    /// The peer's address, where known.
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.shared.info.peer_addr
    }

    /// A client connection's authority (`host:port`), as the connector
    /// was asked to dial it: what the channel sends as `:authority` unless
    /// told otherwise.
    pub fn authority(&self) -> Option<&str> {
        self.shared.authority.as_ref().map(Authority::as_str)
    }

    /// The local address, where known.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.shared.info.local_addr
    }

    /// The handlers' connection state.
    pub fn state(&self) -> &H::ConnState {
        &self.shared.state
    }
}
