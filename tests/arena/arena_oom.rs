//! Out-of-memory is an error value that leaves the arena unchanged. Kept out
//! of the valgrind run (a petabyte request makes valgrind warn) and of Miri's
//! (Miri stops the whole program on an allocation it cannot serve instead of
//! returning null).

use std::alloc::Layout;

use tonic_hotpath::arena::{AllocError, ByteBuffer, MonotonicArena};

#[test]
#[cfg_attr(miri, ignore = "Miri aborts on a petabyte allocation")]
fn a_request_the_system_cannot_serve_is_out_of_memory() {
    for low_waste in [false, true] {
        let arena = MonotonicArena::builder()
            .min_buffer_size(1024)
            .low_waste(low_waste)
            .build();
        arena.alloc_slice_copy(b"kept").unwrap();
        let before = (
            arena.len(),
            arena.cap(),
            arena.buffer_count(),
            arena.cursor(),
        );
        let petabyte = Layout::from_size_align(1 << 50, 8).unwrap();
        let err = arena.alloc_layout(petabyte).unwrap_err();
        assert!(
            matches!(err, AllocError::OutOfMemory { buffer_size } if buffer_size >= 1 << 50),
            "{err:?}"
        );
        assert!(err.to_string().contains("out of memory"), "{err}");
        let after = (
            arena.len(),
            arena.cap(),
            arena.buffer_count(),
            arena.cursor(),
        );
        assert_eq!(before, after);
        let mut out = ByteBuffer::new(&arena);
        let err = std::io::Write::write_all(&mut out, b"x")
            .and_then(|()| out.reserve(1 << 50).map_err(std::io::Error::other))
            .unwrap_err();
        assert!(err.to_string().contains("out of memory"), "{err}");
    }
}
