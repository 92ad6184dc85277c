//! The OpenTelemetry context a handler asks the server's inner service to
//! run in ([`StatsHandler::otel_context`](crate::stats::StatsHandler)); without
//! the `otel` feature it is zero-sized and entering it does nothing.

use crate::stats::StatsHandler;

/// One RPC's context for the inner service, if a handler gave one.
#[derive(Default)]
pub(crate) struct RpcContext {
    #[cfg(feature = "otel")]
    context: Option<opentelemetry::Context>,
}

/// Keeps the context current until dropped.
#[cfg(feature = "otel")]
pub(crate) type Entered = Option<opentelemetry::ContextGuard>;
/// Keeps the context current until dropped (nothing to keep without the
/// `otel` feature).
#[cfg(not(feature = "otel"))]
pub(crate) struct Entered;

impl RpcContext {
    /// The context `handler` gives for an RPC with `state`.
    #[inline(always)]
    pub(crate) fn of<H: StatsHandler>(handler: &H, state: &H::RpcState) -> Self {
        #[cfg(feature = "otel")]
        {
            Self {
                context: if H::OTEL_CONTEXT {
                    handler.otel_context(state)
                } else {
                    None
                },
            }
        }
        #[cfg(not(feature = "otel"))]
        {
            let _ = (handler, state);
            Self {}
        }
    }

    /// Makes the context current (on this thread) until the result is
    /// dropped; nothing when no handler of `H` can give one.
    #[inline(always)]
    #[must_use]
    #[cfg_attr(not(feature = "otel"), allow(clippy::extra_unused_type_parameters))]
    pub(crate) fn enter<H: StatsHandler>(&self) -> Entered {
        #[cfg(feature = "otel")]
        {
            if H::OTEL_CONTEXT {
                self.context.as_ref().map(|cx| cx.clone().attach())
            } else {
                None
            }
        }
        #[cfg(not(feature = "otel"))]
        Entered
    }
}

impl std::fmt::Debug for RpcContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut debug = f.debug_struct("RpcContext");
        #[cfg(feature = "otel")]
        debug.field("context", &self.context.is_some());
        debug.finish()
    }
}
