//! Low-waste mode: O(1) allocation that does not abandon free tail space.
//!
//! The cursor walk leaves whatever is free at the end of a buffer behind as
//! soon as one request does not fit there (4.16 % of the capacity for sizes
//! uniform in [8, 512) into 4 KiB buffers, 29.2 % for a bimodal mix). This
//! mode keeps the bump window as the fast path and changes only the slow
//! path, which runs when a request does not fit the current buffer:
//!
//! 1. **Partials.** Up to 8 partly filled buffers are kept
//!    aside; the one that fits the request most tightly (best fit) takes it.
//!    A buffer drops out once less than 8 bytes are left.
//! 2. **Oversize requests** (more than half of `min_buffer_size`) get a
//!    dedicated buffer of exactly the needed size; the current buffer stays
//!    current, so one big request no longer strands a nearly empty buffer.
//! 3. **Growth.** Otherwise a new buffer takes the request. If the current
//!    buffer still has at least `min_buffer_size / 16` bytes free it stays
//!    current and the new one joins the partials; else the new one becomes
//!    current and the old one joins the partials.
//!
//! Each slow path looks at no more than 8 partials and
//! 8 unused buffers, so allocation stays O(1). Joining a full
//! partial set evicts the buffer with the least free space (that space is
//! the only waste left). After a reset, buffers are reused in order; one too
//! small for a request is swapped behind the others rather than skipped for
//! the rest of the cycle.
//!
//! # Trade-off, measured
//!
//! On go-arena's replay workloads (100 000 allocations, 4 KiB buffers; see
//! `src/arena/replay.rs`, feature `bench-internals`, and
//! `tests/arena/arena_replay.rs`), slack is
//! `(cap - len) / cap`:
//!
//! | workload | cursor (default) | first fit (go-arena v1.2.0) | low-waste |
//! |---|---|---|---|
//! | mixed [8, 512) | 4.19 % | 0.15 % | 0.61 % |
//! | bimodal | 28.7 % | 0.09 % | 0.02 % |
//!
//! The fast path is unchanged. About one allocation in four (mixed) takes
//! the slow path, which scans at most eight cached partials. Counting the
//! allocations alone that is about 3x the cursor's time (0.67 ms against
//! 0.23 ms for the mixed replay); a whole warm replay (allocations plus the
//! reset that zeroes them, as a pooled arena runs) measured 3.1 ms against
//! 2.2 ms for mixed (1.4x) and 4.8 ms against 10.1 ms for bimodal (0.5x).
//! It needs fewer buffers (6 469 against 6 710 for mixed; 7 143 against
//! 12 500 for bimodal); with buffers carved from slabs a new buffer is
//! cheap, so a cold replay costs about the same in both modes (1.4 ms
//! against 1.2 ms for mixed; 1.7 ms against 2.2 ms for bimodal). Use it when memory
//! matters more than the last nanosecond, or when request sizes are
//! bimodal.

use std::ptr::NonNull;

use super::AllocError;
use super::buffer::{BUFFER_ALIGN, Buffer, Window, buffer_size, padding};
use super::state::State;

/// How many partly filled buffers are kept aside.
pub(crate) const PARTIAL_SLOTS: usize = 8;
/// A partly filled buffer with less free space than this is retired.
pub(crate) const MIN_KEPT_TAIL: usize = 8;
/// How many unused buffers a reused arena inspects before growing.
pub(crate) const FRESH_SEARCH: usize = 8;

/// A partly filled buffer: its index and the address range of its free
/// tail, cached so that a best-fit scan touches only this array.
#[derive(Debug, Default, Clone, Copy)]
struct Slot {
    index: usize,
    next: usize,
    end: usize,
}

impl Slot {
    /// Free bytes left after placing `size` bytes at `align`, if they fit.
    #[inline]
    fn room_after(&self, size: usize, align: usize) -> Option<usize> {
        let pad = padding(self.next, align);
        (self.end - self.next).checked_sub(pad)?.checked_sub(size)
    }
}

/// A fixed-size set of partly filled buffers (no heap allocation).
#[derive(Debug, Default)]
pub(crate) struct Partials {
    slots: [Slot; PARTIAL_SLOTS],
    len: usize,
}

impl Partials {
    pub(crate) fn clear(&mut self) {
        self.len = 0;
    }

