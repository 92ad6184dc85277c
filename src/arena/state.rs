//! Arena bookkeeping behind the bump window, and the slow paths of go-arena's
//! two walks: the forward-only cursor (v1.3.0, the default) and the
//! scan-from-zero first fit (v1.2.0, kept only for benches and the slack
//! comparison).

use std::ptr::NonNull;

use super::buffer::{Buffer, Window, buffer_size};
use super::low_waste::Partials;
use super::slab::Carver;
use super::{AllocError, Config};

/// Everything except the bump window. Only touched on the slow path and by
/// the `&self` accessors, never while a caller holds a reference into it.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) config: Config,
    pub(crate) buffers: Vec<Buffer>,
    /// Index of the buffer whose free tail is in the window, if any.
    pub(crate) current: Option<usize>,
    /// go-arena's cursor: where the next walk starts.
    pub(crate) cursor: usize,
    /// Sum of `used` over all buffers except `current`.
    pub(crate) settled: usize,
    /// Sum of buffer sizes.
    pub(crate) capacity: usize,
    /// High-water mark of `len`, folded in lazily (at reset, release, query).
    pub(crate) peak: usize,
    /// Low-waste mode: buffers at and past this index are untouched since the
    /// last reset.
    pub(crate) next_fresh: usize,
    /// Low-waste mode: partly filled buffers tried before growing.
    pub(crate) partials: Partials,
    /// Where buffers get their memory (declared after `buffers`, which own
    /// the slabs it carves from).
    pub(crate) carver: Carver,
}

impl State {
    pub(crate) fn new(config: Config) -> Self {
        let buffers: Vec<Buffer> = (0..config.initial_buffer_count)
            .map(|_| Buffer::lazy(config.min_buffer_size))
            .collect();
        State {
            capacity: config.min_buffer_size.saturating_mul(buffers.len()),
            config,
            buffers,
            current: None,
            cursor: 0,
            settled: 0,
            peak: 0,
            next_fresh: 0,
            partials: Partials::default(),
            carver: Carver::default(),
        }
    }

    /// Bytes handed out, given the window's position.
    pub(crate) fn len(&self, window: &Window) -> usize {
        match self.current {
            Some(c) => self.settled + self.window_used(c, window),
            None => self.settled,
        }
    }

    fn window_used(&self, current: usize, window: &Window) -> usize {
        let buffer = &self.buffers[current];
        buffer.size() - window.remaining()
    }

    /// Writes the window's position back into the current buffer and empties
    /// the window.
    pub(crate) fn close_window(&mut self, window: &Window) {
        if let Some(c) = self.current.take() {
            self.settled += self.buffers[c].sync_used(window.pos());
            window.set((NonNull::dangling(), NonNull::dangling()));
        }
    }

    /// Makes buffer `i` the current one: its free tail becomes the window.
    pub(crate) fn open_window(&mut self, window: &Window, i: usize) -> Result<(), AllocError> {
        self.close_window(window);
        let tail = self.buffers[i].tail(&mut self.carver)?;
        self.settled -= self.buffers[i].used();
        self.current = Some(i);
        window.set(tail);
        Ok(())
    }

    /// Bumps from buffer `i`, which must not be the current one.
    pub(crate) fn bump_in(
        &mut self,
        i: usize,
        size: usize,
        align: usize,
    ) -> Result<Option<NonNull<u8>>, AllocError> {
        debug_assert_ne!(self.current, Some(i));
        Ok(self.buffers[i]
            .bump(size, align, &mut self.carver)?
            .map(|(ptr, consumed)| {
                self.settled += consumed;
                ptr
            }))
    }

    /// Appends a new buffer with its memory allocated; nothing changes if
    /// that fails.
    pub(crate) fn push_buffer(&mut self, size: usize) -> Result<usize, AllocError> {
        let buffer = Buffer::allocated(size, &mut self.carver)?;
        self.buffers.push(buffer);
        self.capacity += size;
        Ok(self.buffers.len() - 1)
    }

    /// go-arena's growth size: `max(min_buffer_size, size + align - 1)`.
    pub(crate) fn growth_size(&self, size: usize, align: usize) -> Result<usize, AllocError> {
        Ok(buffer_size(size, align - 1, align)?.max(self.config.min_buffer_size))
    }

    /// go-arena v1.3.0: walk from the cursor, first fit; the hit becomes the
    /// current buffer and the cursor. No hit: grow, and the new buffer
    /// becomes current. Free space in skipped buffers is abandoned until
    /// the next reset.
    pub(crate) fn alloc_cursor(
        &mut self,
        window: &Window,
        size: usize,
        align: usize,
    ) -> Result<NonNull<u8>, AllocError> {
        self.close_window(window);
        for i in self.cursor..self.buffers.len() {
            if let Some(ptr) = self.bump_in(i, size, align)? {
                self.cursor = i;
                self.open_window(window, i)?;
                return Ok(ptr);
            }
        }
        let i = self.push_buffer(self.growth_size(size, align)?)?;
        let ptr = self.bump_in(i, size, align)?;
        self.cursor = i;
        self.open_window(window, i)?;
        ptr.ok_or(AllocError::SizeOverflow { size, align })
    }

    /// go-arena v1.2.0: walk every buffer from index 0 on every allocation
    /// (the window stays empty, so each call lands here). Kept to measure
    /// what the cursor saves and for the first-fit slack comparison.
    #[cfg(feature = "bench-internals")]
    pub(crate) fn alloc_scan(
        &mut self,
        size: usize,
        align: usize,
    ) -> Result<NonNull<u8>, AllocError> {
        for i in 0..self.buffers.len() {
            if let Some(ptr) = self.bump_in(i, size, align)? {
                return Ok(ptr);
            }
        }
        let i = self.push_buffer(self.growth_size(size, align)?)?;
        self.bump_in(i, size, align)?
            .ok_or(AllocError::SizeOverflow { size, align })
    }

    /// Ends the current cycle: folds `len` into `peak` and rewinds every
    /// buffer, zeroing (reset) or freeing (release) what was used.
    pub(crate) fn rewind(&mut self, window: &Window, free: bool) {
        self.close_window(window);
        self.peak = self.peak.max(self.settled);
        for buffer in &mut self.buffers {
            if free {
                buffer.free();
            } else {
                buffer.rewind_zeroed();
            }
        }
        if free {
            // Every buffer forgot its memory and the slabs are freed.
            self.carver.clear();
        }
        self.settled = 0;
        self.cursor = 0;
        self.next_fresh = 0;
        self.partials.clear();
    }
}
