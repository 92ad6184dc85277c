//! Heap allocations made by the arena, counted with a counting global
//! allocator: the fast path, in-place `Vec` growth, reset and the pool's
//! return path allocate nothing; growth allocates one slab per doubling
//! (slabs back consecutive buffers: 1, 2, 4, ... buffers' worth).

use tonic_hotpath::arena::Vec as ArenaVec;
use tonic_hotpath::arena::{ArenaPool, ByteBuffer, MonotonicArena};

use support::alloc_count::allocations;

#[test]
fn fast_path_and_reset_allocate_nothing() {
    let mut arena = MonotonicArena::builder().min_buffer_size(64 * 1024).build();
    let (n, _) = allocations(|| {
        for i in 0..1000u64 {
            *arena.alloc(i) += 1;
        }
    });
    assert_eq!(n, 1, "only the lazily allocated first buffer");
    let (n, ()) = allocations(|| arena.reset());
    assert_eq!(n, 0);
    let (n, _) = allocations(|| {
        for i in 0..1000u64 {
            arena.alloc(i);
        }
    });
    assert_eq!(n, 0, "the buffer is reused after reset");
}

#[test]
fn growth_allocates_one_slab_per_doubling() {
    let arena = MonotonicArena::builder().min_buffer_size(1024).build();
    arena.alloc(0u8);
    let (n, _) = allocations(|| {
        // 127 fill buffer 0 (1 byte + 7 padding used), 9 * 128 fill 9 more.
        for _ in 0..(127 + 9 * 128) {
            arena.alloc(0u64);
        }
    });
    // Buffer 0 had a 1 KiB slab; buffers 1-2 share a 2 KiB one, 3-6 a
    // 4 KiB one, 7-9 an 8 KiB one: 3 slabs (the buffer list itself may also
    // grow: at most a few reallocations). Before slabs: one per buffer, 9.
    assert!((3..=3 + 4).contains(&n), "{n}");
    assert_eq!(arena.buffer_count(), 10);
}

// 16 MiB filled a byte at a time through a closure: far too slow for Miri,
// which runs the same slab growth at a smaller scale in
// `growth_allocates_one_slab_per_doubling`.
#[test]
#[cfg_attr(miri, ignore = "16 MiB filled byte by byte: too slow for Miri")]
fn thousands_of_buffers_take_few_slabs() {
    let arena = MonotonicArena::builder()
        .min_buffer_size(4096)
        .initial_buffer_count(0)
        .build();
    let (n, _) = allocations(|| {
        for _ in 0..4096 {
            arena.alloc_slice_fill_with(4096, |_| 1u8).unwrap();
        }
    });
    assert_eq!(arena.buffer_count(), 4096);
    // 16 MiB of 4 KiB buffers: slabs of 4 KiB, 8 KiB, ... 4 MiB (11 slabs,
    // 8 188 KiB) then 2 more 4 MiB ones; plus the buffer list's ~13
    // reallocations. One allocation per buffer before slabs: 4 096.
    assert!((13..=13 + 14).contains(&n), "{n}");
}

#[test]
fn vec_and_byte_buffer_grow_in_place_without_the_heap() {
    let arena = MonotonicArena::builder().min_buffer_size(64 * 1024).build();
    arena.alloc(0u8);
    let (n, ()) = allocations(|| {
        let mut v: ArenaVec<u64, &MonotonicArena> = ArenaVec::new_in(&arena);
        for i in 0..1000 {
            v.push(i);
        }
        let mut out = ByteBuffer::new(&arena);
        for i in 0..1000 {
            std::fmt::Write::write_fmt(&mut out, format_args!("{i},")).unwrap();
        }
    });
    assert_eq!(n, 0);
}

#[test]
fn pool_round_trip_allocates_nothing_once_warm() {
    let pool = ArenaPool::new();
    // First use: builds the arena and its buffer, records the key.
    pool.acquire(7).alloc(0u8);
    let (n, ()) = allocations(|| {
        for _ in 0..100 {
            let arena = pool.acquire(7);
            arena.alloc_slice_fill_with(100, |i| i as u8).unwrap();
        }
    });
    assert_eq!(n, 0);
}
