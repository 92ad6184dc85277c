//! `allocator_api2::alloc::Allocator` for `&MonotonicArena`, so that
//! `allocator_api2::vec::Vec<T, &MonotonicArena>` (go-arena's `SliceAppend`)
//! and the other allocator-aware collections live in the arena.
//!
//! `deallocate` is a no-op (memory comes back on reset). `grow` extends the
//! block in place when it is the newest allocation in the current buffer and
//! the buffer has room, so a `Vec` being pushed to without interleaved
//! allocations never copies.
//!
//! ```
//! use tonic_hotpath::arena::{MonotonicArena, Vec};
//!
//! let arena = MonotonicArena::new();
//! let mut ids: Vec<u32, &MonotonicArena> = Vec::new_in(&arena);
//! ids.extend([3, 1, 2]);
//! ids.sort_unstable();
//! assert_eq!(ids, [1, 2, 3]);
//! assert_eq!(arena.len(), 16); // 4 elements' room (Vec's minimum), no copy
//! ```

use std::alloc::Layout;
use std::ptr::{self, NonNull};

use allocator_api2::alloc::{AllocError, Allocator};

use super::MonotonicArena;

impl MonotonicArena {
    fn reallocate(
        &self,
        ptr: NonNull<u8>,
        old_layout: Layout,
        new_layout: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        let aligned = ptr.as_ptr().addr() & (new_layout.align() - 1) == 0;
        let new_size = new_layout.size();
        if aligned
            && (new_size <= old_layout.size() || self.extend_last(ptr, old_layout.size(), new_size))
        {
            return Ok(NonNull::slice_from_raw_parts(ptr, new_size));
        }
        let new_ptr = self.alloc_layout(new_layout)?;
        let kept = old_layout.size().min(new_size);
        // SAFETY: the caller guarantees `ptr` is valid for `old_layout.size()`
        // bytes; `new_ptr` is a fresh block of `new_size` bytes, disjoint from
        // every earlier block; `kept` fits both.
        unsafe { ptr::copy_nonoverlapping(ptr.as_ptr(), new_ptr.as_ptr(), kept) };
        Ok(NonNull::slice_from_raw_parts(new_ptr, new_size))
    }
}

// SAFETY: blocks stay valid until `reset`/`release`/drop, which need `&mut`
// or ownership of the arena and so cannot happen while a `&MonotonicArena`
// (this allocator) is alive; copies of the allocator are the same arena;
// `allocate` honours size and alignment; memory is zeroed (buffers are zeroed
// and the bytes past the bump position stay zero), which makes
// `allocate_zeroed`/`grow_zeroed` correct; `grow` in place only extends over
// bytes past the bump position, which nothing else owns.
unsafe impl Allocator for &MonotonicArena {
    #[inline]
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        let ptr = self.alloc_layout(layout)?;
        Ok(NonNull::slice_from_raw_parts(ptr, layout.size()))
    }

    #[inline]
    fn allocate_zeroed(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        self.allocate(layout)
    }

    #[inline]
    unsafe fn deallocate(&self, _ptr: NonNull<u8>, _layout: Layout) {}

    unsafe fn grow(
        &self,
        ptr: NonNull<u8>,
        old_layout: Layout,
        new_layout: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        self.reallocate(ptr, old_layout, new_layout)
    }

    unsafe fn grow_zeroed(
        &self,
        ptr: NonNull<u8>,
        old_layout: Layout,
        new_layout: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        self.reallocate(ptr, old_layout, new_layout)
    }

    unsafe fn shrink(
        &self,
        ptr: NonNull<u8>,
        old_layout: Layout,
        new_layout: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        self.reallocate(ptr, old_layout, new_layout)
    }
}
