//! The [`StatsHandler`] trait: what a handler observes, and what it asks
//! the layer to do for it.

#[cfg(doc)]
use crate::stats::{CombinedLayer, End, Payload, StatsConnector, StatsIncoming};
use crate::stats::{ConnEvent, ConnInfo, RpcEvent, RpcInfo, ServiceContext};

/// Observes RPCs and connections (grpc-go `stats.Handler`).
///
/// Every method has a no-op default. A handler may keep per-RPC state
/// (created by [`tag_rpc`](Self::tag_rpc), grpc-go's `TagRPC`) and
/// per-connection state (created by [`tag_conn`](Self::tag_conn)); both are
/// stored inline by the layer, so they cost no heap allocation of their own.
/// Handlers are called synchronously on the RPC's hot path: keep them short.
///
/// A handler that times each method, with the method name as its per-RPC
/// state and the peer's address remembered per connection:
///
/// ```
/// use std::net::SocketAddr;
/// use std::time::Duration;
///
/// use tonic_hotpath::stats::{CombinedLayer, ConnInfo, RpcEvent, RpcInfo, StatsHandler};
///
/// #[derive(Debug)]
/// struct Latency;
///
/// impl StatsHandler for Latency {
///     type RpcState = String;
///     type ConnState = Option<SocketAddr>;
///     // Only `Begin`/`End` times are read: skip the payload clock reads.
///     const PAYLOAD_TIMES: bool = false;
///
///     fn tag_conn(&self, info: &ConnInfo) -> Option<SocketAddr> {
///         info.peer_addr
///     }
///
///     fn tag_rpc(&self, info: &RpcInfo<'_>, conn: Option<&Option<SocketAddr>>) -> String {
///         match conn.copied().flatten() {
///             Some(peer) => format!("{} ({peer})", info.method),
///             None => info.method.to_owned(),
///         }
///     }
///
///     fn handle_rpc(&self, method: &mut String, event: &RpcEvent<'_>) {
///         if let RpcEvent::End(end) = event {
///             let took: Duration = end.end_time - end.begin_time;
///             println!("{method}: {:?} in {took:?}", end.code);
///         }
///     }
/// }
///
/// // Registered on a server layer (or a client layer) like any handler.
/// let layer = CombinedLayer::server().with(Latency);
/// # let _ = layer;
/// ```
pub trait StatsHandler: Send + Sync + 'static {
    /// Per-RPC state, created when the RPC begins and passed to every event.
    type RpcState: Default + Send + 'static;
    /// Per-connection state, created when the connection is established.
    type ConnState: Default + Send + Sync + 'static;

    /// Whether this handler reads [`Payload::time`]. Reading the clock is
    /// the largest part of the layer's per-RPC cost (tens of nanoseconds a
    /// read on a VM), so a handler that ignores payload times should say
    /// `const PAYLOAD_TIMES: bool = false;`. When no handler of a layer
    /// wants them, payload events carry `time: None` and cost no clock
    /// read; otherwise every handler sees `Some`. `Begin` and `End` times
    /// are always read.
    const PAYLOAD_TIMES: bool = true;

    /// Whether this handler reads the uncompressed length of compressed
    /// messages ([`Payload::length`] of a message whose `compressed` flag
    /// is set). Measuring it means decompressing the message a second
    /// time beside the receiver's own decoder, as much CPU as that decoding
    /// (see the crate's BENCHMARKS.md), so it is done only when some
    /// handler of the layer asks: say `const UNCOMPRESSED_SIZES: bool =
    /// true;` to ask. When none asks, a compressed message's
    /// [`Payload::length`] is `None` (its compressed and wire lengths are
    /// exact either way), and a compressed message costs the layer what an
    /// uncompressed one does. An uncompressed message's `length` is always
    /// `Some`. Unmeasured, a compressed message that its receiver then
    /// fails to decompress (corrupt, or past its size limit) is still
    /// reported with its compressed length, as it was sent; the RPC's
    /// [`End::code`] is still the status the receiver gave, without the
    /// compression error in [`End::error`].
    ///
    /// The client layer judges the compressed messages it receives whether
    /// or not a handler asks: the status the application sees for a
    /// response tonic cannot decompress is its decoder's verdict, and
    /// [`End::code`] reports that status. Such a message's length is then
    /// known and given as `Some`.
    const UNCOMPRESSED_SIZES: bool = false;

    /// Whether this handler reads the bytes of each message
    /// ([`Payload::data`]), as a binary logger does. When some handler of
    /// the layer asks, every payload event carries the message,
    /// uncompressed: the body's own buffers, shared (no copy), for a
    /// message sent uncompressed (its chunks under 512 bytes copied
    /// together, so that a message trickled in tiny DATA frames costs the
    /// layer its bytes, not a handle and a read buffer per frame);
    /// decompressed for a compressed one, which
    /// costs a decoding of it (as [`UNCOMPRESSED_SIZES`](Self::UNCOMPRESSED_SIZES),
    /// which this implies for the messages it sees). When none asks,
    /// [`Payload::data`] is `None` and the layer keeps no message bytes.
    const MESSAGE_DATA: bool = false;

    /// Whether this RPC's messages should carry their bytes, asked once
    /// per body of each RPC when [`MESSAGE_DATA`](Self::MESSAGE_DATA) is
    /// `true` (never otherwise). The default says yes; a handler that
    /// needs the bytes of some RPCs only (a binary logger, of the calls its
    /// filter selects) says no for the others, and the layer then keeps no
    /// bytes and decompresses nothing for them unless another handler
    /// wants them.
    fn wants_message_data(&self, state: &Self::RpcState) -> bool {
        let _ = state;
        Self::MESSAGE_DATA
    }

    /// Whether this handler observes [`RpcEvent::HalfClose`] (the client
    /// finished sending). Delivered only when some handler of the layer
    /// asks: other handlers do not pay for the extra event.
    const HALF_CLOSE: bool = false;

    /// Creates the per-RPC state. `conn` is this handler's state for the
    /// RPC's connection: on the server when it is served from the layer's
    /// [`StatsIncoming`] (`layer.incoming_tcp(..)`, TCP with or without
    /// TLS, and Unix sockets), on the client when the channel was built
    /// with the layer's [`StatsConnector`] (`layer.connector()`) and a
    /// connection is open as the RPC begins (see
    /// [`CombinedLayer::connector_with`]). A server layer whose handlers'
    /// `ConnState` is zero-sized (carries nothing) does not look the
    /// connection up: `conn` is then `None`.
    ///
    /// On the server, a call accepted on a connection carries it even when
    /// hyper dispatches the call after the connection closed (its
    /// `ConnEnd` then comes first), as under a rapid-reset flood; the layer
    /// keeps its last 256 closed connections findable for that.
    fn tag_rpc(&self, info: &RpcInfo<'_>, conn: Option<&Self::ConnState>) -> Self::RpcState {
        let _ = (info, conn);
        Self::RpcState::default()
    }

    /// Observes one RPC event.
    fn handle_rpc(&self, state: &mut Self::RpcState, event: &RpcEvent<'_>) {
        let _ = (state, event);
    }

    /// Client RPCs only: edits the request headers before they are sent,
    /// e.g. to inject trace propagation headers. Called right after
    /// [`tag_rpc`](Self::tag_rpc), before `Begin`; the `OutHeader` event
    /// then shows the edited headers. With several handlers, each edits in
    /// registration order.
    fn edit_request_headers(&self, state: &mut Self::RpcState, headers: &mut http::HeaderMap) {
        let _ = (state, headers);
    }

    /// Whether [`service_context`](Self::service_context) can return a
    /// context. Leave it `false` (the default) unless it can: the layer
    /// then skips the call and the per-poll context switch at compile
    /// time.
    const SERVICE_CONTEXT: bool = false;

    /// Server RPCs only: the context the inner service runs in, e.g. the
    /// RPC's OpenTelemetry server span (a [`ServiceContext`] is made from
    /// one with `ServiceContext::from_otel`, feature `otel`), so that the
    /// service's own spans and the calls it makes through a client layer
    /// continue the trace. Called once the RPC has begun (after `Begin`);
    /// the context is current while the service is called, while its
    /// future is polled and while the response body is polled (so a
    /// response stream's items are produced in it too). With several
    /// handlers, the first that returns one wins. Only consulted when
    /// [`SERVICE_CONTEXT`](Self::SERVICE_CONTEXT) is `true`. Without the
    /// `otel` feature no [`ServiceContext`] can be made: the answer is
    /// always `None`.
    fn service_context(&self, state: &Self::RpcState) -> Option<ServiceContext> {
        let _ = state;
        None
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

    /// The layer made a layered service with this handler: tonic's server
    /// makes one per `serve` (its clones serve every connection), a client
    /// `ServiceBuilder` one per `.service(channel)`. Paired with
    /// [`service_dropped`](Self::service_dropped).
    fn service_created(&self) {}

    /// A layered service made by the layer, and every clone of it, was
    /// dropped: a server stopped, a client went away. RPCs still running
    /// deliver their remaining events after it. The handler itself may
    /// live on a while (idle per-RPC records on worker threads keep it), so
    /// a handler that must act when its service is gone acts here, not in
    /// `Drop`.
    fn service_dropped(&self) {}
}
