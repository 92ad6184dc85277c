//! The arena's allocation error.

use std::fmt;

/// Why an arena allocation failed.
///
/// A failed allocation changes nothing: `len`, `cap`, `peak`, the buffer
/// count and the cursor are exactly what they were before the call.
///
/// ```
/// use std::alloc::Layout;
/// use tonic_hotpath::arena::{AllocError, MonotonicArena};
///
/// let arena = MonotonicArena::new();
/// let huge = Layout::from_size_align(isize::MAX as usize / 64 * 64, 64).unwrap();
/// let err = arena.alloc_layout(huge).unwrap_err();
/// assert!(matches!(err, AllocError::SizeOverflow { align: 64, .. }));
/// assert_eq!(arena.len(), 0); // nothing changed
/// assert!(arena.alloc_slice_fill_with(usize::MAX, |_| 0u64).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocError {
    /// The request (size, plus alignment slack for a new buffer, or
    /// `count * size_of::<T>()` for a slice) does not fit in `isize::MAX`.
    SizeOverflow {
        /// Requested size in bytes, or the element count for a slice.
        size: usize,
        /// Requested alignment in bytes, or the element size for a slice.
        align: usize,
    },
    /// The global allocator could not provide a new buffer.
    OutOfMemory {
        /// Size in bytes of the buffer the arena asked for.
        buffer_size: usize,
    },
}

impl fmt::Display for AllocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            AllocError::SizeOverflow { size, align } => write!(
                f,
                "arena allocation of {size} bytes with alignment {align} overflows isize::MAX"
            ),
            AllocError::OutOfMemory { buffer_size } => write!(
                f,
                "arena could not allocate a new {buffer_size}-byte buffer: out of memory"
            ),
        }
    }
}

impl std::error::Error for AllocError {}

impl From<AllocError> for allocator_api2::alloc::AllocError {
    fn from(_: AllocError) -> Self {
        allocator_api2::alloc::AllocError
    }
}
