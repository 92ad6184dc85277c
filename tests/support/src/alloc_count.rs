//! Counting global allocators, shared by the allocation tests and
//! benches:
//!
//! - [`CountingAllocator`], per thread: measure a closure with
//!   [`allocations`]. Per thread, so tests running in parallel do not
//!   disturb each other's counts.
//! - [`LiveBytesAllocator`], process-wide: the bytes live now
//!   ([`live_bytes`]) and their high-water mark ([`peak_bytes`],
//!   [`reset_peak`]), whichever thread allocated or freed them. Tests that
//!   read it must not run beside each other (hold a lock).
//!
//! Install one with `#[global_allocator]` in the binary that reads it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
    /// Bytes allocated minus bytes freed on this thread (wrapping: memory
    /// freed on another thread than its allocation's shows there).
    static NET_BYTES: Cell<isize> = const { Cell::new(0) };
}

fn add_bytes(delta: isize) {
    let _ = NET_BYTES.try_with(|bytes| bytes.set(bytes.get().wrapping_add(delta)));
}

/// Counts allocations (and reallocations) made on the current thread.
/// Install it with `#[global_allocator]` in the binary that uses
/// [`allocations`].
#[derive(Debug)]
pub struct CountingAllocator;

fn count_one() {
    // `try_with`: no counting while the thread's locals are torn down.
    let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
}

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged, so `System`'s guarantees carry over; the counter is a
// thread-local `Cell` with no destructor and does not allocate.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        add_bytes(layout.size() as isize);
        // SAFETY: forwarded unchanged; the caller upholds `alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_one();
        add_bytes(layout.size() as isize);
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        add_bytes(new_size as isize - layout.size() as isize);
        // SAFETY: as above; `ptr` came from this allocator, i.e. `System`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        add_bytes(-(layout.size() as isize));
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// How many allocations this thread has made so far (for spans a closure
/// cannot hold, such as several `.await`s on a current-thread runtime).
pub fn allocations_so_far() -> usize {
    ALLOCATIONS.with(Cell::get)
}

/// Runs `f` and returns how many allocations it made on this thread, and
/// its result (dropped by the caller, outside the count).
pub fn allocations<R>(f: impl FnOnce() -> R) -> (usize, R) {
    let before = allocations_so_far();
    let result = f();
    (allocations_so_far() - before, result)
}

/// Bytes this thread has allocated and not freed so far (requested sizes,
/// without the allocator's own overhead).
pub fn net_bytes_so_far() -> isize {
    NET_BYTES.with(Cell::get)
}

/// Bytes live in the whole process (requested sizes) and their high-water
/// mark, kept by [`LiveBytesAllocator`].
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn live_grow(bytes: usize) {
    let now = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    // A plain load first: the peak rarely moves, and a read-modify-write
    // on every allocation would bounce its cache line between threads.
    if now > PEAK.load(Ordering::Relaxed) {
        PEAK.fetch_max(now, Ordering::Relaxed);
    }
}

fn live_shrink(bytes: usize) {
    LIVE.fetch_sub(bytes, Ordering::Relaxed);
}

/// Counts the bytes live in the whole process (requested sizes, without
/// the allocator's own overhead) and their peak: read them with
/// [`live_bytes`], [`peak_bytes`] and [`reset_peak`]. Install it with
/// `#[global_allocator]`; every allocation of the process then goes
/// through it, so the counts start at zero and never underflow.
#[derive(Debug)]
pub struct LiveBytesAllocator;

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged, so `System`'s guarantees carry over; the counters are
// statics that never allocate.
unsafe impl GlobalAlloc for LiveBytesAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged; the caller upholds `alloc`'s contract.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            live_grow(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as above.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            live_grow(layout.size());
        }
        ptr
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as above; `ptr` came from this allocator, i.e. `System`.
        let moved = unsafe { System.realloc(ptr, layout, new_size) };
        if !moved.is_null() {
            match new_size.checked_sub(layout.size()) {
                Some(grown) => live_grow(grown),
                None => live_shrink(layout.size() - new_size),
            }
        }
        moved
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        live_shrink(layout.size());
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Bytes live in the process now (with [`LiveBytesAllocator`] installed).
pub fn live_bytes() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// The most bytes live at once since the last [`reset_peak`].
pub fn peak_bytes() -> usize {
    PEAK.load(Ordering::Relaxed)
}

/// Starts a new high-water mark at the bytes live now; returns them.
pub fn reset_peak() -> usize {
    let now = live_bytes();
    PEAK.store(now, Ordering::Relaxed);
    now
}
