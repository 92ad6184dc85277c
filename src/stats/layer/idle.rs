//! Per-thread free lists of idle per-RPC records.
//!
//! Every RPC takes a record when it begins and gives it back when its last
//! holder lets go. A list shared by all the RPCs of a layer would be a lock
//! (or a contended atomic) on every RPC's path, taken by every core, which
//! is what stops a layer scaling across cores. Instead each thread keeps
//! its own small lists, one per layered service it has served, with no
//! lock and no atomic read-modify-write: a record is taken from the list
//! of the thread the RPC begins on and returned to the list of the thread
//! its last holder drops it on.
//!
//! The lists are type-erased (a thread-local cannot be generic over the
//! handler type) and keyed by the layered service's shared state; the
//! lists of services that have been dropped are emptied the next time
//! their thread makes a list for another service (see
//! [`RecordOwner::is_closed`]), and every list is freed when its thread
//! exits. At most [`RECORDS_KEPT_PER_THREAD`] records are kept per service
//! per thread, so the memory held is bounded.

use std::any::Any;
use std::cell::RefCell;
use std::sync::Arc;

/// How many idle records a thread keeps at most for one layered service:
/// enough for the RPCs one thread has in flight to be served from its
/// list, small enough to bound the memory.
pub(crate) const RECORDS_KEPT_PER_THREAD: usize = 64;

/// The owner of a free list's records: the layered service they belong
/// to, and what the list needs to know of it.
pub(crate) trait RecordOwner: Send + Sync + 'static {
    /// Whether the service is gone (its records are then freed, not kept).
    fn is_closed(&self) -> bool;
}

/// One thread's lists, by service.
struct ThreadLists {
    lists: Vec<Entry>,
}

/// The idle records of one service on this thread.
struct Entry {
    /// The service's shared state (its address): the key.
    key: usize,
    /// A `Vec<Arc<R>>` of the service's record type `R`.
    records: Box<dyn ErasedList>,
}

/// A free list whose record type is erased.
trait ErasedList {
    fn as_any(&mut self) -> &mut dyn Any;
    /// Whether the records belong to a closed service (an empty list is
    /// kept: it holds no service alive).
    fn is_stale(&self) -> bool;
    /// Takes every record out, to be freed outside the thread's lists.
    fn drain(&mut self) -> Vec<Box<dyn Any>>;
}

/// A record that knows its service.
pub(crate) trait Record: Send + Sync + 'static {
    /// The service's shared state.
    type Owner: RecordOwner;
    fn owner(&self) -> &Self::Owner;
}

impl<R: Record> ErasedList for Vec<Arc<R>> {
    fn as_any(&mut self) -> &mut dyn Any {
        self
    }

    fn is_stale(&self) -> bool {
        self.first()
            .is_some_and(|record| record.owner().is_closed())
    }

    fn drain(&mut self) -> Vec<Box<dyn Any>> {
        self.drain(..)
            .map(|record| Box::new(record) as Box<dyn Any>)
            .collect()
    }
}

thread_local! {
    static LISTS: RefCell<ThreadLists> = const { RefCell::new(ThreadLists { lists: Vec::new() }) };
}

impl ThreadLists {
    /// This thread's list for the service at `key`, if it has one.
    #[inline]
    fn get<R: Record>(&mut self, key: usize) -> Option<&mut Vec<Arc<R>>> {
        let entry = self.lists.iter_mut().find(|entry| entry.key == key)?;
        entry.records.as_any().downcast_mut::<Vec<Arc<R>>>()
    }

    /// This thread's list for the service at `key`, made if missing. A
    /// new list is when this thread's lists are swept of the records of
    /// closed services (so a thread that goes on serving new services
    /// frees the records of the old ones; every list goes when the thread
    /// exits); the records swept are returned, to be freed by the caller.
    #[cold]
    fn insert<R: Record>(&mut self, key: usize) -> (&mut Vec<Arc<R>>, Vec<Box<dyn Any>>) {
        let mut swept = Vec::new();
        for entry in &mut self.lists {
            if entry.records.is_stale() {
                swept.extend(entry.records.drain());
            }
        }
        // An empty list of an earlier service at the same address (freed,
        // so its list was empty) is replaced.
        self.lists.retain(|entry| entry.key != key);
        self.lists.push(Entry {
            key,
            records: Box::new(Vec::<Arc<R>>::new()),
        });
        let list = self
            .get(key)
            .expect("the list was just made for this key and type");
        (list, swept)
    }
}

/// An idle record of the service at `key` from this thread's list, if it
/// has one.
#[inline]
pub(crate) fn take<R: Record>(key: usize) -> Option<Arc<R>> {
    LISTS
        .try_with(|lists| lists.try_borrow_mut().ok()?.get::<R>(key)?.pop())
        .ok()
        .flatten()
}

/// Keeps `record` (idle, reset, unshared) in this thread's list for the
/// service at `key`, unless the list is full, the service closed or the
/// thread is exiting; otherwise it is freed (outside the lists, as are
/// records swept from them: freeing one may run a handler's `Drop`).
#[inline]
pub(crate) fn put<R: Record>(key: usize, record: Arc<R>) {
    let mut record = Some(record);
    let mut swept = Vec::new();
    let _ = LISTS.try_with(|lists| {
        let Ok(mut lists) = lists.try_borrow_mut() else {
            return;
        };
        let list = match lists.get::<R>(key) {
            Some(list) => list,
            None => {
                let (list, stale) = lists.insert::<R>(key);
                swept = stale;
                list
            }
        };
        let open = record
            .as_ref()
            .is_some_and(|record| !record.owner().is_closed());
        if open && list.len() < RECORDS_KEPT_PER_THREAD {
            list.extend(record.take());
        }
    });
    drop(record);
    drop(swept);
}

/// How many idle records this thread keeps for the service at `key` (for
/// tests).
#[cfg(test)]
pub(crate) fn len<R: Record>(key: usize) -> usize {
    LISTS.with(|lists| {
        lists
            .borrow_mut()
            .get::<R>(key)
            .map_or(0, |list| list.len())
    })
}
