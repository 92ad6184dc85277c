//! `MonotonicArena` behaviour: go-arena's cursor semantics one by one,
//! alignment, zeroing, len/cap/peak, typed allocation, the allocator-api2
//! `Vec`, the byte buffer, the pool and low-waste mode. `.ci/run` also runs
//! this file under valgrind and Miri, so it stays light and leaks nothing.

use std::alloc::Layout;
use std::cell::Cell;
use std::fmt::Write as _;
use std::ptr::NonNull;

use tonic_hotpath::arena::Vec as ArenaVec;
#[cfg(feature = "bench-internals")]
use tonic_hotpath::arena::replay::{Workload, slack_percent};
use tonic_hotpath::arena::{AllocError, ArenaPool, ByteBuffer, MonotonicArena};

fn arena(min_buffer_size: usize, initial_buffer_count: usize) -> MonotonicArena {
    MonotonicArena::builder()
        .min_buffer_size(min_buffer_size)
        .initial_buffer_count(initial_buffer_count)
        .build()
}

fn bytes(arena: &MonotonicArena, size: usize) -> NonNull<u8> {
    arena
        .alloc_layout(Layout::from_size_align(size, 1).unwrap())
        .expect("allocation")
}

/// Everything a failed allocation must leave alone.
fn snapshot(arena: &MonotonicArena) -> [usize; 5] {
    [
        arena.len(),
        arena.cap(),
        arena.peak(),
        arena.buffer_count(),
        arena.cursor(),
    ]
}

fn addr(ptr: NonNull<u8>) -> usize {
    ptr.as_ptr() as usize
}

/// Whether every byte of `memory` is `byte`: one slice comparison (a
/// `memcmp`), which Miri runs natively; it interprets a loop over the bytes
/// step by step (the 1 MiB blocks of the release test took it minutes).
fn all_bytes(memory: &[u8], byte: u8) -> bool {
    memory == vec![byte; memory.len()]
}

// ---- cursor semantics (go-arena v1.3.0), one by one ----

#[test]
fn cursor_starts_at_zero() {
    let arena = arena(1024, 3);
    assert_eq!((arena.cursor(), arena.buffer_count()), (0, 3));
    bytes(&arena, 10);
    assert_eq!(arena.cursor(), 0);
}

#[test]
fn cursor_stays_on_a_same_buffer_hit() {
    let arena = arena(1024, 2);
    let first = bytes(&arena, 100);
    let second = bytes(&arena, 100);
    assert_eq!(addr(second), addr(first) + 100, "bumped in the same buffer");
    assert_eq!((arena.cursor(), arena.buffer_count()), (0, 2));
}

#[test]
fn cursor_advances_on_growth() {
    let arena = arena(100, 1);
    bytes(&arena, 100);
    bytes(&arena, 50);
    assert_eq!((arena.cursor(), arena.buffer_count()), (1, 2));
    assert_eq!((arena.len(), arena.cap()), (150, 200));
}

#[test]
fn cursor_advances_past_full_buffers_to_a_later_buffer_with_room() {
    let arena = arena(100, 3);
    let a = bytes(&arena, 60); // buffer 0: 40 left
    let b = bytes(&arena, 60); // no room in 0: buffer 1, cursor 1
    assert_eq!(arena.cursor(), 1);
    let c = bytes(&arena, 30); // would fit buffer 0, but the walk starts at 1
    assert_eq!(addr(c), addr(b) + 60);
    assert_ne!(addr(c), addr(a) + 60);
    bytes(&arena, 30); // 10 left in 1: on to buffer 2
    assert_eq!((arena.cursor(), arena.buffer_count()), (2, 3));
    assert_eq!(arena.len(), 180);
}

#[test]
fn cursor_rewinds_on_reset_and_on_release() {
    let mut arena = arena(100, 1);
    let first = bytes(&arena, 100);
    bytes(&arena, 100);
    bytes(&arena, 100);
    assert_eq!(arena.cursor(), 2);
    arena.reset();
    assert_eq!(arena.cursor(), 0);
    assert_eq!(addr(bytes(&arena, 10)), addr(first), "refills buffer 0");
    bytes(&arena, 95);
    assert_eq!(arena.cursor(), 1);
    arena.release();
    assert_eq!((arena.cursor(), arena.len()), (0, 0));
    assert_eq!(
        (arena.buffer_count(), arena.cap()),
        (3, 300),
        "release keeps the list"
    );
    bytes(&arena, 100);
    bytes(&arena, 100);
    assert_eq!((arena.cursor(), arena.buffer_count()), (1, 3));
}

