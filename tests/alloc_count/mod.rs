//! A per-thread counting global allocator, shared by the allocation tests
//! and benches: install [`CountingAllocator`] with `#[global_allocator]` and
//! measure a closure with [`allocations`]. Per thread, so tests running in
//! parallel do not disturb each other's counts.
#![allow(dead_code, unreachable_pub)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

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
