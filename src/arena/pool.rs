//! A thread-safe pool of arenas that learns, per use case, how big a new
//! arena's buffers should be (go-arena's `Pool`).

use std::collections::HashMap;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::{Mutex, MutexGuard};

use super::{MonotonicArena, MonotonicArenaBuilder};

/// go-arena averages the peaks of the last 50 uses of a key.
const PEAK_WINDOW: usize = 50;

/// A pool of [`MonotonicArena`]s keyed by use case (a `u64`, as go-arena).
///
/// [`acquire`](Self::acquire) hands out an idle arena, or builds a new one
/// whose `min_buffer_size` is the average peak recorded for that key (so one
/// buffer usually holds a whole request). The returned [`PooledArena`] guard
/// gives the arena back on drop: its peak is recorded for the key, it is
/// reset (used bytes zeroed, buffers kept) and parked for the next acquire.
///
/// ```
/// use tonic_hotpath::arena::ArenaPool;
///
/// const RENDER_RESPONSE: u64 = 1;
/// let pool = ArenaPool::new();
/// {
///     let arena = pool.acquire(RENDER_RESPONSE);
///     arena.alloc_slice_fill_with(10_000, |_| 0u8)?;
/// } // returned: peak recorded, arena reset and parked
/// assert_eq!(pool.size_for(RENDER_RESPONSE), 10_000);
/// assert_eq!(pool.idle_count(), 1);
/// # Ok::<(), tonic_hotpath::arena::AllocError>(())
/// ```
pub struct ArenaPool {
    template: MonotonicArenaBuilder,
    max_idle: usize,
    shared: Mutex<Shared>,
}

#[derive(Default)]
struct Shared {
    idle: Vec<MonotonicArena>,
    peaks: HashMap<u64, PeakAverage>,
}

/// go-arena's running average: after 50 samples the total collapses to one
/// averaged sample, so old peaks fade out.
#[derive(Debug, Clone, Copy)]
struct PeakAverage {
    count: usize,
    total: usize,
}

impl PeakAverage {
    fn record(&mut self, peak: usize) {
        if self.count == PEAK_WINDOW {
            self.count = 1;
            self.total /= PEAK_WINDOW;
        }
        self.count += 1;
        self.total = self.total.saturating_add(peak);
    }

    fn average(&self) -> usize {
        self.total / self.count
    }
}

impl Default for ArenaPool {
    fn default() -> Self {
        ArenaPool::new()
    }
}

impl fmt::Debug for ArenaPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ArenaPool")
            .field("idle", &self.idle_count())
            .field("max_idle", &self.max_idle)
            .finish()
    }
}

impl ArenaPool {
    /// Buffer size for a new arena when its use case has no recorded peak
    /// yet (go-arena's default: 1 MiB).
    ///
    /// ```
    /// use tonic_hotpath::arena::ArenaPool;
    ///
    /// assert_eq!(ArenaPool::new().size_for(7), ArenaPool::DEFAULT_BUFFER_SIZE);
    /// ```
    pub const DEFAULT_BUFFER_SIZE: usize = 1024 * 1024;
    /// Smallest buffer size the pool derives from a recorded peak.
    pub const MIN_BUFFER_SIZE: usize = 4 * 1024;
    /// How many returned arenas the pool keeps by default
    /// ([`max_idle`](Self::max_idle)); more are dropped.
    pub const DEFAULT_MAX_IDLE: usize = 64;

    /// A pool of default arenas (cursor mode, one initial buffer).
    pub fn new() -> Self {
        ArenaPool::with_builder(MonotonicArena::builder())
    }

    /// A pool whose new arenas are built from `template` (its
    /// `min_buffer_size` is replaced by the size learnt for the key).
    pub fn with_builder(template: MonotonicArenaBuilder) -> Self {
        ArenaPool {
            template,
            max_idle: Self::DEFAULT_MAX_IDLE,
            shared: Mutex::new(Shared::default()),
        }
    }

    /// Keeps at most `max_idle` returned arenas (default 64); arenas
    /// returned beyond that are dropped, freeing their memory.
    pub fn max_idle(mut self, max_idle: usize) -> Self {
        self.max_idle = max_idle;
        self
    }

    fn shared(&self) -> MutexGuard<'_, Shared> {
        // A panic while holding the lock cannot leave `Shared` inconsistent
        // (every update is a single push, pop or insert), so keep going.
        self.shared
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// An arena for use case `key`: an idle one if any, else a new one sized
    /// by [`size_for`](Self::size_for).
    pub fn acquire(&self, key: u64) -> PooledArena<'_> {
        let (idle, size) = {
            let mut shared = self.shared();
            let idle = shared.idle.pop();
            let size = shared.peaks.get(&key).map(PeakAverage::average);
            (idle, size)
        };
        let arena = idle.unwrap_or_else(|| {
            let size = size.map_or(Self::DEFAULT_BUFFER_SIZE, |s| s.max(Self::MIN_BUFFER_SIZE));
            self.template.clone().min_buffer_size(size).build()
        });
        PooledArena {
            pool: self,
            key,
            arena,
        }
    }

    /// The average recorded peak for `key` (bytes), or
    /// [`DEFAULT_BUFFER_SIZE`](Self::DEFAULT_BUFFER_SIZE) if none was recorded.
    pub fn size_for(&self, key: u64) -> usize {
        self.shared()
            .peaks
            .get(&key)
            .map_or(Self::DEFAULT_BUFFER_SIZE, PeakAverage::average)
    }

    /// Arenas parked in the pool.
    pub fn idle_count(&self) -> usize {
        self.shared().idle.len()
    }

    fn give_back(&self, key: u64, peak: usize, arena: MonotonicArena) {
        let mut shared = self.shared();
        shared
            .peaks
            .entry(key)
            .and_modify(|avg| avg.record(peak))
            .or_insert(PeakAverage {
                count: 1,
                total: peak,
            });
        if shared.idle.len() < self.max_idle {
            shared.idle.push(arena);
        }
    }
}

/// An arena on loan from an [`ArenaPool`]; dereferences to
/// [`MonotonicArena`] and goes back to the pool on drop.
///
/// The arena's [`peak`](MonotonicArena::peak) counts from when it was
/// acquired: that is the figure recorded for the key on return.
pub struct PooledArena<'p> {
    pool: &'p ArenaPool,
    key: u64,
    arena: MonotonicArena,
}

impl PooledArena<'_> {
    /// The use case this arena was acquired for.
    pub fn key(&self) -> u64 {
        self.key
    }
}

impl Deref for PooledArena<'_> {
    type Target = MonotonicArena;

    fn deref(&self) -> &MonotonicArena {
        &self.arena
    }
}

impl DerefMut for PooledArena<'_> {
    fn deref_mut(&mut self) -> &mut MonotonicArena {
        &mut self.arena
    }
}

impl Drop for PooledArena<'_> {
    fn drop(&mut self) {
        // An arena without buffers costs no allocation to build.
        let empty = MonotonicArena::builder().initial_buffer_count(0).build();
        let mut arena = std::mem::replace(&mut self.arena, empty);
        let peak = arena.peak();
        arena.reset();
        arena.forget_peak();
        self.pool.give_back(self.key, peak, arena);
    }
}

impl fmt::Debug for PooledArena<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PooledArena")
            .field("key", &self.key)
            .field("arena", &self.arena)
            .finish()
    }
}