#[test]
fn never_rescans_full_buffers() {
    let arena = arena(1024, 1);
    for _ in 0..10 {
        bytes(&arena, 1024);
    }
    assert_eq!((arena.buffer_count(), arena.cursor()), (10, 9));
    for _ in 0..100 {
        bytes(&arena, 8);
    }
    assert_eq!((arena.buffer_count(), arena.cursor()), (11, 10));
    assert_eq!(arena.len(), 10 * 1024 + 800);
}

#[cfg(feature = "bench-internals")]
#[test]
fn scan_from_zero_fills_earlier_gaps() {
    let arena = MonotonicArena::builder()
        .min_buffer_size(100)
        .scan_from_zero(true)
        .build();
    let a = bytes(&arena, 60);
    bytes(&arena, 60); // new buffer
    let c = bytes(&arena, 30); // first fit: back in buffer 0
    assert_eq!(addr(c), addr(a) + 60);
    assert_eq!((arena.buffer_count(), arena.len()), (2, 150));
}

// ---- growth size, alignment, zeroing ----

#[test]
fn growth_is_max_of_min_buffer_size_and_size_plus_align_minus_one() {
    let arena = arena(1000, 1);
    bytes(&arena, 1000);
    bytes(&arena, 10);
    assert_eq!(arena.cap(), 2000, "small request: a min_buffer_size buffer");
    arena
        .alloc_layout(Layout::from_size_align(1500, 64).unwrap())
        .unwrap();
    assert_eq!(arena.cap(), 2000 + 1500 + 63);
    assert_eq!(arena.buffer_count(), 3);
}

#[test]
fn alignment_from_1_to_4096_is_honoured() {
    for min in [64, 4096] {
        let arena = arena(min, 1);
        let mut align = 1;
        while align <= 4096 {
            for size in [1, 3, 17, align] {
                bytes(&arena, 1); // knock the bump position off alignment
                let layout = Layout::from_size_align(size, align).unwrap();
                let before = arena.len();
                let ptr = arena.alloc_layout(layout).unwrap();
                assert_eq!(addr(ptr) % align, 0, "size {size} align {align}");
                assert!(arena.len() - before >= size || arena.cursor() > 0);
                // The whole block is writable (valgrind checks the bounds).
                unsafe { ptr.as_ptr().write_bytes(0xAB, size) };
            }
            align *= 2;
        }
    }
}

#[test]
fn memory_is_zeroed_on_first_use_and_after_reset_and_release() {
    for low_waste in [false, true] {
        let mut arena = MonotonicArena::builder()
            .min_buffer_size(256)
            .low_waste(low_waste)
            .build();
        for round in 0..3 {
            for size in [1, 7, 100, 255, 256, 300, 1000] {
                let block = arena.alloc_slice_fill_with(0, |_| 0u8).unwrap();
                assert!(block.is_empty());
                let ptr = bytes(&arena, size);
                let block = unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), size) };
                assert!(all_bytes(block, 0), "round {round}, size {size}");
                block.fill(0xFF);
            }
            if round == 0 {
                arena.reset();
            } else {
                arena.release();
            }
        }
    }
}

// ---- len, cap, peak ----

#[test]
fn len_cap_peak_follow_go_arena() {
    let mut arena = arena(1024, 1);
    assert_eq!((arena.len(), arena.cap(), arena.peak()), (0, 1024, 0));
    bytes(&arena, 100);
    bytes(&arena, 200);
    assert_eq!((arena.len(), arena.peak()), (300, 300));
    arena.reset();
    assert_eq!((arena.len(), arena.cap(), arena.peak()), (0, 1024, 300));
    bytes(&arena, 50);
    assert_eq!((arena.len(), arena.peak()), (50, 300));
    bytes(&arena, 400);
    assert_eq!((arena.len(), arena.peak()), (450, 450));
    arena.release();
    assert_eq!((arena.len(), arena.cap(), arena.peak()), (0, 1024, 450));
}

