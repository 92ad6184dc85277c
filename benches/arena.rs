//! `MonotonicArena` against its baselines, each group holding ours and the
//! baselines side by side:
//!
//! - `alloc_8b_fixed/P`: 8-byte allocations after P full 1 KiB buffers, the
//!   buffer count fixed (the allocations land in one big trailing buffer):
//!   the cursor walk (default), low-waste mode, go-arena v1.2.0's scan from
//!   buffer 0, `bumpalo::Bump` (plain and with explicit zeroing, since ours
//!   hands out zeroed memory) and `Box::new`;
//! - `alloc_8b_growing/P`: the same, but the arena grows a new 1 KiB buffer
//!   every 128 allocations during the loop (go-arena's `AllocCosmoLike`);
//! - `alloc_aligned`: 16- and 64-byte aligned 24-byte allocations;
//! - `replay`: whole replays (build, 100 000 allocations, drop) of go-arena's
//!   mixed and bimodal workloads, both modes, plus bumpalo;
//! - `reset_1mib`: resetting an arena with 1 MiB used (zeroes it) against
//!   bumpalo's reset (no zeroing) and a plain 1 MiB memset.

use std::alloc::Layout;
use std::hint::black_box;
use std::time::{Duration, Instant};

use bumpalo::Bump;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use tonic_hotpath::arena::replay::Workload;
use tonic_hotpath::arena::{MonotonicArena, MonotonicArenaBuilder};

const EIGHT: Layout = Layout::new::<u64>();
const KIB: usize = 1024;
/// Allocations timed between two untimed re-preparations of the arena.
const CHUNK: u64 = 1 << 16;

#[derive(Clone, Copy)]
enum Mode {
    Cursor,
    LowWaste,
    ScanFromZero,
}

impl Mode {
    const ALL: [Mode; 3] = [Mode::Cursor, Mode::LowWaste, Mode::ScanFromZero];

    fn name(self) -> &'static str {
        match self {
            Mode::Cursor => "cursor",
            Mode::LowWaste => "low_waste",
            Mode::ScanFromZero => "scan_from_zero",
        }
    }

    fn builder(self) -> MonotonicArenaBuilder {
        let builder = MonotonicArena::builder().initial_buffer_count(0);
        match self {
            Mode::Cursor => builder,
            Mode::LowWaste => builder.low_waste(true),
            Mode::ScanFromZero => builder.scan_from_zero(true),
        }
    }
}

/// Fills `prefix` buffers of 1 KiB completely.
fn fill_prefix(arena: &MonotonicArena, prefix: usize) {
    for _ in 0..prefix {
        arena
            .alloc_layout(Layout::from_size_align(KIB, 1).unwrap())
            .unwrap();
    }
}

fn alloc_8b(arena: &mut MonotonicArena) {
    black_box(arena.alloc_layout(EIGHT).unwrap());
}

/// Times `iters` runs of `alloc`, re-preparing `state` (untimed) every
/// `chunk` runs.
fn timed_chunks<S>(
    iters: u64,
    chunk: u64,
    state: &mut S,
    mut prepare: impl FnMut(&mut S),
    mut alloc: impl FnMut(&mut S),
) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let chunk = left.min(chunk);
        prepare(state);
        let start = Instant::now();
        for _ in 0..chunk {
            alloc(state);
        }
        total += start.elapsed();
        left -= chunk;
    }
    total
}

fn bench_baselines_8b(group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>) {
    let mut bump = Bump::with_capacity(CHUNK as usize * 8);
    group.bench_function("bumpalo", |b| {
        b.iter_custom(|iters| {
            timed_chunks(iters, CHUNK, &mut bump, Bump::reset, |bump| {
                black_box(bump.alloc_layout(EIGHT));
            })
        })
    });
    group.bench_function("bumpalo_zeroed", |b| {
        b.iter_custom(|iters| {
            timed_chunks(iters, CHUNK, &mut bump, Bump::reset, |bump| {
                let ptr = bump.alloc_layout(EIGHT);
                // SAFETY: 8 bytes just allocated.
                unsafe { ptr.as_ptr().write_bytes(0, 8) };
                black_box(ptr);
            })
        })
    });
    group.bench_function("box_new", |b| {
        b.iter(|| black_box(Box::new(black_box(0u64))))
    });
}

fn alloc_8b_fixed(c: &mut Criterion) {
    let mut group = c.benchmark_group("alloc_8b_fixed");
    group.throughput(Throughput::Elements(1));
    for prefix in [10, 100, 1000] {
        for mode in Mode::ALL {
            // P full 1 KiB buffers, then one buffer of CHUNK * 8 bytes that
            // the timed allocations fill; reset + refill between chunks.
            let mut arena = mode.builder().min_buffer_size(KIB).build();
            fill_prefix(&arena, prefix);
            arena
                .alloc_layout(Layout::from_size_align(CHUNK as usize * 8, 8).unwrap())
                .unwrap();
            let buffers = arena.buffer_count();
            let prepare = |arena: &mut MonotonicArena| {
                arena.reset();
                fill_prefix(arena, prefix);
            };
            group.bench_function(BenchmarkId::new(mode.name(), prefix), |b| {
                b.iter_custom(|iters| timed_chunks(iters, CHUNK, &mut arena, prepare, alloc_8b))
            });
            assert_eq!(arena.buffer_count(), buffers, "fixed buffer count");
        }
    }
    bench_baselines_8b(&mut group);
    group.finish();
}

