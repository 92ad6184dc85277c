//! gRPC stats handlers for tonic, fed from one instrumentation point.
//!
//! grpc-go lets several `stats.Handler`s observe every RPC and connection;
//! its PR #8639 stopped allocating each event once per handler by combining
//! them. Here the combination is static: a [`CombinedLayer`] holds any
//! number of [`StatsHandler`]s, builds each [`RpcEvent`] once and hands the
//! same reference to each handler in registration order. All handlers'
//! per-RPC states live inline in one per-RPC allocation, shared by the
//! response future and the body wrappers, so an extra handler costs no
//! allocation.
//!
//! - Server: `Server::builder().layer(CombinedLayer::server().with(h))`.
//! - Client: `ServiceBuilder::new().layer(CombinedLayer::client().with(h)).service(channel)`.
//! - Connections: [`StatsIncoming`] wraps the server's accepted connection
//!   stream, [`StatsConnector`] wraps a client connector; both emit
//!   [`ConnEvent`]s and, on the server, make each connection's handler
//!   states visible to that connection's RPCs ([`StatsHandler::tag_rpc`]).
//!
//! Payload events come from [`frame::FrameDecoder`], which follows gRPC's
//! 5-byte length prefix across any body chunk split. Exactly one
//! [`RpcEvent::End`] is delivered per `Begin`, including when the call is
//! dropped (cancelled), the deadline passes or a body fails; events that
//! would arrive after `End` are not delivered.
//!
//! ```
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use tonic_hotpath::stats::{CombinedLayer, RpcEvent, StatsHandler};
//!
//! /// Counts messages received on every RPC.
//! #[derive(Debug, Default)]
//! struct InMessages(AtomicU64);
//!
//! impl StatsHandler for InMessages {
//!     type RpcState = ();
//!     type ConnState = ();
//!     fn handle_rpc(&self, _: &mut (), event: &RpcEvent<'_>) {
//!         if let RpcEvent::InPayload(_) = event {
//!             self.0.fetch_add(1, Ordering::Relaxed);
//!         }
//!     }
//! }
//!
//! let layer = CombinedLayer::server()
//!     .with(InMessages::default())
//!     .with(InMessages::default());
//! // tonic::transport::Server::builder().layer(layer).add_service(..)
//! # let _ = layer;
//! ```

mod body;
mod combined;
mod conn;
mod event;
pub mod frame;
mod layer;
mod recorder;

pub use body::ObservedBody;
pub use combined::Chain;
pub use conn::{ConnTag, ConnectAddrs, ConnectFuture, StatsConnector, StatsIncoming, StatsIo};
pub use event::{ConnEvent, ConnInfo, Direction, End, Payload, RpcError, RpcEvent, RpcInfo, Side};
pub use layer::{
    BoxError, ClientSide, ClientStats, CombinedLayer, ResponseFuture, ServerSide, ServerStats,
};

/// Observes RPCs and connections (grpc-go `stats.Handler`).
///
/// Every method has a no-op default. A handler may keep per-RPC state
/// (created by [`tag_rpc`](Self::tag_rpc), grpc-go's `TagRPC`) and
/// per-connection state (created by [`tag_conn`](Self::tag_conn)); both are
/// stored inline by the layer, so they cost no heap allocation of their own.
/// Handlers are called synchronously on the RPC's hot path: keep them short.
pub trait StatsHandler: Send + Sync + 'static {
    /// Per-RPC state, created when the RPC begins and passed to every event.
    type RpcState: Default + Send + 'static;
    /// Per-connection state, created when the connection is established.
    type ConnState: Default + Send + Sync + 'static;

    /// Creates the per-RPC state. `conn` is this handler's state for the
    /// RPC's connection when the server's incoming stream is wrapped with
    /// [`StatsIncoming`].
    fn tag_rpc(&self, info: &RpcInfo<'_>, conn: Option<&Self::ConnState>) -> Self::RpcState {
        let _ = (info, conn);
        Self::RpcState::default()
    }

    /// Observes one RPC event.
    fn handle_rpc(&self, state: &mut Self::RpcState, event: &RpcEvent<'_>) {
        let _ = (state, event);
    }

    /// Creates the per-connection state.
    fn tag_conn(&self, info: &ConnInfo) -> Self::ConnState {
        let _ = info;
        Self::ConnState::default()
    }

    /// Observes one connection event.
    fn handle_conn(&self, state: &Self::ConnState, event: &ConnEvent) {
        let _ = (state, event);
    }
}