#[test]
fn len_counts_alignment_padding() {
    let arena = arena(1024, 1);
    bytes(&arena, 1);
    arena
        .alloc_layout(Layout::from_size_align(1, 8).unwrap())
        .unwrap();
    assert_eq!(arena.len(), 9, "1 byte, 7 of padding, 1 byte");
    arena
        .alloc_layout(Layout::from_size_align(1, 16).unwrap())
        .unwrap();
    assert_eq!(arena.len(), 17);
}

#[test]
fn peak_spans_buffers_and_growth() {
    let mut arena = arena(50, 2);
    bytes(&arena, 50);
    bytes(&arena, 50);
    bytes(&arena, 75);
    assert_eq!((arena.len(), arena.peak(), arena.cap()), (175, 175, 175));
    arena.reset();
    assert_eq!((arena.len(), arena.peak()), (0, 175));
}

#[test]
fn a_failed_allocation_changes_nothing() {
    let arena = arena(100, 1);
    bytes(&arena, 60);
    bytes(&arena, 60);
    let before = snapshot(&arena);
    let huge = Layout::from_size_align(isize::MAX as usize - 16, 8).unwrap();
    let err = arena.alloc_layout(huge).unwrap_err();
    assert!(
        matches!(err, AllocError::SizeOverflow { align: 8, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("overflows isize::MAX"), "{err}");
    assert_eq!(snapshot(&arena), before);
    let err = arena
        .alloc_slice_fill_with(usize::MAX / 4, |_| -> u64 { unreachable!() })
        .unwrap_err();
    assert!(matches!(err, AllocError::SizeOverflow { .. }));
    assert_eq!(snapshot(&arena), before);
    bytes(&arena, 10); // still usable
}

#[test]
fn zero_size_requests_are_aligned_and_free() {
    let arena = arena(64, 0);
    for align in [1, 8, 64, 4096] {
        let ptr = arena
            .alloc_layout(Layout::from_size_align(0, align).unwrap())
            .unwrap();
        assert_eq!(addr(ptr) % align, 0);
    }
    let units = arena.alloc_slice_fill_with(1000, |_| ()).unwrap();
    assert_eq!(units.len(), 1000);
    *arena.alloc(()) = ();
    assert_eq!((arena.len(), arena.cap(), arena.buffer_count()), (0, 0, 0));
}

#[test]
fn initial_buffer_count_and_edge_sizes() {
    assert_eq!(
        (arena(512, 3).cap(), arena(512, 3).buffer_count()),
        (1536, 3)
    );
    let default = MonotonicArena::new();
    assert_eq!((default.cap(), default.buffer_count()), (32 * 1024, 1));
    let none = arena(1024, 0);
    assert_eq!(none.cap(), 0);
    bytes(&none, 100);
    assert_eq!(
        (none.len(), none.peak(), none.buffer_count()),
        (100, 100, 1)
    );
    let zero = arena(0, 1);
    assert_eq!(zero.cap(), 0);
    bytes(&zero, 100);
    assert_eq!((zero.len(), zero.buffer_count()), (100, 2));
}

// ---- typed values, slices, strings ----

#[derive(Debug, Clone, Copy, PartialEq)]
struct Point {
    x: i64,
    y: i32,
    z: i16,
}

#[test]
fn typed_values_slices_and_strings() {
    let arena = arena(4096, 1);
    let point = arena.alloc(Point { x: 1, y: 2, z: 3 });
    point.x += 41;
    assert_eq!(*point, Point { x: 42, y: 2, z: 3 });
    assert_eq!(arena.len(), size_of::<Point>());
    let copied = arena.alloc_slice_copy(&[1u32, 2, 3]).unwrap();
    copied[0] = 10;
    assert_eq!(copied, [10, 2, 3]);
    let text = arena.alloc_str("héllo").unwrap();
    text.make_ascii_uppercase();
    assert_eq!(text, "HéLLO");
    assert_eq!(
        *point,
        Point { x: 42, y: 2, z: 3 },
        "earlier blocks untouched"
    );
    let big = arena.try_alloc([7u8; 10_000]).unwrap();
    assert!(all_bytes(big, 7));
}

#[test]
fn slices_clone_each_element_once() {
    #[derive(Debug, PartialEq)]
    struct Counted<'a>(u32, &'a Cell<u32>);
    impl Clone for Counted<'_> {
        fn clone(&self) -> Self {
            self.1.set(self.1.get() + 1);
            Counted(self.0, self.1)
        }
    }
    let clones = Cell::new(0);
    let source: Vec<Counted<'_>> = (0..5).map(|i| Counted(i, &clones)).collect();
    let arena = MonotonicArena::new();
    let copy = arena.alloc_slice_clone(&source).unwrap();
    assert_eq!(copy, &source[..]);
    assert_eq!(clones.get(), 5);
}

