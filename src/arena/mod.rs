//! A cursor-tracked monotonic arena with wundergraph go-arena's semantics.
//!
//! [`MonotonicArena`] hands out zeroed memory from a list of heap buffers.
//! Like go-arena v1.3.0 it remembers the buffer that served the last
//! allocation (the *cursor*) and starts the next walk there instead of at
//! buffer 0, so an allocation costs the same with 10 or 1 000 full buffers
//! behind it. The fast path is a bump inside the current buffer: one
//! alignment computation, two compares and a store, with no zeroing (buffers
//! are zeroed when created and on [`reset`](MonotonicArena::reset)) and no
//! bookkeeping (`peak` is folded in lazily).
//!
//! Semantics kept from go-arena:
//! - buffers of at least `min_buffer_size` (default 32 KiB), created lazily,
//!   `initial_buffer_count` of them up front (default 1); a request that fits
//!   no buffer gets a new one of `max(min_buffer_size, size + align - 1)`;
//! - the walk starts at the cursor; the cursor moves on a hit in a later
//!   buffer and on growth; `reset` and `release` rewind it to 0;
//! - memory handed out is zeroed;
//! - [`len`](MonotonicArena::len) (bytes handed out, padding included),
//!   [`cap`](MonotonicArena::cap) (sum of buffer sizes),
//!   [`peak`](MonotonicArena::peak) (high-water mark of `len`, kept across
//!   resets).
//!
//! Memory behind the buffers: consecutive buffers are carved from larger
//! zeroed *slabs* taken with `alloc_zeroed`, the first exactly one buffer,
//! each next one twice the last, up to 4 MiB; a buffer over 1 MiB gets a
//! slab of its own. A buffer never straddles two slabs. This makes a new
//! buffer cost a pointer bump instead of a `calloc` (which `memset`s recycled
//! heap chunks): a cold replay of 6 700 4 KiB buffers went from 18 ms to
//! 1.2 ms. The trade-off is *reserved* memory versus *touched* memory:
//! - reserved (virtual) memory can exceed [`cap`](MonotonicArena::cap) by
//!   the newest slab's uncarved tail (less than the slab, at most 4 MiB)
//!   plus the tails left when a buffer did not fit its slab's rest;
//! - touched (resident) memory is what was handed out: large slabs come from
//!   `mmap` on common allocators, already zero and faulted in page by page
//!   on first write, and `reset` zeroes only used prefixes;
//! - [`release`](MonotonicArena::release) and drop free every slab; an arena
//!   that only ever needs one buffer still makes a single allocation of that
//!   buffer's size.
//!
//! Rust soundness: allocation takes `&self` and returns references tied to
//! that borrow; `reset` and `release` take `&mut self`, so the borrow checker
//! rules out any reference outliving a reset. The arena is `Send` but not
//! `Sync`. **Values placed in the arena are never dropped** (as in bumpalo):
//! their memory is reclaimed wholesale, their `Drop` does not run.
//!
//! ```compile_fail
//! # use tonic_hotpath::arena::MonotonicArena;
//! let mut arena = MonotonicArena::new();
//! let value = arena.alloc(1u64);
//! arena.reset(); // error: `arena` is still borrowed by `value`
//! assert_eq!(*value, 0);
//! ```
//!
//! ```compile_fail
//! # use tonic_hotpath::arena::MonotonicArena;
//! fn shared_between_threads<T: Sync>(_: &T) {}
//! shared_between_threads(&MonotonicArena::new()); // error: not `Sync`
//! ```
//!
//! Opt-in [low-waste mode](MonotonicArenaBuilder::low_waste) keeps O(1)
//! allocation but stops abandoning the free tail of a buffer when one
//! request does not fit; see [`low_waste`] for the policy and trade-off.
//!
//! Also here: an [`Allocator`] for `&MonotonicArena` (so a
//! [`Vec<T, &MonotonicArena>`](Vec) works and grows in place), a [`ByteBuffer`] implementing `io::Write` and
//! `fmt::Write`, and an [`ArenaPool`] that sizes arenas from their recorded
//! peak per use case. go-arena's replay workloads for measuring slack, and
//! its v1.2.0 scan-from-zero walk, are behind the `bench-internals`
//! feature, for the crate's own benches and tests.
//!
//! ```
//! use tonic_hotpath::arena::MonotonicArena;
//!
//! let mut arena = MonotonicArena::builder().min_buffer_size(4096).build();
//! let answer: &mut u64 = arena.alloc(41);
//! *answer += 1;
//! let name = arena.alloc_str("tenant-a")?;
//! assert_eq!((*answer, &*name), (42, "tenant-a"));
//! assert_eq!(arena.len(), 16); // 8 + 8 bytes, no padding needed
//!
//! arena.reset(); // zeroes the used prefix, keeps the buffer
//! assert_eq!((arena.len(), arena.cap(), arena.peak()), (0, 4096, 16));
//! # Ok::<(), tonic_hotpath::arena::AllocError>(())
//! ```

