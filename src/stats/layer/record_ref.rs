//! A holder's reference to an RPC's record ([`RecordRef`]): the response
//! future and the two body wrappers each hold one; the last to let go
//! returns the record to its service's free list.

use std::ops::Deref;
use std::sync::Arc;

use http::HeaderMap;

use super::context::RpcContext;
use super::idle;
use super::recorder::{RpcEvents, RpcRecorder};
use super::service_core::ServiceCore;
use crate::stats::{RpcInfo, StatsHandler};

/// A holder's reference to an RPC's record (the response future and the
/// two body wrappers each hold one). Events go through [`with`](Self::with);
/// a holder gives its reference up with [`close`](Self::close) or
/// [`release`](Self::release), and the last one returns the record to its
/// layer's free list. (A reference simply dropped frees the record
/// instead, if it was the last.)
///
/// A holder that is the record's only one (in a unary RPC, the response
/// future and body once the request body is gone) reaches it without the
/// lock: `Arc::get_mut` is one atomic operation, the lock and unlock two.
pub(crate) struct RecordRef<H: StatsHandler>(Arc<RpcRecorder<H>>);

impl<H: StatsHandler> RecordRef<H> {
    /// Begins an RPC of the service `core` ([`RpcRecorder::begin`]): the
    /// first holder's reference to its record, and the context the
    /// handlers want the server's inner service to run in.
    pub(crate) fn begin(
        core: &Arc<ServiceCore<H>>,
        info: &RpcInfo<'_>,
        conn: Option<&H::ConnState>,
        request_headers: &mut HeaderMap,
    ) -> (Self, RpcContext) {
        let (record, context) = RpcRecorder::begin(core, info, conn, request_headers);
        (Self(record), context)
    }

    /// A second holder's reference to the same record.
    pub(crate) fn share(&self) -> Self {
        Self(Arc::clone(&self.0))
    }

    /// Runs `f` on the RPC's events: without the lock if this is the only
    /// holder, else under it.
    #[inline]
    pub(crate) fn with<R>(&mut self, f: impl FnOnce(&mut RpcEvents<'_, H>) -> R) -> R {
        match self.unique() {
            Some(record) => f(&mut record.unshared()),
            None => self.0.locked(f),
        }
    }

    /// The record, if this is its only holder. The count is a plain load:
    /// shared records skip `get_mut`'s compare-and-swap.
    #[inline]
    fn unique(&mut self) -> Option<&mut RpcRecorder<H>> {
        if Arc::strong_count(&self.0) == 1 {
            Arc::get_mut(&mut self.0)
        } else {
            None
        }
    }

    /// This holder's last use of the record: runs `f` on the RPC's events,
    /// then gives the reference up; if it was the only one, the record
    /// goes back to the free list (one `get_mut` serves both).
    pub(crate) fn close<R>(mut self, f: impl FnOnce(&mut RpcEvents<'_, H>) -> R) -> R {
        let Some(record) = self.unique() else {
            return self.0.locked(f);
        };
        let out = f(&mut record.unshared());
        record.reset();
        self.recycle();
        out
    }

    /// Gives the reference up without an event (see [`close`](Self::close)).
    pub(crate) fn release(mut self) {
        // Only the unique owner may recycle: no other holder can observe
        // the reset. (Two holders letting go at once may both see a shared
        // record; it is then freed, not recycled.)
        if let Some(record) = self.unique() {
            record.reset();
            self.recycle();
        }
    }

    /// Returns a reset, unshared record to its layer's free list.
    #[inline(never)]
    fn recycle(self) {
        let key = self.0.core().key();
        idle::put(key, self.0);
    }
}

impl<H: StatsHandler> Deref for RecordRef<H> {
    type Target = RpcRecorder<H>;

    fn deref(&self) -> &RpcRecorder<H> {
        &self.0
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
    use crate::stats::layer::ending::Ending;
    use crate::stats::layer::open_service::OpenService;

    struct Noop;

    impl StatsHandler for Noop {
        type RpcState = ();
        type ConnState = ();
    }

    fn shared() -> OpenService<Noop> {
        OpenService::new(ServiceCore::new(Arc::new(Noop), u32::MAX, None))
    }

    fn begin(shared: &Arc<ServiceCore<Noop>>) -> RecordRef<Noop> {
        let info = RpcInfo::new(Side::Server, "/pkg.Service/Method");
        RecordRef::begin(shared, &info, None, &mut HeaderMap::new()).0
    }

    #[test]
    fn only_the_last_holder_returns_the_record_and_the_next_rpc_reuses_it() {
        let shared = shared();
        let first = begin(&shared);
        let second = first.share();
        first.release();
        assert_eq!(shared.idle_len(), 0, "still held: not recycled");
        let address: *const RpcRecorder<Noop> = &*second;
        second.close(|rpc| rpc.end(Ending::Dropped));
        assert_eq!(shared.idle_len(), 1);
        let next = begin(&shared);
        assert_eq!(shared.idle_len(), 0);
        assert!(std::ptr::eq(&*next, address), "the idle record is reused");
    }

    #[test]
    fn the_free_list_is_bounded() {
        let shared = shared();
        let kept = idle::RECORDS_KEPT_PER_THREAD;
        let held: Vec<_> = (0..kept + 10).map(|_| begin(&shared)).collect();
        held.into_iter().for_each(RecordRef::release);
        assert_eq!(shared.idle_len(), kept);
    }

    #[test]
    fn closing_the_pool_frees_idle_and_in_flight_records() {
        let owner = shared();
        let weak = Arc::downgrade(&owner);
        begin(&owner).release();
        assert_eq!(owner.idle_len(), 1);
        let in_flight = begin(&owner);
        drop(owner);
        assert!(weak.upgrade().is_some(), "the RPC in flight holds it");
        in_flight.close(|rpc| rpc.end(Ending::Dropped));
        assert!(weak.upgrade().is_none(), "no cycle left through the list");
    }

    #[test]
    fn records_idle_on_another_thread_are_freed_when_it_serves_a_new_service() {
        let owner = shared();
        let weak = Arc::downgrade(&owner);
        let (to_worker, jobs) = std::sync::mpsc::channel::<Option<RecordRef<Noop>>>();
        let (done, finished) = std::sync::mpsc::channel();
        let worker = std::thread::spawn(move || {
            for job in jobs {
                match job {
                    // Kept idle in the worker's own list.
                    Some(record) => record.release(),
                    // A list for a new service on the worker sweeps closed ones.
                    None => {
                        let other = shared();
                        begin(&other).release();
                    }
                }
                done.send(()).unwrap();
            }
        });
        to_worker.send(Some(begin(&owner))).unwrap();
        finished.recv().unwrap();
        assert_eq!(owner.idle_len(), 0, "idle on the worker, not here");
        drop(owner);
        assert!(
            weak.upgrade().is_some(),
            "the worker's idle record holds it"
        );
        to_worker.send(None).unwrap();
        finished.recv().unwrap();
        assert!(
            weak.upgrade().is_none(),
            "freed when the worker served a new service"
        );
        drop(to_worker);
        worker.join().unwrap();
    }
}