#[test]
fn values_are_not_dropped() {
    struct Loud<'a>(&'a Cell<u32>);
    impl Drop for Loud<'_> {
        fn drop(&mut self) {
            self.0.set(self.0.get() + 1);
        }
    }
    let drops = Cell::new(0);
    let mut arena = MonotonicArena::new();
    arena.alloc(Loud(&drops));
    arena.reset();
    drop(arena);
    assert_eq!(drops.get(), 0, "documented: the arena never runs Drop");
}

#[test]
fn fill_with_may_allocate_from_the_same_arena() {
    let arena = MonotonicArena::builder().min_buffer_size(64).build();
    let names = arena
        .alloc_slice_fill_with(20, |i| {
            let s: &str = arena.alloc_str(&format!("n{i}")).unwrap();
            s
        })
        .unwrap();
    assert_eq!(names[19], "n19");
}

// ---- allocator-api2 Vec, byte buffer ----

#[test]
fn vec_grows_in_place_while_newest() {
    let arena = arena(4096, 1);
    let mut v: ArenaVec<u32, &MonotonicArena> = ArenaVec::with_capacity_in(4, &arena);
    let start = v.as_ptr();
    for i in 0..512 {
        v.push(i);
    }
    assert_eq!(v.as_ptr(), start, "every growth happened in place");
    assert_eq!(arena.len(), v.capacity() * 4, "no copy left behind");
    let wedge = arena.alloc(1u8); // now `v` is no longer the newest block
    *wedge = 2;
    let cap = v.capacity();
    v.extend(0..cap as u32);
    assert_ne!(
        v.as_ptr(),
        start,
        "moved once something was allocated after it"
    );
    assert!(v.iter().take(512).copied().eq(0..512));
    v.shrink_to_fit();
    assert!(v.iter().skip(512).copied().eq(0..cap as u32));
    let zeroed: ArenaVec<u64, &MonotonicArena> = allocator_api2::vec::from_elem_in(0, 300, &arena);
    assert!(zeroed.iter().all(|&x| x == 0));
}

#[test]
fn byte_buffer_is_io_and_fmt_write() {
    let arena = MonotonicArena::builder().min_buffer_size(64).build();
    let mut out = ByteBuffer::new(&arena);
    assert!(out.is_empty());
    write!(out, "{{\"user\":{},", 7).unwrap();
    std::io::Write::write_all(&mut out, b"\"items\":[").unwrap();
    for i in 0..100 {
        write!(out, "{i},").unwrap();
    }
    out.extend_from_slice(b"0]}").unwrap();
    let text = out.as_str().unwrap().to_owned();
    assert!(text.starts_with("{\"user\":7,\"items\":[0,1,2,"));
    assert!(text.ends_with("98,99,0]}"));
    assert!(out.capacity() >= out.len());
    let frozen = out.into_bytes();
    assert_eq!(frozen, text.as_bytes());
    let mut reserved = ByteBuffer::with_capacity(&arena, 1000).unwrap();
    assert!(reserved.capacity() >= 1000);
    std::io::Write::write_all(&mut reserved, b"x").unwrap();
    reserved.clear();
    assert_eq!(reserved.len(), 0);
    let err = ByteBuffer::with_capacity(&arena, usize::MAX).unwrap_err();
    assert!(matches!(err, AllocError::SizeOverflow { .. }), "{err:?}");
}

// ---- pool ----

