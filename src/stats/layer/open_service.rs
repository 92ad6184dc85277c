//! A layered service while some clone of it lives ([`OpenService`]), and
//! the per-thread free lists of its per-RPC records
//! ([`idle`](super::idle)), so a steady stream of RPCs reuses records
//! instead of allocating one each, without a lock or a shared counter on
//! the way.
//!
//! A record goes back to a free list only when the holder giving it up is
//! provably its only owner (`Arc::get_mut`); it is reset first (handler
//! states, status and error dropped), and the next RPC re-creates every
//! handler state with `tag_rpc`. A record belongs to one layered service
//! for its whole life and keeps a reference to the service's
//! [`ServiceCore`], also while idle: no reference count changes per RPC.
//! That is a cycle (free list → record → service), broken by
//! [`OpenService`]: when the last clone of the layered service goes away,
//! the service is closed, and its records are freed instead of kept (those
//! idle on other threads when those threads next use their lists, or
//! exit).

use std::ops::Deref;
use std::sync::Arc;

#[cfg(test)]
use super::idle;
use super::recorder::RpcRecorder;
use super::service_core::ServiceCore;
use crate::stats::StatsHandler;

/// Held (through one `Arc`) by every clone of a layered service: when the
/// last one goes away it closes the free list, which breaks the
/// list → record → list cycle.
pub(crate) struct OpenService<H: StatsHandler>(Arc<ServiceCore<H>>);

impl<H: StatsHandler> OpenService<H> {
    /// Opens a layered service on `core` ([`StatsHandler::service_created`]).
    pub(crate) fn new(core: ServiceCore<H>) -> Self {
        core.handler.service_created();
        Self(Arc::new(core))
    }

    /// Empties this thread's free list of this service.
    fn take_all_idle(&self) -> Vec<Arc<RpcRecorder<H>>> {
        std::iter::from_fn(|| RpcRecorder::take_idle(&self.0)).collect()
    }

    /// How many idle records this thread keeps for this service (for
    /// tests).
    #[cfg(test)]
    pub(crate) fn idle_len(&self) -> usize {
        idle::len::<RpcRecorder<H>>(self.0.key())
    }
}

impl<H: StatsHandler> Deref for OpenService<H> {
    type Target = Arc<ServiceCore<H>>;

    fn deref(&self) -> &Arc<ServiceCore<H>> {
        &self.0
    }
}

impl<H: StatsHandler> Drop for OpenService<H> {
    fn drop(&mut self) {
        self.0.mark_closed();
        // This thread's idle records go now.
        drop(self.take_all_idle());
        self.0.handler.service_dropped();
    }
}
