//! [`CombinedLayer`]: one tower layer feeding any number of handlers, on
//! the server (`Server::builder().layer(..)`) or over a client `Channel`.

use std::fmt;

use std::marker::PhantomData;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use tonic::transport::server::TcpConnectInfo;
use tower::{BoxError, Layer, Service};

use super::body::ObservedBody;
use super::future::{ObservedSide, ResponseFuture};
use super::handler_set::HandlerSet;
use super::headers::AcceptedEncodings;
use super::messages::BodyEncoding;
use super::open_service::OpenService;
use super::record_ref::RecordRef;
use super::service_core::ServiceCore;
use super::side::{ClientSide, ClientTransport, ServerSide};
use crate::stats::CallAttempt;
use crate::stats::ConnTag;
#[cfg(doc)]
use crate::stats::End;
use crate::stats::StatsHandler;
use crate::stats::combined::Combined;
use crate::stats::conn::link::{ConnLink, LinkedConn};
use crate::stats::conn::registry::{ConnKey, ConnRegistry, needs_conn_state};
use crate::stats::event::{Direction, RpcInfo, Side};
use crate::stats::frame::FrameDecoder;
use crate::wire::content_type::is_grpc;

/// A tower layer that feeds every registered [`StatsHandler`] from one
/// instrumentation point.
///
/// - `CombinedLayer<(), _>` (no handler) returns the inner service itself:
///   zero cost.
/// - One handler is called directly.
/// - Several handlers ([`with`](Self::with) repeatedly) form a static
///   [`Combined`]: each event is built once and the same reference is handed
///   to each handler in registration order; all per-RPC states live inline
///   in one per-RPC record.
///
/// Per-RPC records are recycled through small per-thread free lists (at
/// most 64 idle records per thread per layered service): once warm, an RPC
/// reuses a record instead of allocating one, and every handler state in
/// it is re-created by [`StatsHandler::tag_rpc`].
/// No lock and no counter shared by all RPCs is on the per-RPC path, so
/// the cost per RPC stays flat as threads are added (the one shared
/// reference count left is the `Arc` a service clone holds: tonic clones
/// the layered service for every request).
///
/// Cloning the layer or its services is one `Arc` clone.
///
/// The side is part of the type: a server layer over a `Channel`, or a
/// client layer on a server, does not compile (see [`ClientTransport`]).
/// Connection events come from the stream or connector the layer builds:
/// [`incoming_tcp`](Self::incoming_tcp) on the server,
/// [`connector`](Self::connector) on the client.
///
/// ```
/// use tonic_hotpath::stats::{CombinedLayer, RpcEvent, StatsHandler};
///
/// #[derive(Debug)]
/// struct Log;
/// impl StatsHandler for Log {
///     type RpcState = ();
///     type ConnState = ();
///     fn handle_rpc(&self, _: &mut (), event: &RpcEvent<'_>) {
///         if let RpcEvent::End(end) = event {
///             println!("rpc ended with {:?}", end.code);
///         }
///     }
/// }
///
/// // Server: tonic::transport::Server::builder().layer(server_layer)
/// let server_layer = CombinedLayer::server().with(Log).with(Log);
/// // Client: tower::ServiceBuilder::new().layer(client_layer).service(channel)
/// let client_layer = CombinedLayer::client().with(Log);
/// # let _ = (server_layer, client_layer);
/// ```
///
/// `H` is `()` (no handler yet) or a [`StatsHandler`] (the
/// [`HandlerSet`]); `K` is [`ServerSide`] or [`ClientSide`].
pub struct CombinedLayer<H: HandlerSet, K> {
    handler: Arc<H>,
    max_message_len: u32,
    // The layer's connections (`LayerConns<H>`), shared by its clones, its
    // services and its connection wrappers; nothing without a handler.
    conns: H::Conns,
    side: PhantomData<fn() -> K>,
}