#[test]
fn pool_records_peak_resets_and_reuses() {
    let pool = ArenaPool::new();
    assert_eq!(pool.size_for(1), 1024 * 1024);
    let first_addr = {
        let arena = pool.acquire(1);
        assert_eq!(arena.key(), 1);
        let block = arena.alloc_slice_fill_with(10_000, |_| 0xEEu8).unwrap();
        block.as_ptr() as usize
    };
    assert_eq!((pool.size_for(1), pool.idle_count()), (10_000, 1));
    {
        let arena = pool.acquire(2);
        assert_eq!((arena.len(), arena.peak()), (0, 0), "reset, own peak");
        let block = arena.alloc_slice_fill_with(10_000, |_| 0u8).unwrap();
        assert_eq!(
            block.as_ptr() as usize,
            first_addr,
            "same arena, same memory"
        );
        let zeroed = unsafe { std::slice::from_raw_parts(block.as_ptr(), 10_000) };
        assert!(all_bytes(zeroed, 0));
        bytes(&arena, 2_000);
    }
    assert_eq!(pool.size_for(2), 12_000);
    let a = pool.acquire(1);
    let b = pool.acquire(1); // none idle: a new arena sized from the peak
    assert_eq!(b.min_buffer_size(), 10_000);
    drop((a, b));
    assert_eq!(pool.idle_count(), 2);
    pool.acquire(1);
    assert_eq!(pool.size_for(1), 10_000 / 4, "average of four uses");
}

#[test]
fn pool_is_shared_across_threads_and_bounded() {
    let pool = ArenaPool::new().max_idle(2);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let pool = &pool;
            s.spawn(move || {
                for i in 0..50 {
                    let arena = pool.acquire(t);
                    let v = arena.alloc_slice_fill_with(100 + i, |j| j as u8).unwrap();
                    assert_eq!(v[v.len() - 1], (v.len() - 1) as u8);
                }
            });
        }
    });
    assert!(pool.idle_count() <= 2);
    for t in 0..4 {
        let size = pool.size_for(t);
        assert!((100..150).contains(&size), "key {t}: {size}");
    }
}

// ---- low-waste mode ----

fn low_waste(min: usize) -> MonotonicArena {
    MonotonicArena::builder()
        .min_buffer_size(min)
        .low_waste(true)
        .build()
}

#[test]
fn low_waste_puts_oversize_requests_aside_without_moving_the_cursor() {
    let arena = low_waste(4096);
    assert!(arena.is_low_waste());
    let small = bytes(&arena, 100);
    let big = bytes(&arena, 10_000);
    let next = bytes(&arena, 100);
    assert_eq!(addr(next), addr(small) + 100, "current buffer kept");
    assert_eq!(arena.cursor(), 0);
    assert_ne!(addr(big), addr(small) + 100);
    assert_eq!(
        arena.cap(),
        4096 + 10_000,
        "dedicated buffer of the exact size"
    );
}

#[test]
fn low_waste_fills_partial_tails_before_growing() {
    let arena = low_waste(1024);
    let first = bytes(&arena, 1000); // buffer 0: 24 left
    bytes(&arena, 300); // too little left to keep 0 current: 0 goes aside
    bytes(&arena, 500); // current: 224 left
    let aside = bytes(&arena, 400); // current keeps its 224; a new buffer takes it
    assert_eq!(arena.cap(), 3072);
    let reused = bytes(&arena, 500); // best fit among the partials: the new one
    assert_eq!(addr(reused), addr(aside) + 400);
    bytes(&arena, 224); // fills the current buffer exactly
    let tail = bytes(&arena, 24); // best fit: the 24-byte tail of buffer 0
    assert_eq!(addr(tail), addr(first) + 1000);
    assert_eq!(arena.cap(), 3072, "no growth after the third buffer");
    assert_eq!(arena.len(), 1000 + 300 + 500 + 400 + 500 + 224 + 24);
}

#[cfg(feature = "bench-internals")]
#[test]
fn low_waste_replay_prefix_keeps_slack_low_and_memory_zeroed() {
    for workload in [Workload::Mixed, Workload::Bimodal] {
        let mut arena = low_waste(Workload::BUFFER_SIZE);
        for cycle in 0..2 {
            for layout in workload.requests().take(3_000) {
                let ptr = arena.alloc_layout(layout).unwrap();
                let block = unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), layout.size()) };
                assert!(all_bytes(block, 0), "{workload:?} cycle {cycle}");
                block.fill(0x5A);
            }
            assert!(
                slack_percent(&arena) < 3.0,
                "{workload:?}: {}",
                slack_percent(&arena)
            );
            arena.reset();
        }
    }
}

