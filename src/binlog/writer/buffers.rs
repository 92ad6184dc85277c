//! Each thread's buffer of framed entries, and the queue of whole
//! buffers they are handed to the writer thread in.
//!
//! An RPC encodes its entries into its thread's own buffer (a lock only
//! that thread and, now and then, the writer take). A buffer is handed on
//! when it reaches half its thread's share ([`Buffers::append`]) or when
//! the writer sweeps the threads' buffers ([`Buffers::sweep`], every
//! millisecond while entries come). Every hand-over pushes the buffer
//! onto one queue while holding the buffer's lock, so the queue's order
//! is the order buffers were taken. A call's entries stay in order: when
//! a call moves to another thread, the buffer holding its earlier entries
//! is handed on first ([`CallMark`]), so it is queued before any buffer
//! that can hold the call's next entry.
//!
//! Memory is bounded: the queue holds at most `max_queued_bytes` (or one
//! buffer, whatever its size), a thread's buffer at most its share (plus
//! the entry that crossed it); an entry that finds its thread's buffer
//! full is dropped and counted.

use std::collections::VecDeque;
use std::io;
use std::mem;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::Thread;

use thread_local::ThreadLocal;

use crate::binlog::sink::Framing;
use crate::stats::ShardedCounter;

/// A thread's buffer holds at most this much while the queue has no room.
const MAX_THREAD_BYTES: usize = 128 * 1024;

/// Framed entries handed to the writer together.
#[derive(Debug)]
pub(super) struct Batch {
    pub(super) bytes: Vec<u8>,
    pub(super) entries: u64,
}

/// Where a call's last entry went: the buffer and its hand-over count
/// then. Kept in the call's state.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct CallMark {
    /// The address of the thread's [`Slot`]; 0 before the first entry.
    slot: usize,
    generation: u64,
}

/// One thread's buffer.
#[derive(Debug, Default)]
struct Slot {
    pending: Mutex<Pending>,
    /// How many times the buffer was handed on (changed under the lock).
    generation: AtomicU64,
}

#[derive(Debug, Default)]
struct Pending {
    bytes: Vec<u8>,
    entries: u64,
}

impl Slot {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The threads' buffers and the queue, shared by the log's handles and
/// its writer thread.
#[derive(Debug)]
pub(super) struct Buffers {
    slots: ThreadLocal<Slot>,
    queue: Mutex<VecDeque<Batch>>,
    /// The bytes in `queue` and being written.
    queued_bytes: AtomicUsize,
    max_queued_bytes: usize,
    /// A thread's buffer is handed on at this size.
    hand_over_at: usize,
    /// A thread's buffer takes no entry past this size.
    max_thread_bytes: usize,
    framing: Framing,
    /// Set by shutdown: entries are dropped without being encoded.
    pub(super) closed: AtomicBool,
    pub(super) dropped: ShardedCounter,
    /// Entries that could not be framed (4 GiB or more, gRPC framing).
    pub(super) unframed: ShardedCounter,
    /// The writer found nothing to do and waits: the next entry into an
    /// empty buffer wakes it.
    writer_idle: AtomicBool,
    writer: OnceLock<Thread>,
}

impl Buffers {
    pub(super) fn new(framing: Framing, max_queued_bytes: usize) -> Self {
        let max_thread_bytes = MAX_THREAD_BYTES.min(max_queued_bytes).max(1);
        Self {
            slots: ThreadLocal::new(),
            queue: Mutex::new(VecDeque::new()),
            queued_bytes: AtomicUsize::new(0),
            max_queued_bytes,
            hand_over_at: max_thread_bytes.div_ceil(2),
            max_thread_bytes,
            framing,
            closed: AtomicBool::new(false),
            dropped: ShardedCounter::new(),
            unframed: ShardedCounter::new(),
            writer_idle: AtomicBool::new(false),
            writer: OnceLock::new(),
        }
    }

    /// The framing of the entries in the buffers.
    pub(super) fn framing(&self) -> Framing {
        self.framing
    }

    /// Appends one framed entry, written by `encode` (which appends it to
    /// the buffer it is given, or returns an error and appends nothing),
    /// to this thread's buffer. Never blocks on the writer; drops and
    /// counts the entry when the log is closed or the buffer is full.
    pub(super) fn append(
        &self,
        mark: &mut CallMark,
        encode: impl FnOnce(&mut Vec<u8>) -> io::Result<()>,
    ) {
        if self.closed.load(Ordering::Acquire) {
            self.dropped.add(1);
            return;
        }
        let slot = self.slots.get_or_default();
        let here = ptr::from_ref(slot) as usize;
        if mark.slot != here && mark.slot != 0 {
            self.hand_over_elsewhere(*mark);
        }
        let mut pending = slot.lock();
        if pending.bytes.len() >= self.max_thread_bytes {
            drop(pending);
            self.dropped.add(1);
            return;
        }
        let start = pending.bytes.len();
        if encode(&mut pending.bytes).is_err() {
            pending.bytes.truncate(start);
            drop(pending);
            self.unframed.add(1);
            return;
        }
        pending.entries += 1;
        let first = pending.entries == 1;
        *mark = CallMark {
            slot: here,
            generation: slot.generation.load(Ordering::Relaxed),
        };
        if pending.bytes.len() >= self.hand_over_at && self.has_room(pending.bytes.len()) {
            self.hand_over(slot, &mut pending);
            drop(pending);
            self.wake_writer();
        } else if first {
            drop(pending);
            if self.writer_idle.load(Ordering::SeqCst) {
                self.wake_writer();
            }
        }
    }