impl<H: HandlerSet, K> Clone for CombinedLayer<H, K> {
    fn clone(&self) -> Self {
        Self {
            handler: Arc::clone(&self.handler),
            max_message_len: self.max_message_len,
            conns: self.conns.clone(),
            side: PhantomData,
        }
    }
}

impl<H: HandlerSet + fmt::Debug, K> fmt::Debug for CombinedLayer<H, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CombinedLayer")
            .field("handler", &self.handler)
            .field("max_message_len", &self.max_message_len)
            .field("side", &std::any::type_name::<K>())
            .finish()
    }
}

impl CombinedLayer<(), ServerSide> {
    /// A server layer with no handlers yet.
    #[must_use]
    pub fn server() -> Self {
        Self {
            handler: Arc::new(()),
            max_message_len: FrameDecoder::DEFAULT_MAX_MESSAGE_LEN,
            conns: (),
            side: PhantomData,
        }
    }
}

impl CombinedLayer<(), ClientSide> {
    /// A client layer with no handlers yet.
    #[must_use]
    pub fn client() -> Self {
        Self {
            handler: Arc::new(()),
            max_message_len: FrameDecoder::DEFAULT_MAX_MESSAGE_LEN,
            conns: (),
            side: PhantomData,
        }
    }
}

impl<H: HandlerSet, K> CombinedLayer<H, K> {
    /// Reports received messages longer than `limit` bytes as a framing
    /// error in [`End::error`] (and stops decoding that
    /// body's framing; no payload event for it), and compressed ones that
    /// decompress to more than `limit` bytes as a compression error. The
    /// limit applies to the messages this side receives only, as tonic's
    /// does: messages it sends are counted whatever their size. The layer
    /// observes, it does not enforce: tonic's own limits decide what the
    /// application sees.
    ///
    /// The default is tonic's default decoding limit, 4 MiB
    /// ([`FrameDecoder::DEFAULT_MAX_MESSAGE_LEN`](crate::stats::frame::FrameDecoder::DEFAULT_MAX_MESSAGE_LEN)).
    /// Keep the two equal: if you raise tonic's limit
    /// (`max_decoding_message_size` on the generated server or client),
    /// raise this one to match, so that messages tonic accepts are counted
    /// and a client call that tonic fails for a too-long response ends
    /// `OutOfRange` (`ResourceExhausted` decompressed), as its caller saw.
    #[must_use]
    pub fn max_message_len(mut self, limit: u32) -> Self {
        self.max_message_len = limit;
        self
    }
}

impl<K> CombinedLayer<(), K> {
    /// Registers the first handler.
    #[must_use]
    pub fn with<H: StatsHandler>(self, handler: H) -> CombinedLayer<H, K> {
        CombinedLayer::new(Arc::new(handler), self.max_message_len)
    }
}

impl<H: StatsHandler, K> CombinedLayer<H, K> {
    /// A layer of `handler`, with no connection linked yet.
    fn new(handler: Arc<H>, max_message_len: u32) -> Self {
        let conns = LayerConns::<H> {
            link: Arc::new(ConnLink::new()),
            registry: Arc::new(ConnRegistry::new()),
        };
        Self {
            handler,
            max_message_len,
            conns: Arc::new(conns),
            side: PhantomData,
        }
    }

    /// Registers another handler, called after those already registered.
    ///
    /// Build connectors ([`connector`](Self::connector)) from the final
    /// layer: a connector made before `with` is linked to the layer it was
    /// made from, not to the new one.
    #[must_use]
    pub fn with<H2: StatsHandler>(self, handler: H2) -> CombinedLayer<Combined<H, H2>, K> {
        CombinedLayer::new(
            Arc::new(Combined::new(self.handler, handler)),
            self.max_message_len,
        )
    }

    /// The combined handler.
    pub fn handler(&self) -> &Arc<H> {
        &self.handler
    }