#[test]
fn arena_is_send() {
    fn assert_send<T: Send>(_: &T) {}
    let arena = MonotonicArena::new();
    assert_send(&arena);
    let handle = std::thread::spawn(move || *arena.alloc(5u32) + 1);
    assert_eq!(handle.join().unwrap(), 6);
}

// Slabs: consecutive buffers are carved from shared zeroed slabs (1, 2, 4,
// ... buffers' worth), buffers over 1 MiB get their own.

/// Fills `size` bytes at `ptr` with `byte` after checking they are zero.
fn check_zero_then_fill(ptr: NonNull<u8>, size: usize, byte: u8) {
    // SAFETY (test): `ptr` was just handed out for `size` bytes.
    let memory = unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), size) };
    assert!(all_bytes(memory, 0), "handed-out memory is zeroed");
    memory.fill(byte);
}

/// One exact-fill allocation per buffer, `count` buffers, each filled with
/// its own byte; returns the blocks (pointers, not addresses: a pointer made
/// back from an address has no provenance, and Miri's strict provenance
/// rejects reading through it).
fn fill_buffers(
    arena: &MonotonicArena,
    size: usize,
    align: usize,
    count: usize,
) -> Vec<NonNull<u8>> {
    (0..count)
        .map(|i| {
            let ptr = arena
                .alloc_layout(Layout::from_size_align(size, align).unwrap())
                .unwrap();
            assert_eq!(addr(ptr) % align, 0);
            check_zero_then_fill(ptr, size, i as u8 + 1);
            ptr
        })
        .collect()
}

#[test]
fn slab_carved_buffers_are_disjoint_aligned_and_keep_their_bytes() {
    let arena = arena(1000, 0);
    // 40 buffers: slabs of 1, 2, 4, 8, 16 and part of a 32-buffer one.
    let starts = fill_buffers(&arena, 1000, 8, 40);
    assert_eq!((arena.buffer_count(), arena.cursor()), (40, 39));
    assert_eq!(arena.cap(), 40 * 1007, "cap: logical buffers of 1000 + 7");
    let mut sorted: Vec<usize> = starts.iter().map(|&p| addr(p)).collect();
    sorted.sort_unstable();
    assert!(sorted.windows(2).all(|w| w[1] - w[0] >= 1000), "disjoint");
    for (i, &start) in starts.iter().enumerate() {
        // SAFETY (test): each buffer's 1000 bytes are still live.
        let memory = unsafe { std::slice::from_raw_parts(start.as_ptr(), 1000) };
        assert!(all_bytes(memory, i as u8 + 1), "buffer {i} intact");
    }
}

#[test]
fn large_alignment_inside_slab_carved_buffers() {
    // Buffers of 100 + 4095 bytes carved back to back at 16-byte steps: the
    // padding happens inside each buffer, whatever its offset in the slab.
    let arena = arena(0, 0);
    fill_buffers(&arena, 100, 4096, 12);
    assert_eq!(arena.buffer_count(), 12);
    assert_eq!(arena.cap(), 12 * (100 + 4095));
}

#[test]
fn reset_zeroes_every_slab_carved_buffer_and_reuses_it() {
    let mut arena = arena(512, 0);
    let first = fill_buffers(&arena, 512, 16, 20);
    arena.reset();
    let again = fill_buffers(&arena, 512, 16, 20);
    assert_eq!(first, again, "same buffers, same places, zeroed again");
    assert_eq!(arena.buffer_count(), 20);
}

#[test]
fn release_frees_slabs_and_buffers_come_back_zeroed() {
    for low_waste in [false, true] {
        let mut arena = MonotonicArena::builder()
            .min_buffer_size(256)
            .initial_buffer_count(0)
            .low_waste(low_waste)
            .build();
        fill_buffers(&arena, 256, 16, 20);
        let big = bytes(&arena, (1 << 20) + 1); // over 1 MiB: its own slab
        check_zero_then_fill(big, (1 << 20) + 1, 0xAB);
        fill_buffers(&arena, 256, 16, 5);
        let cap = arena.cap();
        arena.release();
        assert_eq!((arena.cap(), arena.len()), (cap, 0));
        // Same buffers, fresh memory: valgrind flags any use of a freed slab.
        fill_buffers(&arena, 256, 16, 30);
        check_zero_then_fill(bytes(&arena, (1 << 20) + 1), (1 << 20) + 1, 1);
        arena.release();
        arena.release();
    }
}
