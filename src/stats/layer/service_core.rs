//! What a layered service shares with all its RPCs ([`ServiceCore`]): the
//! handler, the message length limit, the server's connection registry,
//! and whether the service is still open. It is the key of the service's
//! per-thread free lists of records ([`idle`](super::idle)).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::idle;
use crate::stats::StatsHandler;
use crate::stats::conn::registry::ConnRegistry;

/// What a layered service shares with its RPCs' records (its clones hold it
/// through one [`OpenService`](super::open_service::OpenService)).
pub(crate) struct ServiceCore<H: StatsHandler> {
    pub(crate) handler: Arc<H>,
    pub(crate) max_message_len: u32,
    /// The server layer's accepted connections, when its handlers keep
    /// connection state.
    pub(crate) registry: Option<Arc<ConnRegistry<H>>>,
    /// Set once the layered service is gone: its records are no longer
    /// kept.
    closed: AtomicBool,
}

impl<H: StatsHandler> ServiceCore<H> {
    pub(crate) fn new(
        handler: Arc<H>,
        max_message_len: u32,
        registry: Option<Arc<ConnRegistry<H>>>,
    ) -> Self {
        Self {
            handler,
            max_message_len,
            registry,
            closed: AtomicBool::new(false),
        }
    }

    /// This service's key in the per-thread free lists.
    pub(crate) fn key(&self) -> usize {
        std::ptr::from_ref(self) as usize
    }

    /// Marks the service closed: its records are freed instead of kept.
    pub(crate) fn mark_closed(&self) {
        self.closed.store(true, Ordering::Release);
    }
}

impl<H: StatsHandler> idle::RecordOwner for ServiceCore<H> {
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

impl<H: StatsHandler> std::fmt::Debug for ServiceCore<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceCore")
            .field("max_message_len", &self.max_message_len)
            .finish_non_exhaustive()
    }
}
