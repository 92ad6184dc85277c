//! Static composition of handlers: registration order preserved, each
//! event built once and handed by reference to every handler, and every
//! handler's per-RPC state stored inline (no allocation per handler).

use std::sync::Arc;

use http::HeaderMap;

use super::event::{ConnEvent, ConnInfo, RpcEvent, RpcInfo};
#[cfg(doc)]
use crate::stats::CombinedLayer;
use crate::stats::{ServiceContext, StatsHandler};

/// Two handlers combined into one: each event goes to `A`, then to `B`.
///
/// Built by [`CombinedLayer::with`]; nesting
/// (`Combined<Combined<A, B>, C>`) keeps registration order. Per-RPC and
/// per-connection states are tuples of the two handlers' states, stored
/// inline. Name it when a layer's type must be written out, e.g. in a
/// struct field:
///
/// ```
/// use std::sync::Arc;
///
/// use tonic_hotpath::stats::{ClientSide, Combined, CombinedLayer, StatsHandler};
///
/// #[derive(Debug, Default)]
/// struct Metrics;
/// impl StatsHandler for Metrics {
///     type RpcState = ();
///     type ConnState = ();
/// }
///
/// #[derive(Debug, Default)]
/// struct Log;
/// impl StatsHandler for Log {
///     type RpcState = ();
///     type ConnState = ();
/// }
///
/// struct Clients {
///     stats: CombinedLayer<Combined<Arc<Metrics>, Log>, ClientSide>,
/// }
///
/// let clients = Clients {
///     stats: CombinedLayer::client().with(Arc::new(Metrics)).with(Log),
/// };
/// # let _ = clients.stats;
/// ```
#[derive(Debug)]
pub struct Combined<A, B> {
    first: Arc<A>,
    second: B,
}

impl<A, B> Combined<A, B> {
    pub(crate) fn new(first: Arc<A>, second: B) -> Self {
        Self { first, second }
    }
}

impl<A: StatsHandler, B: StatsHandler> StatsHandler for Combined<A, B> {
    type RpcState = (A::RpcState, B::RpcState);
    type ConnState = (A::ConnState, B::ConnState);
    const PAYLOAD_TIMES: bool = A::PAYLOAD_TIMES || B::PAYLOAD_TIMES;
    const UNCOMPRESSED_SIZES: bool = A::UNCOMPRESSED_SIZES || B::UNCOMPRESSED_SIZES;
    const MESSAGE_DATA: bool = A::MESSAGE_DATA || B::MESSAGE_DATA;
    const HALF_CLOSE: bool = A::HALF_CLOSE || B::HALF_CLOSE;

    fn wants_message_data(&self, state: &Self::RpcState) -> bool {
        (A::MESSAGE_DATA && self.first.wants_message_data(&state.0))
            || (B::MESSAGE_DATA && self.second.wants_message_data(&state.1))
    }

    fn tag_rpc(&self, info: &RpcInfo<'_>, conn: Option<&Self::ConnState>) -> Self::RpcState {
        (
            self.first.tag_rpc(info, conn.map(|c| &c.0)),
            self.second.tag_rpc(info, conn.map(|c| &c.1)),
        )
    }

    #[inline]
    fn handle_rpc(&self, state: &mut Self::RpcState, event: &RpcEvent<'_>) {
        self.first.handle_rpc(&mut state.0, event);
        self.second.handle_rpc(&mut state.1, event);
    }

    fn edit_request_headers(&self, state: &mut Self::RpcState, headers: &mut HeaderMap) {
        self.first.edit_request_headers(&mut state.0, headers);
        self.second.edit_request_headers(&mut state.1, headers);
    }

    const SERVICE_CONTEXT: bool = A::SERVICE_CONTEXT || B::SERVICE_CONTEXT;

    fn service_context(&self, state: &Self::RpcState) -> Option<ServiceContext> {
        let first = if A::SERVICE_CONTEXT {
            self.first.service_context(&state.0)
        } else {
            None
        };
        first.or_else(|| {
            if B::SERVICE_CONTEXT {
                self.second.service_context(&state.1)
            } else {
                None
            }
        })
    }

    fn tag_conn(&self, info: &ConnInfo) -> Self::ConnState {
        (self.first.tag_conn(info), self.second.tag_conn(info))
    }

    fn handle_conn(&self, state: &Self::ConnState, event: &ConnEvent) {
        self.first.handle_conn(&state.0, event);
        self.second.handle_conn(&state.1, event);
    }

    fn service_created(&self) {
        self.first.service_created();
        self.second.service_created();
    }

    fn service_dropped(&self) {
        self.first.service_dropped();
        self.second.service_dropped();
    }
}

/// A shared handler is a handler.
impl<H: StatsHandler> StatsHandler for Arc<H> {
    type RpcState = H::RpcState;
    type ConnState = H::ConnState;
    const PAYLOAD_TIMES: bool = H::PAYLOAD_TIMES;
    const UNCOMPRESSED_SIZES: bool = H::UNCOMPRESSED_SIZES;
    const MESSAGE_DATA: bool = H::MESSAGE_DATA;
    const HALF_CLOSE: bool = H::HALF_CLOSE;

    fn tag_rpc(&self, info: &RpcInfo<'_>, conn: Option<&Self::ConnState>) -> Self::RpcState {
        (**self).tag_rpc(info, conn)
    }

    fn wants_message_data(&self, state: &Self::RpcState) -> bool {
        (**self).wants_message_data(state)
    }

    #[inline]
    fn handle_rpc(&self, state: &mut Self::RpcState, event: &RpcEvent<'_>) {
        (**self).handle_rpc(state, event);
    }

    fn edit_request_headers(&self, state: &mut Self::RpcState, headers: &mut HeaderMap) {
        (**self).edit_request_headers(state, headers);
    }

    const SERVICE_CONTEXT: bool = H::SERVICE_CONTEXT;

    fn service_context(&self, state: &Self::RpcState) -> Option<ServiceContext> {
        (**self).service_context(state)
    }

    fn tag_conn(&self, info: &ConnInfo) -> Self::ConnState {
        (**self).tag_conn(info)
    }

    fn handle_conn(&self, state: &Self::ConnState, event: &ConnEvent) {
        (**self).handle_conn(state, event);
    }

    fn service_created(&self) {
        (**self).service_created();
    }

    fn service_dropped(&self) {
        (**self).service_dropped();
    }
}
