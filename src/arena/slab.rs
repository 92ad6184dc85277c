//! Slabs: the large zeroed blocks that back consecutive logical buffers.
//!
//! go-arena creates one logical buffer at a time; asking the global
//! allocator for each of them (thousands of 4 KiB `calloc`s in the replay
//! workloads) costs a `memset` of recycled heap chunks per buffer. Instead,
//! the [`Carver`] takes zeroed slabs from the global allocator with
//! `alloc_zeroed`, growing geometrically from the first buffer's size up to
//! [`MAX_SLAB_SIZE`], and carves logical buffers off their front, each at a
//! [`BUFFER_ALIGN`] boundary and never straddling two slabs. Large slabs come
//! from `mmap` on common allocators: already zero, faulted in page by page on
//! first touch.
//!
//! Ownership: the buffer carved first from a slab owns the whole slab (its
//! base address is the slab's) and frees it in [`Buffer::free`]; the other
//! buffers of that slab only borrow. Every buffer forgets its memory at the
//! same time (release, drop), so no buffer outlives its slab.
//!
//! [`Buffer::free`]: super::buffer::Buffer::free

use std::alloc::{self, Layout};
use std::ptr::NonNull;

use super::AllocError;
use super::buffer::BUFFER_ALIGN;

/// Largest slab the geometric growth reaches: 4 MiB.
pub(crate) const MAX_SLAB_SIZE: usize = 4 << 20;

/// Buffers larger than this get a slab of their own, exactly their size,
/// and leave the carving slab as it is.
pub(crate) const MAX_CARVED_SIZE: usize = MAX_SLAB_SIZE / 4;

/// Memory for one logical buffer.
#[derive(Debug)]
pub(crate) struct Carved {
    /// Base address of the buffer, `BUFFER_ALIGN`-aligned, zeroed.
    pub(crate) base: NonNull<u8>,
    /// Size of the slab that starts at `base` and that this buffer now owns,
    /// or 0 if the buffer borrows from a slab owned by an earlier buffer.
    pub(crate) owned_slab: usize,
}

/// Hands out zeroed memory for logical buffers from geometric slabs.
#[derive(Debug, Default)]
pub(crate) struct Carver {
    /// Free tail `[next, next + left)` of the carving slab.
    next: Option<NonNull<u8>>,
    left: usize,
    /// Size of the last carving slab (0 before the first).
    last_slab: usize,
}

impl Carver {
    /// Forgets the carving slab (its owner is freeing it) and restarts the
    /// geometric growth.
    pub(crate) fn clear(&mut self) {
        *self = Carver::default();
    }

    /// Zeroed memory for a buffer of `size` (non-zero) bytes.
    pub(crate) fn carve(&mut self, size: usize) -> Result<Carved, AllocError> {
        let overflow = AllocError::SizeOverflow {
            size,
            align: BUFFER_ALIGN,
        };
        let rounded = size
            .checked_next_multiple_of(BUFFER_ALIGN)
            .filter(|&n| n <= isize::MAX as usize - (BUFFER_ALIGN - 1))
            .ok_or(overflow)?;
        if let Some(next) = self.next
            && rounded <= self.left
        {
            self.left -= rounded;
            // SAFETY: `rounded <= left`, and `[next, next + left)` lies inside
            // the live carving slab, so the new `next` is inside it or one
            // past its end.
            self.next = Some(unsafe { next.add(rounded) });
            return Ok(Carved {
                base: next,
                owned_slab: 0,
            });
        }
        if rounded > MAX_CARVED_SIZE {
            let base = allocate_zeroed(rounded, size)?;
            return Ok(Carved {
                base,
                owned_slab: rounded,
            });
        }
        let slab = self
            .last_slab
            .saturating_mul(2)
            .clamp(rounded, MAX_SLAB_SIZE);
        let base = allocate_zeroed(slab, size)?;
        self.last_slab = slab;
        self.left = slab - rounded;
        // SAFETY: `rounded <= slab`, the length of the allocation at `base`.
        self.next = Some(unsafe { base.add(rounded) });
        Ok(Carved {
            base,
            owned_slab: slab,
        })
    }
}

/// `slab_size` zeroed bytes at `BUFFER_ALIGN`; `buffer_size` is reported if
/// the allocator fails.
fn allocate_zeroed(slab_size: usize, buffer_size: usize) -> Result<NonNull<u8>, AllocError> {
    let layout = slab_layout(slab_size).ok_or(AllocError::SizeOverflow {
        size: buffer_size,
        align: BUFFER_ALIGN,
    })?;
    // SAFETY: callers pass a non-zero size (a buffer's size rounded up), and
    // the layout is valid, as `alloc_zeroed` requires.
    let raw = unsafe { alloc::alloc_zeroed(layout) };
    NonNull::new(raw).ok_or(AllocError::OutOfMemory { buffer_size })
}

/// The layout of a slab of `size` bytes.
pub(crate) fn slab_layout(size: usize) -> Option<Layout> {
    Layout::from_size_align(size, BUFFER_ALIGN).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn free(carved: &Carved) {
        if carved.owned_slab != 0 {
            let layout = slab_layout(carved.owned_slab).unwrap();
            // SAFETY (test): the slab was allocated with this layout and is
            // freed once.
            unsafe { alloc::dealloc(carved.base.as_ptr(), layout) };
        }
    }

    #[test]
    fn slabs_grow_geometrically_and_buffers_never_straddle_them() {
        let mut carver = Carver::default();
        let mut carved = Vec::new();
        for _ in 0..64 {
            carved.push(carver.carve(4000).unwrap());
        }
        let slabs: Vec<usize> = carved
            .iter()
            .map(|c| c.owned_slab)
            .filter(|&s| s != 0)
            .collect();
        assert_eq!(slabs[..4], [4000, 8000, 16000, 32000]);
        let mut slab = (0, 0);
        for c in &carved {
            let addr = c.base.as_ptr().addr();
            assert_eq!(addr % BUFFER_ALIGN, 0);
            if c.owned_slab != 0 {
                slab = (addr, addr + c.owned_slab);
            }
            assert!(addr >= slab.0 && addr + 4000 <= slab.1, "inside its slab");
        }
        carved.iter().for_each(free);
    }

    #[test]
    fn large_buffers_get_their_own_slab_and_keep_the_carving_one() {
        let mut carver = Carver::default();
        let small = carver.carve(100).unwrap();
        let big = carver.carve(MAX_CARVED_SIZE + 1).unwrap();
        assert_eq!(big.owned_slab, MAX_CARVED_SIZE + BUFFER_ALIGN);
        // The first slab was exactly 112 bytes, so the next small buffer
        // starts a 224-byte one.
        let next = carver.carve(100).unwrap();
        assert_eq!(next.owned_slab, 224);
        let borrowed = carver.carve(100).unwrap();
        assert_eq!(borrowed.owned_slab, 0);
        assert_eq!(
            borrowed.base.as_ptr().addr(),
            next.base.as_ptr().addr() + 112
        );
        for c in [&small, &big, &next, &borrowed] {
            free(c);
        }
    }

    #[test]
    fn overflowing_sizes_are_errors() {
        let mut carver = Carver::default();
        assert!(matches!(
            carver.carve(usize::MAX - 3),
            Err(AllocError::SizeOverflow { .. })
        ));
        assert!(matches!(
            carver.carve(isize::MAX as usize),
            Err(AllocError::SizeOverflow { .. })
        ));
    }
}
