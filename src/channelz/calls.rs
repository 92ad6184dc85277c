//! Call counters of a channelz server, channel or subchannel: started,
//! succeeded, failed and the last start, kept per thread slot on separate
//! cache lines so that RPCs on different cores never write the same line.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use crate::stats::counter::{shard_count, thread_slot};

/// One slot's counts, on a cache line of its own.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Shard {
    started: AtomicU64,
    succeeded: AtomicU64,
    failed: AtomicU64,
    /// Unix nanoseconds of the latest start; 0 = never.
    last_started: AtomicI64,
}

/// The call counters of one entity.
#[derive(Debug)]
pub(crate) struct CallCounters {
    shards: Box<[Shard]>,
}

/// A reading of [`CallCounters`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CallCounts {
    pub(crate) started: i64,
    pub(crate) succeeded: i64,
    pub(crate) failed: i64,
    /// Unix nanoseconds; 0 = never.
    pub(crate) last_started: i64,
}

impl CallCounters {
    pub(crate) fn new() -> Self {
        Self {
            shards: (0..shard_count()).map(|_| Shard::default()).collect(),
        }
    }

    #[inline]
    fn shard(&self) -> &Shard {
        // The shard count is a power of two.
        &self.shards[thread_slot() & (self.shards.len() - 1)]
    }

    /// A call started at `unix_nanos`.
    #[inline]
    pub(crate) fn started(&self, unix_nanos: i64) {
        let shard = self.shard();
        shard.started.fetch_add(1, Ordering::Relaxed);
        shard.last_started.fetch_max(unix_nanos, Ordering::Relaxed);
    }

    /// A call ended, with status OK or not.
    #[inline]
    pub(crate) fn ended(&self, ok: bool) {
        let shard = self.shard();
        let counter = if ok { &shard.succeeded } else { &shard.failed };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn read(&self) -> CallCounts {
        let mut counts = CallCounts::default();
        for shard in &*self.shards {
            let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed) as i64;
            counts.started = counts.started.wrapping_add(load(&shard.started));
            counts.succeeded = counts.succeeded.wrapping_add(load(&shard.succeeded));
            counts.failed = counts.failed.wrapping_add(load(&shard.failed));
            counts.last_started = counts
                .last_started
                .max(shard.last_started.load(Ordering::Relaxed));
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_from_many_threads_all_count_and_the_latest_start_wins() {
        let counters = CallCounters::new();
        std::thread::scope(|scope| {
            for thread in 0..4_i64 {
                let counters = &counters;
                scope.spawn(move || {
                    for call in 0..1_000 {
                        counters.started(thread * 10_000 + call + 1);
                        counters.ended(call % 4 != 0);
                    }
                });
            }
        });
        let counts = counters.read();
        assert_eq!(counts.started, 4_000);
        assert_eq!(counts.succeeded, 3_000);
        assert_eq!(counts.failed, 1_000);
        assert_eq!(counts.last_started, 31_000);
    }
}
