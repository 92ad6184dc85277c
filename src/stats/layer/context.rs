//! The context a handler asks the server's inner service to run in
//! ([`StatsHandler::service_context`](crate::stats::StatsHandler)); without
//! the `otel` feature no [`ServiceContext`] can be made, so it is
//! zero-sized and entering it does nothing.

use crate::stats::StatsHandler;
use crate::stats::service_context::{Entered, ServiceContext};

/// One RPC's context for the inner service, if a handler gave one.
#[derive(Default)]
pub(crate) struct RpcContext {
    context: Option<ServiceContext>,
}

// Without `otel` the context adds no byte to the response future and body,
// and entering it keeps nothing.
#[cfg(not(feature = "otel"))]
const _: () = assert!(size_of::<RpcContext>() == 0 && size_of::<Option<Entered>>() == 0);

impl RpcContext {
    /// The context `handler` gives for an RPC with `state`.
    #[inline(always)]
    pub(crate) fn of<H: StatsHandler>(handler: &H, state: &H::RpcState) -> Self {
        Self {
            context: if H::SERVICE_CONTEXT {
                handler.service_context(state)
            } else {
                None
            },
        }
    }

    /// Makes the context current (on this thread) until the result is
    /// dropped; nothing when no handler of `H` can give one.
    #[inline(always)]
    #[must_use]
    pub(crate) fn enter<H: StatsHandler>(&self) -> Option<Entered> {
        if H::SERVICE_CONTEXT {
            self.context.as_ref().map(ServiceContext::enter)
        } else {
            None
        }
    }
}

impl std::fmt::Debug for RpcContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RpcContext")
            .field("context", &self.context.is_some())
            .finish()
    }
}
