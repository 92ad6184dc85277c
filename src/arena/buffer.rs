//! The unsafe core: zeroed heap buffers and the bump window over the current
//! one.
//!
//! Invariant kept by everything here: in every buffer, the bytes from `used`
//! to `size` are zero. Fresh memory comes from `alloc_zeroed`; a rewind zeroes
//! exactly the used prefix; nothing ever hands out memory past `used` without
//! moving `used` over it first. Memory handed out is therefore always zeroed.
//!
//! Buffers get their memory from the [`Carver`]'s slabs; the buffer that
//! owns a slab frees it (see [`slab`](super::slab)).

use std::alloc;
use std::cell::Cell;
use std::ptr::{self, NonNull};

use super::AllocError;
use super::slab::{Carver, slab_layout};

/// Alignment of every buffer's base address. Requests with a larger alignment
/// pad inside the buffer (go-arena sizes new buffers `size + align - 1` for
/// that reason).
pub(crate) const BUFFER_ALIGN: usize = 16;

/// Bytes needed to move `addr` up to a multiple of `align` (a power of two).
#[inline(always)]
pub(crate) fn padding(addr: usize, align: usize) -> usize {
    addr.wrapping_neg() & (align - 1)
}

/// Size of a buffer holding `size` bytes plus `slack` bytes of alignment
/// room, checked so that the buffer's layout is valid; `align` is only
/// reported in the error.
pub(crate) fn buffer_size(size: usize, slack: usize, align: usize) -> Result<usize, AllocError> {
    size.checked_add(slack)
        .filter(|&n| n <= isize::MAX as usize - (BUFFER_ALIGN - 1))
        .ok_or(AllocError::SizeOverflow { size, align })
}

/// One contiguous, zero-initialised block with a bump offset, carved from a
/// slab.
///
/// The memory is obtained lazily (go-arena creates `initial_buffer_count`
/// buffers up front but touches their memory only on first use) and
/// forgotten by [`Buffer::free`] or on drop; a buffer that owns its slab
/// frees the slab then. All buffers of an arena forget their memory together.
pub(crate) struct Buffer {
    memory: Option<NonNull<u8>>,
    size: usize,
    used: usize,
    /// Size of the slab starting at `memory` that this buffer owns, or 0.
    owned_slab: usize,
}

impl Buffer {
    /// A buffer of `size` bytes whose memory is allocated on first use.
    pub(crate) fn lazy(size: usize) -> Self {
        Buffer {
            memory: None,
            size,
            used: 0,
            owned_slab: 0,
        }
    }

    /// A buffer of `size` bytes with its memory carved now.
    pub(crate) fn allocated(size: usize, carver: &mut Carver) -> Result<Self, AllocError> {
        let mut buffer = Buffer::lazy(size);
        buffer.memory(carver)?;
        Ok(buffer)
    }

    /// Capacity in bytes.
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// Bytes handed out from this buffer, padding included.
    pub(crate) fn used(&self) -> usize {
        self.used
    }

    /// Bytes still free at the end of this buffer.
    pub(crate) fn remaining(&self) -> usize {
        self.size - self.used
    }

    /// The buffer's base address, carving the zeroed memory if needed.
    /// `None` for a zero-size buffer, which has no memory.
    pub(crate) fn memory(
        &mut self,
        carver: &mut Carver,
    ) -> Result<Option<NonNull<u8>>, AllocError> {
        if self.memory.is_none() && self.size != 0 {
            let carved = carver.carve(self.size)?;
            self.memory = Some(carved.base);
            self.owned_slab = carved.owned_slab;
        }
        Ok(self.memory)
    }

    /// Free bytes left after placing `size` bytes at `align` here, or `None`
    /// if they do not fit. Needs the memory (the padding depends on the
    /// address); a buffer without memory reports `None`.
    pub(crate) fn room_after(&self, size: usize, align: usize) -> Option<usize> {
        let base = self.memory?;
        let pad = padding(base.as_ptr().addr().wrapping_add(self.used), align);
        self.remaining().checked_sub(pad)?.checked_sub(size)
    }

