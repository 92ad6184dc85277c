//! go-arena's replay workloads, to measure an arena's slack (capacity it
//! leaves unused) and whole-request allocation time the same way everywhere:
//! tests, benches and your own experiments.
//!
//! Each workload is 100 000 allocations at 8-byte alignment into 4 096-byte
//! buffers, drawn from a fixed-seed generator (SplitMix64), so every run and
//! every arena sees the same sequence.
//!
//! ```
//! use tonic_hotpath::arena::MonotonicArena;
//! use tonic_hotpath::arena::replay::{Workload, slack_percent};
//!
//! let arena = MonotonicArena::builder()
//!     .min_buffer_size(Workload::BUFFER_SIZE)
//!     .low_waste(true)
//!     .build();
//! for layout in Workload::Mixed.requests().take(10_000) {
//!     arena.alloc_layout(layout)?;
//! }
//! assert!(slack_percent(&arena) < 1.0);
//! # Ok::<(), tonic_hotpath::arena::AllocError>(())
//! ```

use std::alloc::Layout;

use super::MonotonicArena;

/// A replay workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// Sizes uniform in [8, 512).
    Mixed,
    /// Every 16th allocation 4 096 … 12 287 bytes, the rest 8 … 63.
    Bimodal,
}

impl Workload {
    /// Allocations per replay.
    pub const ALLOCATIONS: usize = 100_000;
    /// `min_buffer_size` the replays use.
    pub const BUFFER_SIZE: usize = 4096;
    /// Alignment of every request.
    pub const ALIGN: usize = 8;

    fn seed(self) -> u64 {
        match self {
            Workload::Mixed => 0x6d69_7865_6400_0001,
            Workload::Bimodal => 0x6269_6d6f_6461_6c02,
        }
    }

    /// The request sizes, [`ALLOCATIONS`](Self::ALLOCATIONS) of them.
    pub fn sizes(self) -> impl Iterator<Item = usize> {
        let mut rng = SplitMix64(self.seed());
        (0..Workload::ALLOCATIONS).map(move |n| match self {
            Workload::Mixed => rng.below(8, 512),
            Workload::Bimodal if n % 16 == 15 => rng.below(4096, 12288),
            Workload::Bimodal => rng.below(8, 64),
        })
    }

    /// The requests as layouts (8-byte aligned).
    pub fn requests(self) -> impl Iterator<Item = Layout> {
        self.sizes()
            .filter_map(|size| Layout::from_size_align(size, Workload::ALIGN).ok())
    }
}

/// Capacity the arena leaves unused, in percent:
/// `(cap - len) / cap * 100`, where `len` counts alignment padding as used
/// (go-arena's `Cap` and `Len`, as its replay tests compute it). Zero for an
/// arena without capacity.
pub fn slack_percent(arena: &MonotonicArena) -> f64 {
    let cap = arena.cap();
    if cap == 0 {
        return 0.0;
    }
    (cap - arena.len()) as f64 * 100.0 / cap as f64
}

/// SplitMix64: tiny, fast, and good enough to draw sizes from.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[low, high)`.
    fn below(&mut self, low: usize, high: usize) -> usize {
        low + (self.next() % (high - low) as u64) as usize
    }
}