    /// The client's connection link, shared by the layer's clones.
    pub(crate) fn link(&self) -> Arc<ConnLink<H>> {
        Arc::clone(&self.conns.link)
    }

    /// The server's registry of accepted connections, shared by the
    /// layer's clones.
    pub(crate) fn registry(&self) -> Arc<ConnRegistry<H>> {
        Arc::clone(&self.conns.registry)
    }

    /// What one layered service shares with its clones and RPCs (the key
    /// of its per-thread free lists of records).
    fn open_service(&self, registry: Option<Arc<ConnRegistry<H>>>) -> Arc<OpenService<H>> {
        Arc::new(OpenService::new(ServiceCore::new(
            Arc::clone(&self.handler),
            self.max_message_len,
            registry,
        )))
    }
}

/// The connections of one layer: the client's current one, the server's
/// open ones. (Public in name only, for the hidden item of the sealed
/// [`HandlerSet`]: this module is private.)
pub struct LayerConns<H: StatsHandler> {
    link: Arc<ConnLink<H>>,
    registry: Arc<ConnRegistry<H>>,
}

impl<H: StatsHandler> fmt::Debug for LayerConns<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LayerConns").finish_non_exhaustive()
    }
}

impl<S> Layer<S> for CombinedLayer<(), ServerSide> {
    type Service = S;

    fn layer(&self, inner: S) -> S {
        inner
    }
}

impl<S: ClientTransport> Layer<S> for CombinedLayer<(), ClientSide> {
    type Service = S;

    fn layer(&self, inner: S) -> S {
        inner
    }
}

impl<S, H: StatsHandler> Layer<S> for CombinedLayer<H, ServerSide> {
    type Service = CombinedService<S, H, ServerSide>;

    fn layer(&self, inner: S) -> Self::Service {
        let registry = needs_conn_state::<H>().then(|| self.registry());
        CombinedService {
            inner,
            service: self.open_service(registry),
            link: None,
            side: PhantomData,
        }
    }
}

impl<S: ClientTransport, H: StatsHandler> Layer<S> for CombinedLayer<H, ClientSide> {
    type Service = CombinedService<S, H, ClientSide>;

    fn layer(&self, inner: S) -> Self::Service {
        CombinedService {
            inner,
            service: self.open_service(None),
            link: Some(LinkedConn::new(self.link())),
            side: PhantomData,
        }
    }
}

/// The service a [`CombinedLayer`] with handlers builds, on the side `K`
/// of its layer.
///
/// - Server ([`CombinedLayer::server`]): the request body reaches the
///   inner service wrapped in an [`ObservedBody`] (no re-boxing); the
///   response body comes back wrapped.
/// - Client ([`CombinedLayer::client`]): the request body is wrapped and
///   re-boxed into `tonic::body::Body` (one allocation per RPC, as a
///   tonic `Channel` accepts only that type); the response body comes
///   back wrapped.
///
/// Cloning it is one `Arc` clone beside the inner service's clone.
pub struct CombinedService<S, H: StatsHandler, K> {
    inner: S,
    service: Arc<OpenService<H>>,
    /// The client's view of the connection the layer's connector opened
    /// last; `None` on the server.
    link: Option<LinkedConn<H>>,
    side: PhantomData<fn() -> K>,
}

impl<S: Clone, H: StatsHandler, K> Clone for CombinedService<S, H, K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            service: Arc::clone(&self.service),
            link: self.link.clone(),
            side: PhantomData,
        }
    }
}

impl<S: fmt::Debug, H: StatsHandler + fmt::Debug, K> fmt::Debug for CombinedService<S, H, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CombinedService")
            .field("inner", &self.inner)
            .field("handler", &self.service.handler)
            .field("max_message_len", &self.service.max_message_len)
            .field("side", &std::any::type_name::<K>())
            .finish()
    }
}