    /// Addresses `(next, end)` of the free tail, if the memory exists.
    pub(crate) fn free_range(&self) -> Option<(usize, usize)> {
        let base = self.memory?.as_ptr().addr();
        Some((base + self.used, base + self.size))
    }

    /// Hands out `size` bytes at `align` from this buffer and returns the
    /// address and the bytes consumed (padding included), or `None` if they
    /// do not fit. Allocates the memory lazily, but only when the request
    /// could fit at all.
    pub(crate) fn bump(
        &mut self,
        size: usize,
        align: usize,
        carver: &mut Carver,
    ) -> Result<Option<(NonNull<u8>, usize)>, AllocError> {
        if size > self.remaining() {
            return Ok(None);
        }
        let Some(base) = self.memory(carver)? else {
            return Ok(None);
        };
        let Some(left) = self.room_after(size, align) else {
            return Ok(None);
        };
        let consumed = self.remaining() - left;
        let start = self.used + (consumed - size);
        self.used += consumed;
        // SAFETY: `start + size <= self.size`, so the offset stays inside the
        // live allocation of `self.size` bytes that starts at `base`.
        let ptr = unsafe { base.add(start) };
        Ok(Some((ptr, consumed)))
    }

    /// The `(pos, end)` pointers of the free tail, for use as the bump window.
    /// Allocates the memory lazily; a zero-size buffer yields an empty window.
    pub(crate) fn tail(
        &mut self,
        carver: &mut Carver,
    ) -> Result<(NonNull<u8>, NonNull<u8>), AllocError> {
        let Some(base) = self.memory(carver)? else {
            return Ok((NonNull::dangling(), NonNull::dangling()));
        };
        // SAFETY: `used <= size` and `size` is the allocation's length, so both
        // pointers are inside the allocation or one past its end.
        unsafe { Ok((base.add(self.used), base.add(self.size))) }
    }

    /// Records the bump position `pos` (from the window) as this buffer's
    /// `used` offset and returns the new offset.
    pub(crate) fn sync_used(&mut self, pos: NonNull<u8>) -> usize {
        if let Some(base) = self.memory {
            self.used = pos.as_ptr().addr() - base.as_ptr().addr();
        }
        self.used
    }

    /// Zeroes the used prefix (once) and rewinds to an empty buffer.
    pub(crate) fn rewind_zeroed(&mut self) {
        if let Some(base) = self.memory {
            // SAFETY: `used <= size`, the allocation is `size` bytes long and
            // owned by this buffer; the caller holds `&mut`, so nothing else
            // references it (the arena only rewinds through `&mut self`).
            unsafe { ptr::write_bytes(base.as_ptr(), 0, self.used) };
        }
        self.used = 0;
    }

    /// Forgets the memory, freeing the slab this buffer owns (the buffer
    /// keeps its size and gets memory again lazily, as go-arena's
    /// `Release`), and rewinds to empty. The arena frees all its buffers
    /// together and clears its [`Carver`], so no buffer keeps a pointer into
    /// a freed slab.
    pub(crate) fn free(&mut self) {
        if let Some(base) = self.memory.take()
            && let Some(layout) = slab_layout(std::mem::take(&mut self.owned_slab))
            && layout.size() != 0
        {
            // SAFETY: this buffer owns the slab starting at `base`: it came
            // from `alloc_zeroed` with exactly this layout (see
            // `Carver::carve`) and is freed once (`take` cleared both fields).
            unsafe { alloc::dealloc(base.as_ptr(), layout) };
        }
        self.used = 0;
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        self.free();
    }
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffer")
            .field("size", &self.size)
            .field("used", &self.used)
            .field("allocated", &self.memory.is_some())
            .finish()
    }
}

/// The bump window: free tail `[pos, end)` of the current buffer. This is
/// the whole fast path: one padding computation, two compares, one store.
/// Empty (`pos == end`, dangling) when there is no current buffer.
pub(crate) struct Window {
    pos: Cell<NonNull<u8>>,
    end: Cell<NonNull<u8>>,
}