mod allocator;
mod buffer;
mod bytes_buffer;
mod error;
pub mod low_waste;
mod pool;
#[cfg(feature = "bench-internals")]
#[doc(hidden)]
pub mod replay;
mod slab;
mod state;
mod typed;

use std::alloc::Layout;
use std::cell::UnsafeCell;
use std::fmt;
use std::ptr::NonNull;

/// `allocator_api2`'s allocator trait (0.2, the stable stand-in for
/// `std`'s unstable one), which `&MonotonicArena` implements. Re-exported
/// because a user needs it to use the arena as an allocator: to name it in
/// a bound (`A: Allocator`) or call [`allocate`](Allocator::allocate)
/// directly, with the same version the arena implements.
pub use allocator_api2::alloc::Allocator;
/// `allocator_api2`'s `Vec`, which takes an allocator
/// (`Vec::new_in(&arena)`); `std`'s cannot on stable Rust. Re-exported
/// because a user needs it to build a vector in the arena, and it must be
/// the version whose [`Allocator`] the arena implements. (Its other
/// collections: depend on `allocator-api2 = "0.2"`.)
pub use allocator_api2::vec::Vec;
pub use bytes_buffer::ByteBuffer;
pub use error::AllocError;
pub use pool::{ArenaPool, PooledArena};

use buffer::Window;
use state::State;

/// Moved to [`MonotonicArena::DEFAULT_MIN_BUFFER_SIZE`].
#[deprecated(note = "use `MonotonicArena::DEFAULT_MIN_BUFFER_SIZE`")]
pub const DEFAULT_MIN_BUFFER_SIZE: usize = MonotonicArena::DEFAULT_MIN_BUFFER_SIZE;
/// Renamed [`ArenaPool::DEFAULT_BUFFER_SIZE`].
#[deprecated(note = "use `ArenaPool::DEFAULT_BUFFER_SIZE`")]
pub const DEFAULT_POOLED_BUFFER_SIZE: usize = ArenaPool::DEFAULT_BUFFER_SIZE;
/// Renamed [`ArenaPool::MIN_BUFFER_SIZE`].
#[deprecated(note = "use `ArenaPool::MIN_BUFFER_SIZE`")]
pub const MIN_POOLED_BUFFER_SIZE: usize = ArenaPool::MIN_BUFFER_SIZE;
/// Moved to [`ArenaPool::DEFAULT_MAX_IDLE`].
#[deprecated(note = "use `ArenaPool::DEFAULT_MAX_IDLE`")]
pub const DEFAULT_MAX_IDLE: usize = ArenaPool::DEFAULT_MAX_IDLE;

/// How the slow path finds room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Policy {
    /// go-arena v1.3.0: forward-only cursor.
    Cursor,
    /// Cursor fast path plus partials and dedicated oversize buffers.
    LowWaste,
    /// go-arena v1.2.0: first fit from buffer 0 on every allocation.
    #[cfg(feature = "bench-internals")]
    ScanFromZero,
}

/// Arena configuration, fixed at build time.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Config {
    pub(crate) min_buffer_size: usize,
    pub(crate) initial_buffer_count: usize,
    pub(crate) policy: Policy,
}

/// Builds a [`MonotonicArena`]; defaults are go-arena's (32 KiB buffers, one
/// created up front, cursor walk).
///
/// ```
/// use tonic_hotpath::arena::MonotonicArena;
///
/// let arena = MonotonicArena::builder()
///     .min_buffer_size(1024)
///     .initial_buffer_count(3)
///     .low_waste(true)
///     .build();
/// assert_eq!((arena.cap(), arena.buffer_count()), (3072, 3));
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct MonotonicArenaBuilder {
    config: Config,
}

impl Default for MonotonicArenaBuilder {
    fn default() -> Self {
        MonotonicArenaBuilder {
            config: Config {
                min_buffer_size: MonotonicArena::DEFAULT_MIN_BUFFER_SIZE,
                initial_buffer_count: 1,
                policy: Policy::Cursor,
            },
        }
    }
}

impl MonotonicArenaBuilder {
    /// Minimum size of every buffer, in bytes (default 32 KiB). Zero is
    /// allowed: each request then gets a buffer of its own size.
    pub fn min_buffer_size(mut self, bytes: usize) -> Self {
        self.config.min_buffer_size = bytes;
        self
    }

    /// Buffers created up front (default 1). Their memory is allocated on
    /// first use.
    pub fn initial_buffer_count(mut self, count: usize) -> Self {
        self.config.initial_buffer_count = count;
        self
    }

