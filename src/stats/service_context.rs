//! [`ServiceContext`]: the context a handler asks a server's inner service
//! to run in, the same type under every feature set.

#[cfg(doc)]
use crate::stats::StatsHandler;

/// The context a [`StatsHandler`] asks a server's inner service to run in
/// ([`StatsHandler::service_context`]): it is current while the service is
/// called, while its future is polled and while its response body is
/// polled (so a response stream's items are produced in it too).
///
/// Opaque. With the `otel` feature it holds an OpenTelemetry context
/// (`opentelemetry::Context`), made with `ServiceContext::from_otel`
/// (e.g. the RPC's server span, as `otel::OtelTracing` gives). Without
/// `otel` no value of it can be made: it is zero-sized, an
/// `Option<ServiceContext>` is always `None`, and the layer's context
/// switching compiles away. The [`StatsHandler`] trait is
/// the same either way, so a handler written without `otel` builds with
/// it.
///
/// A handler that wraps another passes its context on:
///
/// ```
/// use tonic_hotpath::stats::{RpcEvent, RpcInfo, ServiceContext, StatsHandler};
///
/// /// Counts `End` events, and otherwise behaves as the handler it wraps.
/// #[derive(Debug)]
/// struct Counted<H>(H);
///
/// impl<H: StatsHandler> StatsHandler for Counted<H> {
///     type RpcState = H::RpcState;
///     type ConnState = H::ConnState;
///     const PAYLOAD_TIMES: bool = H::PAYLOAD_TIMES;
///     const SERVICE_CONTEXT: bool = H::SERVICE_CONTEXT;
///
///     fn tag_rpc(&self, info: &RpcInfo<'_>, conn: Option<&H::ConnState>) -> H::RpcState {
///         self.0.tag_rpc(info, conn)
///     }
///
///     fn handle_rpc(&self, state: &mut H::RpcState, event: &RpcEvent<'_>) {
///         if let RpcEvent::End(_) = event {
///             // count it
///         }
///         self.0.handle_rpc(state, event);
///     }
///
///     fn service_context(&self, state: &H::RpcState) -> Option<ServiceContext> {
///         self.0.service_context(state)
///     }
/// }
/// ```
#[derive(Clone, Debug)]
pub struct ServiceContext(Inner);

/// What a [`ServiceContext`] holds: an OpenTelemetry context.
#[cfg(feature = "otel")]
type Inner = opentelemetry::Context;
/// What a [`ServiceContext`] holds: nothing can be held without `otel`.
#[cfg(not(feature = "otel"))]
type Inner = Never;

/// Keeps a [`ServiceContext`] current on its thread until dropped.
#[cfg(feature = "otel")]
pub(crate) type Entered = opentelemetry::ContextGuard;
/// Keeps a [`ServiceContext`] current on its thread until dropped (never
/// made without `otel`).
#[cfg(not(feature = "otel"))]
pub(crate) type Entered = Never;

/// A type with no value: a [`ServiceContext`] without `otel`.
#[cfg(not(feature = "otel"))]
#[derive(Clone, Copy, Debug)]
pub(crate) enum Never {}

impl ServiceContext {
    /// The OpenTelemetry context `cx`, for the inner service to run in: a
    /// server RPC's span context, so that the spans the service starts and
    /// the calls it makes through a traced client continue the trace, or
    /// any value the service reads with `Context::current()`.
    ///
    /// A handler that hands each server RPC's method name to the service
    /// through the OpenTelemetry context:
    ///
    /// ```
    /// use opentelemetry::Context;
    /// use tonic_hotpath::stats::{CombinedLayer, RpcInfo, ServiceContext, StatsHandler};
    ///
    /// /// What the service reads: `Context::current().get::<Method>()`.
    /// #[derive(Debug)]
    /// struct Method(String);
    ///
    /// #[derive(Debug)]
    /// struct MethodInContext;
    ///
    /// impl StatsHandler for MethodInContext {
    ///     type RpcState = Option<Context>;
    ///     type ConnState = ();
    ///     const SERVICE_CONTEXT: bool = true;
    ///
    ///     fn tag_rpc(&self, info: &RpcInfo<'_>, _conn: Option<&()>) -> Option<Context> {
    ///         Some(Context::current_with_value(Method(info.method.to_owned())))
    ///     }
    ///
    ///     fn service_context(&self, cx: &Option<Context>) -> Option<ServiceContext> {
    ///         cx.clone().map(ServiceContext::from_otel)
    ///     }
    /// }
    ///
    /// let layer = CombinedLayer::server().with(MethodInContext);
    /// # let _ = layer;
    /// ```
    #[cfg(feature = "otel")]
    #[cfg_attr(docsrs, doc(cfg(feature = "otel")))]
    #[inline]
    pub fn from_otel(cx: opentelemetry::Context) -> Self {
        Self(cx)
    }

    /// Makes the context current on this thread until the result is
    /// dropped.
    #[inline(always)]
    pub(crate) fn enter(&self) -> Entered {
        #[cfg(feature = "otel")]
        {
            self.0.clone().attach()
        }
        #[cfg(not(feature = "otel"))]
        match self.0 {}
    }
}