impl Window {
    pub(crate) fn empty() -> Self {
        Window {
            pos: Cell::new(NonNull::dangling()),
            end: Cell::new(NonNull::dangling()),
        }
    }

    pub(crate) fn pos(&self) -> NonNull<u8> {
        self.pos.get()
    }

    /// Free bytes in the window.
    pub(crate) fn remaining(&self) -> usize {
        self.end.get().as_ptr().addr() - self.pos.get().as_ptr().addr()
    }

    /// Points the window at `[pos, end)` of a live buffer, or empties it.
    pub(crate) fn set(&self, (pos, end): (NonNull<u8>, NonNull<u8>)) {
        self.pos.set(pos);
        self.end.set(end);
    }

    /// Bumps `size` bytes at `align` off the window, or `None` if they do
    /// not fit.
    #[inline(always)]
    pub(crate) fn bump(&self, size: usize, align: usize) -> Option<NonNull<u8>> {
        let pos = self.pos.get();
        let addr = pos.as_ptr().addr();
        let mask = align - 1;
        // Two dependent operations from `pos` to the new `pos` when `size`
        // is a multiple of `align` (always so for a Rust type, and constant
        // folded for typed allocations): then rounding `addr + size` up is
        // the same as rounding `addr` up and adding `size`. Otherwise round
        // up, then add. `Layout` guarantees `size + mask <= isize::MAX`.
        let (start, stop) = if size & mask == 0 {
            let sum = addr.wrapping_add(size + mask);
            if sum < addr {
                return None; // wrapped around the address space
            }
            let stop = sum & !mask;
            (stop - size, stop)
        } else {
            let start = addr.wrapping_add(mask) & !mask;
            (start, start.wrapping_add(size))
        };
        if start >= addr && stop >= start && stop <= self.end.get().as_ptr().addr() {
            // SAFETY: `addr <= start <= stop <= end`, and `[pos, end)` lies
            // inside one live buffer (or is empty, then `start == stop ==
            // addr`), so both offsets stay inside that allocation or one past
            // its end.
            unsafe {
                self.pos.set(pos.add(stop - addr));
                Some(pos.add(start - addr))
            }
        } else {
            None
        }
    }

    /// Extends the block `[ptr, ptr + old_size)` to `new_size` bytes in place
    /// if it ends exactly at `pos` and the window has room; returns whether it
    /// did.
    pub(crate) fn extend_last(&self, ptr: NonNull<u8>, old_size: usize, new_size: usize) -> bool {
        let pos = self.pos.get();
        let ends_at_pos = ptr.as_ptr().addr().wrapping_add(old_size) == pos.as_ptr().addr();
        let extra = new_size - old_size;
        if old_size != 0 && ends_at_pos && extra <= self.remaining() {
            // SAFETY: `extra <= end - pos`, so the new position stays inside
            // the current buffer's allocation or one past its end.
            self.pos.set(unsafe { pos.add(extra) });
            true
        } else {
            false
        }
    }
}

impl std::fmt::Debug for Window {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Window")
            .field("remaining", &self.remaining())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arena::slab::Carver;

    fn read(ptr: NonNull<u8>, len: usize) -> Vec<u8> {
        // SAFETY (test): callers pass ranges inside a live buffer.
        unsafe { std::slice::from_raw_parts(ptr.as_ptr(), len).to_vec() }
    }

    #[test]
    fn padding_rounds_up_to_the_alignment() {
        assert_eq!(padding(0, 8), 0);
        assert_eq!(padding(1, 8), 7);
        assert_eq!(padding(17, 16), 15);
        assert_eq!(padding(4096, 4096), 0);
        assert_eq!(padding(usize::MAX, 2), 1);
    }

