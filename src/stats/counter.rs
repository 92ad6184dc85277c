//! [`ShardedCounter`]: a counter handlers can bump on every RPC from every
//! core without making the cores wait on each other.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// One shard, alone on its cache line (128 bytes: two lines on x86, where
/// the adjacent-line prefetcher pairs them; one on most ARM cores).
#[derive(Debug, Default)]
#[repr(align(128))]
struct Shard(AtomicU64);

/// A `u64` counter split into shards on separate cache lines: each thread
/// adds to its own shard, so RPCs on different cores never contend for one
/// cache line, and [`get`](Self::get) sums the shards.
///
/// A single `AtomicU64` bumped by every RPC is a read-modify-write on one
/// cache line shared by all cores: on a server running on every core, the
/// line moves between cores on each RPC and the increments queue. A
/// handler that counts (RPCs, outcomes, bytes) should count into a
/// `ShardedCounter` instead. Adding costs one uncontended atomic add; the
/// memory is 128 bytes per shard, one shard per core (rounded up to a
/// power of two, at most 64).
///
/// ```
/// use tonic::Code;
/// use tonic_hotpath::stats::{RpcEvent, ShardedCounter, StatsHandler};
///
/// /// Counts RPCs by outcome, from every core without contention.
/// #[derive(Debug, Default)]
/// struct Outcomes {
///     ok: ShardedCounter,
///     failed: ShardedCounter,
/// }
///
/// impl StatsHandler for Outcomes {
///     type RpcState = ();
///     type ConnState = ();
///
///     fn handle_rpc(&self, _: &mut (), event: &RpcEvent<'_>) {
///         if let RpcEvent::End(end) = event {
///             let counter = if end.code == Code::Ok { &self.ok } else { &self.failed };
///             counter.add(1);
///         }
///     }
/// }
///
/// let outcomes = Outcomes::default();
/// std::thread::scope(|scope| {
///     for _ in 0..4 {
///         scope.spawn(|| (0..1000).for_each(|_| outcomes.ok.add(1)));
///     }
/// });
/// assert_eq!(outcomes.ok.get(), 4000);
/// ```
#[derive(Debug)]
pub struct ShardedCounter {
    shards: Box<[Shard]>,
}

impl Default for ShardedCounter {
    fn default() -> Self {
        Self::new()
    }
}

impl ShardedCounter {
    /// A counter at zero, with one shard per core.
    #[must_use]
    pub fn new() -> Self {
        let shards = (0..shard_count()).map(|_| Shard::default()).collect();
        Self { shards }
    }

    /// Adds `n` (wrapping at `u64::MAX`, as `AtomicU64::fetch_add`).
    #[inline]
    pub fn add(&self, n: u64) {
        // The shard count is a power of two.
        let shard = &self.shards[thread_slot() & (self.shards.len() - 1)];
        shard.0.fetch_add(n, Ordering::Relaxed);
    }

    /// The sum of everything added so far: exact once the adding threads
    /// are done, a value between the counts before and after the
    /// concurrent adds otherwise.
    pub fn get(&self) -> u64 {
        self.shards.iter().fold(0, |sum, shard| {
            sum.wrapping_add(shard.0.load(Ordering::Relaxed))
        })
    }
}

/// One shard per core, rounded up to a power of two, at most 64.
pub(crate) fn shard_count() -> usize {
    static COUNT: OnceLock<usize> = OnceLock::new();
    *COUNT.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, usize::from)
            .next_power_of_two()
            .min(64)
    })
}

/// This thread's slot: threads are numbered in the order they first add,
/// so the first threads of a process get shards of their own.
#[inline]
pub(crate) fn thread_slot() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SLOT: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    SLOT.try_with(|slot| *slot).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_sit_on_separate_cache_lines() {
        assert_eq!(std::mem::align_of::<Shard>(), 128);
        let counter = ShardedCounter::new();
        assert!(counter.shards.len().is_power_of_two());
    }

    #[test]
    fn concurrent_adds_all_count() {
        let counter = ShardedCounter::new();
        std::thread::scope(|scope| {
            for thread in 0..8 {
                let counter = &counter;
                scope.spawn(move || (0..10_000).for_each(|_| counter.add(thread + 1)));
            }
        });
        assert_eq!(counter.get(), (1..=8).map(|n| n * 10_000).sum::<u64>());
    }
}
