//! What a layered service shares with all its RPCs: the handler, the
//! message length limit, and a bounded free list of per-RPC records, so a
//! steady stream of RPCs reuses records instead of allocating one each.
//!
//! A record goes back to the list only when the holder dropping it is
//! provably its only owner (`Arc::get_mut`); it is reset first (handler
//! states, status and error dropped), and the next RPC re-creates every
//! handler state with `tag_rpc`. A record in the list holds no reference to
//! the list (no cycle), and the list never grows past [`RECORDS_KEPT`].

use std::ops::Deref;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::StatsHandler;
use super::recorder::RpcRecorder;

/// How many idle records a layered service keeps at most: enough for the
/// RPCs in flight on a busy server to be served from the list, small enough
/// that the memory held is bounded.
pub(crate) const RECORDS_KEPT: usize = 128;

/// Shared by a layered service's clones (one `Arc`) and its RPCs' records.
pub(crate) struct LayerShared<H: StatsHandler> {
    pub(crate) handler: Arc<H>,
    pub(crate) max_message_len: u32,
    idle: Mutex<Vec<Arc<RpcRecorder<H>>>>,
}

impl<H: StatsHandler> LayerShared<H> {
    pub(crate) fn new(handler: Arc<H>, max_message_len: u32) -> Self {
        Self {
            handler,
            max_message_len,
            // Reserved once: returning a record never reallocates.
            idle: Mutex::new(Vec::with_capacity(RECORDS_KEPT)),
        }
    }

    fn idle(&self) -> MutexGuard<'_, Vec<Arc<RpcRecorder<H>>>> {
        // The list holds no invariant a panic could break.
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// An idle record, if the list has one.
    pub(crate) fn take_idle(&self) -> Option<Arc<RpcRecorder<H>>> {
        self.idle().pop()
    }

    /// Keeps an idle (reset, unshared) record unless the list is full.
    fn put_idle(&self, record: Arc<RpcRecorder<H>>) {
        let mut idle = self.idle();
        if idle.len() < RECORDS_KEPT {
            idle.push(record);
        }
    }

    /// How many idle records the list holds (for tests).
    #[cfg(test)]
    pub(crate) fn idle_len(&self) -> usize {
        self.idle().len()
    }
}

impl<H: StatsHandler> std::fmt::Debug for LayerShared<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LayerShared")
            .field("max_message_len", &self.max_message_len)
            .finish_non_exhaustive()
    }
}

/// A holder's reference to an RPC's record (the response future and the
/// two body wrappers each hold one). The last one dropped returns the
/// record to its layer's free list.
pub(crate) struct RecordRef<H: StatsHandler>(Arc<RpcRecorder<H>>);

impl<H: StatsHandler> RecordRef<H> {
    pub(crate) fn new(record: Arc<RpcRecorder<H>>) -> Self {
        Self(record)
    }
}

impl<H: StatsHandler> Clone for RecordRef<H> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<H: StatsHandler> Deref for RecordRef<H> {
    type Target = RpcRecorder<H>;

    fn deref(&self) -> &RpcRecorder<H> {
        &self.0
    }
}

impl<H: StatsHandler> Drop for RecordRef<H> {
    fn drop(&mut self) {
        // Only the unique owner may recycle: no other holder can observe
        // the reset. (Two holders dropping at once may both see a shared
        // record; it is then freed, not recycled.) The count check is a
        // plain load that turns away the other holders before `get_mut`'s
        // compare-and-swap.
        if Arc::strong_count(&self.0) != 1 {
            return;
        }
        let Some(record) = Arc::get_mut(&mut self.0) else {
            return;
        };
        if let Some(shared) = record.release() {
            shared.put_idle(Arc::clone(&self.0));
        }
    }
}

impl<H: StatsHandler> std::fmt::Debug for RecordRef<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderMap;

    use super::*;
    use crate::stats::event::{RpcInfo, Side};

    struct Noop;

    impl StatsHandler for Noop {
        type RpcState = ();
        type ConnState = ();
    }

    fn shared() -> Arc<LayerShared<Noop>> {
        Arc::new(LayerShared::new(Arc::new(Noop), u32::MAX))
    }

    fn begin(shared: &Arc<LayerShared<Noop>>) -> RecordRef<Noop> {
        let info = RpcInfo {
            side: Side::Server,
            method: "/pkg.Service/Method",
            peer_addr: None,
            local_addr: None,
        };
        RpcRecorder::begin(shared, &info, None, &HeaderMap::new())
    }

    #[test]
    fn only_the_last_holder_returns_the_record_and_the_next_rpc_reuses_it() {
        let shared = shared();
        let first = begin(&shared);
        let second = first.clone();
        drop(first);
        assert_eq!(shared.idle_len(), 0, "still held: not recycled");
        let address: *const RpcRecorder<Noop> = &*second;
        second.end_dropped();
        drop(second);
        assert_eq!(shared.idle_len(), 1);
        let next = begin(&shared);
        assert_eq!(shared.idle_len(), 0);
        assert!(std::ptr::eq(&*next, address), "the idle record is reused");
    }

    #[test]
    fn the_free_list_is_bounded() {
        let shared = shared();
        let held: Vec<_> = (0..RECORDS_KEPT + 10).map(|_| begin(&shared)).collect();
        drop(held);
        assert_eq!(shared.idle_len(), RECORDS_KEPT);
    }

    #[test]
    fn idle_records_do_not_keep_the_layer_alive() {
        let shared = shared();
        drop(begin(&shared));
        assert_eq!(shared.idle_len(), 1);
        assert_eq!(Arc::strong_count(&shared), 1, "no cycle through the list");
    }
}