    #[test]
    fn memory_is_lazy_and_only_for_requests_that_can_fit() {
        let mut carver = Carver::default();
        let mut buffer = Buffer::lazy(64);
        assert!(buffer.memory.is_none());
        assert!(buffer.bump(65, 1, &mut carver).unwrap().is_none());
        assert!(
            buffer.memory.is_none(),
            "a request larger than the buffer allocates nothing"
        );
        let (ptr, consumed) = buffer.bump(10, 1, &mut carver).unwrap().unwrap();
        assert_eq!((consumed, buffer.used()), (10, 10));
        assert_eq!(read(ptr, 10), [0; 10]);
        let (aligned, consumed) = buffer.bump(8, 16, &mut carver).unwrap().unwrap();
        assert_eq!(aligned.as_ptr().addr() % 16, 0);
        assert_eq!((consumed, buffer.used()), (6 + 8, 24));
        assert_eq!(buffer.room_after(40, 1), Some(0));
        assert_eq!(buffer.room_after(41, 1), None);
    }

    #[test]
    fn zero_size_buffers_own_nothing() {
        let mut carver = Carver::default();
        let mut buffer = Buffer::lazy(0);
        assert!(buffer.memory(&mut carver).unwrap().is_none());
        assert!(buffer.bump(1, 1, &mut carver).unwrap().is_none());
        let (pos, end) = buffer.tail(&mut carver).unwrap();
        assert_eq!(pos, end);
        buffer.rewind_zeroed();
        buffer.free();
    }

    #[test]
    fn rewind_zeroes_the_used_prefix_and_free_reallocates_zeroed() {
        let mut carver = Carver::default();
        let mut buffer = Buffer::allocated(32, &mut carver).unwrap();
        let (ptr, _) = buffer.bump(20, 1, &mut carver).unwrap().unwrap();
        // SAFETY (test): 20 bytes just handed out by the buffer.
        unsafe { ptr.as_ptr().write_bytes(0xFF, 20) };
        buffer.rewind_zeroed();
        assert_eq!(buffer.used(), 0);
        assert_eq!(read(ptr, 32), [0; 32]);
        buffer.bump(32, 1, &mut carver).unwrap().unwrap();
        buffer.free();
        carver.clear();
        assert_eq!((buffer.used(), buffer.size()), (0, 32));
        let (again, _) = buffer.bump(32, 1, &mut carver).unwrap().unwrap();
        assert_eq!(read(again, 32), [0; 32]);
    }

    #[test]
    fn window_bumps_inside_the_tail_and_syncs_back() {
        let mut carver = Carver::default();
        let mut buffer = Buffer::allocated(64, &mut carver).unwrap();
        buffer.bump(3, 1, &mut carver).unwrap().unwrap();
        let window = Window::empty();
        assert_eq!(window.remaining(), 0);
        assert!(window.bump(1, 1).is_none());
        window.set(buffer.tail(&mut carver).unwrap());
        assert_eq!(window.remaining(), 61);
        let a = window.bump(8, 8).unwrap();
        assert_eq!(a.as_ptr().addr() % 8, 0);
        assert!(window.bump(64, 1).is_none());
        // Size not a multiple of the alignment: the round-up-then-add path.
        let odd = window.bump(3, 16).unwrap();
        assert_eq!(odd.as_ptr().addr() % 16, 0);
        assert!(odd.as_ptr().addr() >= a.as_ptr().addr() + 8);
        let a = window.bump(8, 8).unwrap();
        assert_eq!(
            a.as_ptr().addr(),
            odd.as_ptr().addr() + 8,
            "3 bytes + 5 of padding"
        );
        assert!(window.extend_last(a, 8, 20));
        assert!(!window.extend_last(a, 8, 30), "no longer the newest end");
        let used = buffer.sync_used(window.pos());
        let base = buffer.memory.unwrap().as_ptr().addr();
        assert_eq!(used, a.as_ptr().addr() - base + 20);
        assert!(window.bump(window.remaining(), 1).is_some());
        assert_eq!(window.remaining(), 0);
        assert!(!window.extend_last(a, 20, 21));
    }
}