fn alloc_8b_growing(c: &mut Criterion) {
    let mut group = c.benchmark_group("alloc_8b_growing");
    group.throughput(Throughput::Elements(1));
    const GROWING_CHUNK: u64 = 1 << 14;
    for prefix in [10, 100, 1000] {
        for mode in Mode::ALL {
            // A new arena with P full buffers every chunk (the old one is
            // dropped untimed); the timed allocations grow it.
            let prepare = |arena: &mut MonotonicArena| {
                *arena = mode.builder().min_buffer_size(KIB).build();
                fill_prefix(arena, prefix);
            };
            let mut arena = MonotonicArena::new();
            group.bench_function(BenchmarkId::new(mode.name(), prefix), |b| {
                b.iter_custom(|iters| {
                    timed_chunks(iters, GROWING_CHUNK, &mut arena, prepare, alloc_8b)
                })
            });
        }
    }
    bench_baselines_8b(&mut group);
    group.finish();
}

fn alloc_aligned(c: &mut Criterion) {
    let mut group = c.benchmark_group("alloc_aligned");
    group.throughput(Throughput::Elements(1));
    for align in [16, 64] {
        let layout = Layout::from_size_align(24, align).unwrap();
        let mut arena = MonotonicArena::builder()
            .min_buffer_size(CHUNK as usize * 64)
            .build();
        group.bench_function(BenchmarkId::new("cursor", align), |b| {
            b.iter_custom(|iters| {
                timed_chunks(iters, CHUNK, &mut arena, MonotonicArena::reset, |arena| {
                    black_box(arena.alloc_layout(layout).unwrap());
                })
            })
        });
        let mut bump = Bump::with_capacity(CHUNK as usize * 64);
        group.bench_function(BenchmarkId::new("bumpalo", align), |b| {
            b.iter_custom(|iters| {
                timed_chunks(iters, CHUNK, &mut bump, Bump::reset, |bump| {
                    black_box(bump.alloc_layout(layout));
                })
            })
        });
    }
    group.finish();
}

/// Whole replays. Warm (the way a pooled arena is used): one arena reused,
/// each replay = 100 000 allocations + the reset that zeroes what they used.
/// Cold: build a new arena, replay, drop it (every buffer comes from the
/// global allocator and goes back, so this mostly measures page faults).
fn replay(c: &mut Criterion) {
    let mut group = c.benchmark_group("replay");
    group.sample_size(10);
    for workload in [Workload::Mixed, Workload::Bimodal] {
        let requests: Vec<Layout> = workload.requests().collect();
        let name = format!("{workload:?}").to_lowercase();
        for mode in [Mode::Cursor, Mode::LowWaste] {
            let build = || {
                mode.builder()
                    .initial_buffer_count(1)
                    .min_buffer_size(Workload::BUFFER_SIZE)
                    .build()
            };
            let run = |arena: &MonotonicArena| {
                for &layout in &requests {
                    black_box(arena.alloc_layout(layout).unwrap());
                }
            };
            let mut arena = build();
            group.bench_function(BenchmarkId::new(mode.name(), &name), |b| {
                b.iter(|| {
                    run(&arena);
                    arena.reset();
                })
            });
            let cold = format!("{}_cold", mode.name());
            group.bench_function(BenchmarkId::new(cold, &name), |b| {
                b.iter(|| {
                    let arena = build();
                    run(&arena);
                    arena
                })
            });
        }
        let run = |bump: &Bump| {
            for &layout in &requests {
                black_box(bump.alloc_layout(layout));
            }
        };
        let mut bump = Bump::new();
        group.bench_function(BenchmarkId::new("bumpalo", &name), |b| {
            b.iter(|| {
                run(&bump);
                bump.reset();
            })
        });
        group.bench_function(BenchmarkId::new("bumpalo_cold", &name), |b| {
            b.iter(|| {
                let bump = Bump::with_capacity(Workload::BUFFER_SIZE);
                run(&bump);
                bump
            })
        });
    }
    group.finish();
}

fn reset_1mib(c: &mut Criterion) {
    let mut group = c.benchmark_group("reset_1mib");
    let block = Layout::from_size_align(4 * KIB, 8).unwrap();
    let blocks = 1024 * KIB / block.size();
    let mut arena = MonotonicArena::new();
    let fill = |arena: &mut MonotonicArena| {
        for _ in 0..blocks {
            arena.alloc_layout(block).unwrap();
        }
    };
    group.bench_function("monotonic_arena", |b| {
        b.iter_custom(|iters| timed_chunks(iters, 1, &mut arena, fill, MonotonicArena::reset))
    });
    let mut bump = Bump::new();
    let fill = |bump: &mut Bump| {
        for _ in 0..blocks {
            bump.alloc_layout(block);
        }
    };
    group.bench_function("bumpalo_no_zeroing", |b| {
        b.iter_custom(|iters| timed_chunks(iters, 1, &mut bump, fill, Bump::reset))
    });
    let mut plain = vec![1u8; 1024 * KIB];
    group.bench_function("memset_1mib", |b| {
        b.iter(|| {
            plain.fill(0);
            black_box(&mut plain);
        })
    });
    group.finish();
}

criterion_group!(
    benches,
    alloc_8b_fixed,
    alloc_8b_growing,
    alloc_aligned,
    replay,
    reset_1mib
);
criterion_main!(benches);