    /// Low-waste mode (default off = go-arena's exact behaviour): partly
    /// filled buffers and dedicated buffers for oversize requests keep the
    /// free tail space in use; see [`low_waste`].
    pub fn low_waste(mut self, on: bool) -> Self {
        self.config.policy = if on { Policy::LowWaste } else { Policy::Cursor };
        self
    }

    /// go-arena v1.2.0's walk from buffer 0 on every allocation, for benches
    /// and the first-fit slack comparison only. O(buffers) per allocation.
    #[cfg(feature = "bench-internals")]
    #[cfg_attr(docsrs, doc(cfg(feature = "bench-internals")))]
    pub fn scan_from_zero(mut self, on: bool) -> Self {
        self.config.policy = if on {
            Policy::ScanFromZero
        } else {
            Policy::Cursor
        };
        self
    }

    /// Creates the arena. Allocates only the buffer list, not the buffers.
    pub fn build(self) -> MonotonicArena {
        MonotonicArena {
            window: Window::empty(),
            state: UnsafeCell::new(State::new(self.config)),
        }
    }
}

/// A monotonic (bump) arena with go-arena's cursor semantics; see the
/// [module docs](self).
///
/// Allocate through `&self` ([`alloc`](Self::alloc),
/// [`alloc_layout`](Self::alloc_layout), the slice and `str` methods, or
/// `&MonotonicArena` as an [`Allocator`]); free everything at
/// once with [`reset`](Self::reset) (keeps the buffers) or
/// [`release`](Self::release) (frees their memory). Values are not dropped.
///
/// ```
/// use tonic_hotpath::arena::{ByteBuffer, MonotonicArena, Vec};
///
/// let mut arena = MonotonicArena::builder().min_buffer_size(1024).build();
/// for request in 0..3u32 {
///     // Everything one request needs comes from the arena...
///     let ids = arena.alloc_slice_fill_with(4, |i| request * 10 + i as u32)?;
///     let mut names: Vec<&str, &MonotonicArena> = Vec::new_in(&arena);
///     names.push(arena.alloc_str("tenant-a")?);
///     let mut body = ByteBuffer::new(&arena);
///     std::io::Write::write_all(&mut body, b"{\"ok\":true}")?;
///     assert_eq!((ids[3], names[0], body.len()), (request * 10 + 3, "tenant-a", 11));
///     // ...and goes back in one step, keeping the buffer for the next one.
///     drop((ids, names, body));
///     arena.reset();
/// }
/// assert_eq!((arena.len(), arena.cap(), arena.buffer_count()), (0, 1024, 1));
/// assert!(arena.peak() > 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct MonotonicArena {
    /// Free tail of the current buffer: the fast path.
    window: Window,
    /// Everything else. Accessed only inside one method call at a time,
    /// never across a call into user code, and the arena is not `Sync`.
    state: UnsafeCell<State>,
}

// SAFETY: the arena exclusively owns its buffers' heap memory (raw pointers
// are used only because the memory is shared with the references it hands
// out); those references borrow the arena, so none can cross to another
// thread while the arena moves. Nothing is thread-local. It stays `!Sync`
// through `Cell`/`UnsafeCell`.
unsafe impl Send for MonotonicArena {}

impl Default for MonotonicArena {
    fn default() -> Self {
        MonotonicArena::new()
    }
}

impl fmt::Debug for MonotonicArena {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MonotonicArena")
            .field("len", &self.len())
            .field("cap", &self.cap())
            .field("peak", &self.peak())
            .field("buffers", &self.buffer_count())
            .field("cursor", &self.cursor())
            .finish()
    }
}

impl MonotonicArena {
    /// go-arena's default minimum buffer size: 32 KiB
    /// ([`MonotonicArenaBuilder::min_buffer_size`]).
    ///
    /// ```
    /// use tonic_hotpath::arena::MonotonicArena;
    ///
    /// let arena = MonotonicArena::new();
    /// arena.alloc(1u8);
    /// assert_eq!(arena.cap(), MonotonicArena::DEFAULT_MIN_BUFFER_SIZE);
    /// ```
    pub const DEFAULT_MIN_BUFFER_SIZE: usize = 32 * 1024;

    /// An arena with go-arena's defaults: 32 KiB buffers, one up front.
    pub fn new() -> Self {
        MonotonicArena::builder().build()
    }

    /// A builder for a configured arena.
    pub fn builder() -> MonotonicArenaBuilder {
        MonotonicArenaBuilder::default()
    }

    fn state(&self) -> &State {
        // SAFETY: `&mut State` exists only inside `state_mut` callers, which
        // never call back into user code or into another arena method that
        // reads the state; the arena is `!Sync`, so no other thread can
        // hold one either.
        unsafe { &*self.state.get() }
    }