    fn slots(&self) -> &[Slot] {
        &self.slots[..self.len]
    }

    fn remove(&mut self, slot: usize) {
        self.len -= 1;
        self.slots[slot] = self.slots[self.len];
    }

    /// The slot that has the least room left after taking the request, if
    /// any can take it.
    fn best_fit(&self, size: usize, align: usize) -> Option<usize> {
        let mut best: Option<(usize, usize)> = None;
        for (slot, partial) in self.slots().iter().enumerate() {
            if let Some(room) = partial.room_after(size, align)
                && best.is_none_or(|(_, least)| room < least)
            {
                best = Some((slot, room));
            }
        }
        best.map(|(slot, _)| slot)
    }

    /// Keeps buffer `i` aside if it has a useful tail, evicting the partial
    /// with the least free space when the set is full.
    fn offer(&mut self, buffers: &[Buffer], i: usize) {
        let Some((next, end)) = buffers[i].free_range() else {
            return;
        };
        let room = end - next;
        if room < MIN_KEPT_TAIL {
            return;
        }
        let slot = Slot {
            index: i,
            next,
            end,
        };
        if self.len < PARTIAL_SLOTS {
            self.slots[self.len] = slot;
            self.len += 1;
            return;
        }
        let (least_slot, least) = self
            .slots()
            .iter()
            .enumerate()
            .map(|(n, s)| (n, s.end - s.next))
            .min_by_key(|&(_, room)| room)
            .unwrap_or((0, usize::MAX));
        if least < room {
            self.slots[least_slot] = slot;
        }
    }
}

impl State {
    /// The low-waste slow path (see the module docs).
    pub(crate) fn alloc_low_waste(
        &mut self,
        window: &Window,
        size: usize,
        align: usize,
    ) -> Result<NonNull<u8>, AllocError> {
        if let Some(slot) = self.partials.best_fit(size, align) {
            let i = self.partials.slots[slot].index;
            let ptr = self.bump_in(i, size, align)?;
            match self.buffers[i].free_range() {
                Some((next, end)) if end - next >= MIN_KEPT_TAIL => {
                    self.partials.slots[slot].next = next;
                }
                _ => self.partials.remove(slot),
            }
            return ptr.ok_or(AllocError::SizeOverflow { size, align });
        }
        let exact = exact_size(size, align)?;
        let min = self.config.min_buffer_size;
        if exact > min / 2 {
            let i = self.take_fresh(exact)?;
            let ptr = self.bump_in(i, size, align)?;
            self.partials.offer(&self.buffers, i);
            return ptr.ok_or(AllocError::SizeOverflow { size, align });
        }
        let i = self.take_fresh(exact.max(min))?;
        let keep_current = self.current.is_some() && window.remaining() >= min / 16;
        if keep_current {
            let ptr = self.bump_in(i, size, align)?;
            self.partials.offer(&self.buffers, i);
            return ptr.ok_or(AllocError::SizeOverflow { size, align });
        }
        if let Some(c) = self.current {
            self.close_window(window);
            self.partials.offer(&self.buffers, c);
        }
        self.cursor = i;
        self.open_window(window, i)?;
        window
            .bump(size, align)
            .ok_or(AllocError::SizeOverflow { size, align })
    }

    /// An unused buffer of at least `size` bytes with its memory allocated,
    /// moved to index `next_fresh` (so that every index below it is in use
    /// and the current buffer and partials keep their indices).
    fn take_fresh(&mut self, size: usize) -> Result<usize, AllocError> {
        let first = self.next_fresh;
        let last = self.buffers.len().min(first + FRESH_SEARCH);
        let found = (first..last).find(|&j| self.buffers[j].size() >= size);
        let j = match found {
            Some(j) => {
                self.buffers[j].memory(&mut self.carver)?;
                j
            }
            None => self.push_buffer(size)?,
        };
        self.buffers.swap(first, j);
        self.next_fresh += 1;
        Ok(first)
    }
}

/// Bytes a dedicated buffer needs so that `size` bytes at `align` fit
/// whatever its base address: buffers are `BUFFER_ALIGN`-aligned, so only a
/// larger alignment needs slack.
fn exact_size(size: usize, align: usize) -> Result<usize, AllocError> {
    let slack = if align > BUFFER_ALIGN { align - 1 } else { 0 };
    buffer_size(size, slack, align)
}