    /// Hands on the buffer that holds a call's earlier entries, at
    /// `mark`, unless it was handed on since.
    #[cold]
    fn hand_over_elsewhere(&self, mark: CallMark) {
        let Some(slot) = self
            .slots
            .iter()
            .find(|slot| ptr::from_ref(*slot) as usize == mark.slot)
        else {
            return;
        };
        if slot.generation.load(Ordering::Acquire) != mark.generation {
            return;
        }
        let mut pending = slot.lock();
        if slot.generation.load(Ordering::Relaxed) == mark.generation && pending.entries > 0 {
            // Past the budget if need be: the order of a call's entries
            // comes first (a thread's share bounds it).
            self.hand_over(slot, &mut pending);
            drop(pending);
            self.wake_writer();
        }
    }

    /// Whether the queue takes a buffer of `len` bytes: within the
    /// budget, or any buffer when it is empty.
    fn has_room(&self, len: usize) -> bool {
        let queued = self.queued_bytes.load(Ordering::Relaxed);
        queued == 0 || queued + len <= self.max_queued_bytes
    }

    /// Queues `slot`'s buffer, whose lock the caller holds.
    ///
    /// The buffer is queued before its hand-over count moves on: a thread
    /// that sees the count moved ([`hand_over_elsewhere`](Self::hand_over_elsewhere),
    /// without the lock) knows the call's earlier entries are queued, so
    /// any buffer it queues later is behind them. (Counting first let a
    /// call's next buffer be queued by another thread in between.)
    fn hand_over(&self, slot: &Slot, pending: &mut Pending) {
        let capacity = pending.bytes.len().min(self.hand_over_at);
        let bytes = mem::replace(&mut pending.bytes, Vec::with_capacity(capacity));
        let entries = mem::take(&mut pending.entries);
        self.queued_bytes.fetch_add(bytes.len(), Ordering::Relaxed);
        self.queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back(Batch { bytes, entries });
        slot.generation.fetch_add(1, Ordering::Release);
    }

    /// Hands on every thread's buffer that holds entries (`all`), or
    /// those the queue has room for. Whether any was.
    pub(super) fn sweep(&self, all: bool) -> bool {
        let mut handed = false;
        for slot in self.slots.iter() {
            let mut pending = slot.lock();
            if pending.entries > 0 && (all || self.has_room(pending.bytes.len())) {
                self.hand_over(slot, &mut pending);
                handed = true;
            }
        }
        handed
    }

    /// The oldest queued buffer.
    pub(super) fn pop(&self) -> Option<Batch> {
        self.queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front()
    }

    /// A popped buffer of `len` bytes is written: its room is free.
    pub(super) fn written(&self, len: usize) {
        self.queued_bytes.fetch_sub(len, Ordering::Relaxed);
    }

    /// Counts as dropped every entry still buffered or queued (after the
    /// writer stopped).
    pub(super) fn drop_all(&self) {
        self.sweep(true);
        while let Some(batch) = self.pop() {
            self.written(batch.bytes.len());
            self.dropped.add(batch.entries);
        }
    }

    /// Called on the writer thread before it first waits.
    pub(super) fn set_writer(&self, writer: Thread) {
        let _ = self.writer.set(writer);
    }

    /// Wakes the writer thread.
    pub(super) fn wake_writer(&self) {
        self.writer_idle.store(false, Ordering::SeqCst);
        if let Some(writer) = self.writer.get() {
            writer.unpark();
        }
    }

    /// The writer is about to wait: the next entry into an empty buffer
    /// wakes it. Whether anything came meanwhile (then it does not wait):
    /// an entry appended before this call is found by this sweep, one
    /// after it sees the flag.
    pub(super) fn going_idle(&self) -> bool {
        self.writer_idle.store(true, Ordering::SeqCst);
        let came = self.sweep(false) || !self.queue_is_empty();
        if came {
            self.writer_idle.store(false, Ordering::SeqCst);
        }
        came
    }

    fn queue_is_empty(&self) -> bool {
        self.queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
    }
}