impl<S, H, ReqBody, ResBody> Service<Request<ReqBody>> for CombinedService<S, H, ServerSide>
where
    S: Service<Request<ObservedBody<ReqBody, H>>, Response = Response<ResBody>>,
    S::Error: Into<BoxError>,
    ResBody: http_body::Body,
    H: StatsHandler,
{
    type Response = Response<ObservedBody<ResBody, H>>;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future, H>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    #[inline]
    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        if !is_grpc(request.headers(), false) {
            return ResponseFuture::passthrough(
                self.inner.call(request.map(ObservedBody::passthrough)),
            );
        }
        let (mut parts, body) = request.into_parts();
        let tcp = parts.extensions.get::<TcpConnectInfo>();
        let info = RpcInfo {
            side: Side::Server,
            method: parts.uri.path(),
            authority: parts.uri.authority().map(|authority| authority.as_str()),
            peer_addr: tcp.and_then(|tcp| tcp.remote_addr),
            local_addr: tcp.and_then(|tcp| tcp.local_addr),
            extensions: Some(&parts.extensions),
            attempt: None,
        };
        // The connection this layer's incoming stream accepted the request
        // on, when the handlers keep connection state.
        let conn = match &self.service.registry {
            Some(registry) => {
                ConnKey::of_request(&parts.extensions).and_then(|key| registry.get(&key))
            }
            None => None,
        };
        let (recorder, context) = RecordRef::begin(
            &self.service,
            &info,
            conn.as_ref().map(ConnTag::state),
            &mut parts.headers,
        );
        let encoding = BodyEncoding::of(&parts.headers);
        let body = ObservedBody::new(body, recorder.share(), Direction::Inbound, encoding, false);
        let request = Request::from_parts(parts, body);
        let inner = {
            let _entered = context.enter::<H>();
            self.inner.call(request)
        };
        ResponseFuture::observing(inner, recorder, context, ObservedSide::Server)
    }
}

impl<S, H, ReqBody, ResBody> Service<Request<ReqBody>> for CombinedService<S, H, ClientSide>
where
    S: Service<Request<tonic::body::Body>, Response = Response<ResBody>>,
    S::Error: Into<BoxError>,
    ResBody: http_body::Body,
    ReqBody: http_body::Body<Data = Bytes> + Send + 'static,
    ReqBody::Error: std::error::Error + Send + Sync + 'static,
    H: StatsHandler,
{
    type Response = Response<ObservedBody<ResBody, H>>;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future, H>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        if !is_grpc(request.headers(), false) {
            let request = request.map(tonic::body::Body::new);
            return ResponseFuture::passthrough(self.inner.call(request));
        }
        // The connection the channel is using, when it was made by this
        // layer's connector (see `CombinedLayer::connector_with`).
        let conn = self.link.as_mut().and_then(LinkedConn::get);
        let (mut parts, body) = request.into_parts();
        let info = RpcInfo {
            side: Side::Client,
            method: parts.uri.path(),
            // tonic's channel adds the origin below the layer: the
            // connection's then.
            authority: match parts.uri.authority() {
                Some(authority) => Some(authority.as_str()),
                None => conn.and_then(ConnTag::authority),
            },
            peer_addr: conn.and_then(ConnTag::peer_addr),
            local_addr: conn.and_then(ConnTag::local_addr),
            extensions: None,
            attempt: parts.extensions.get::<CallAttempt>(),
        };
        let (recorder, context) = RecordRef::begin(
            &self.service,
            &info,
            conn.map(ConnTag::state),
            &mut parts.headers,
        );
        let accepted = AcceptedEncodings::of_request(&parts.headers);
        let encoding = BodyEncoding::of(&parts.headers);
        let body = tonic::body::Body::new(ObservedBody::new(
            body,
            recorder.share(),
            Direction::Outbound,
            encoding,
            false,
        ));
        ResponseFuture::observing(
            self.inner.call(Request::from_parts(parts, body)),
            recorder,
            context,
            ObservedSide::Client { accepted },
        )
    }
}