    #[allow(clippy::mut_from_ref)]
    fn state_mut(&self) -> &mut State {
        // SAFETY: see `state`; each caller uses the `&mut` for the duration
        // of one non-reentrant slow-path call and drops it before returning.
        unsafe { &mut *self.state.get() }
    }

    /// Allocates `layout.size()` zeroed bytes aligned to `layout.align()`.
    ///
    /// The memory stays valid until the next [`reset`](Self::reset) or
    /// [`release`](Self::release) (both need `&mut self`) or the arena's drop.
    /// A zero-size request returns a dangling, well-aligned pointer and
    /// leaves the arena untouched. Errors (the arena unchanged): the new
    /// buffer's size overflows, or the global allocator fails.
    ///
    /// ```
    /// use std::alloc::Layout;
    /// use tonic_hotpath::arena::MonotonicArena;
    ///
    /// let arena = MonotonicArena::new();
    /// let ptr = arena.alloc_layout(Layout::from_size_align(24, 64).unwrap())?;
    /// assert_eq!(ptr.as_ptr() as usize % 64, 0);
    /// # Ok::<(), tonic_hotpath::arena::AllocError>(())
    /// ```
    #[inline(always)]
    pub fn alloc_layout(&self, layout: Layout) -> Result<NonNull<u8>, AllocError> {
        if layout.size() == 0 {
            return Ok(dangling_aligned(layout.align()));
        }
        match self.window.bump(layout.size(), layout.align()) {
            Some(ptr) => Ok(ptr),
            None => self.alloc_slow(layout),
        }
    }

    #[cold]
    #[inline(never)]
    fn alloc_slow(&self, layout: Layout) -> Result<NonNull<u8>, AllocError> {
        let (size, align) = (layout.size(), layout.align());
        let state = self.state_mut();
        match state.config.policy {
            Policy::Cursor => state.alloc_cursor(&self.window, size, align),
            Policy::LowWaste => state.alloc_low_waste(&self.window, size, align),
            #[cfg(feature = "bench-internals")]
            Policy::ScanFromZero => state.alloc_scan(size, align),
        }
    }

    /// Makes every buffer empty again: zeroes the used prefix of each buffer
    /// once, keeps the buffers, rewinds the cursor to 0. `peak` is kept.
    pub fn reset(&mut self) {
        self.state.get_mut().rewind(&self.window, false);
    }

    /// Like [`reset`](Self::reset), but frees the buffers' memory instead of
    /// zeroing it. The buffers stay listed (so [`cap`](Self::cap) and
    /// [`buffer_count`](Self::buffer_count) are unchanged, as in go-arena)
    /// and get fresh zeroed memory on their next use.
    pub fn release(&mut self) {
        self.state.get_mut().rewind(&self.window, true);
    }

    /// Bytes handed out since the last reset, alignment padding included.
    pub fn len(&self) -> usize {
        self.state().len(&self.window)
    }

    /// Whether nothing has been handed out since the last reset.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sum of all buffer sizes, in bytes.
    pub fn cap(&self) -> usize {
        self.state().capacity
    }

    /// High-water mark of [`len`](Self::len) over the arena's life, kept
    /// across [`reset`](Self::reset) and [`release`](Self::release).
    pub fn peak(&self) -> usize {
        self.state().peak.max(self.len())
    }

    /// Number of buffers (with or without memory).
    pub fn buffer_count(&self) -> usize {
        self.state().buffers.len()
    }

    /// Index of the buffer the next walk starts at (go-arena's cursor). In
    /// low-waste mode: the index of the current (bump) buffer.
    pub fn cursor(&self) -> usize {
        self.state().cursor
    }

    /// Whether low-waste mode is on.
    pub fn is_low_waste(&self) -> bool {
        self.state().config.policy == Policy::LowWaste
    }

    /// Configured minimum buffer size, in bytes.
    pub fn min_buffer_size(&self) -> usize {
        self.state().config.min_buffer_size
    }

    /// Restarts the peak from the current `len` (used by the pool, so that
    /// each loan reports its own peak).
    pub(crate) fn forget_peak(&mut self) {
        let len = self.len();
        self.state.get_mut().peak = len;
    }

    /// Tries to extend the newest allocation in the current buffer in place.
    pub(crate) fn extend_last(&self, ptr: NonNull<u8>, old_size: usize, new_size: usize) -> bool {
        self.window.extend_last(ptr, old_size, new_size)
    }
}

/// A non-null pointer aligned to `align` that owns nothing: the answer to a
/// zero-size request.
fn dangling_aligned(align: usize) -> NonNull<u8> {
    NonNull::new(std::ptr::without_provenance_mut(align)).unwrap_or(NonNull::dangling())
}
