//! The arena tests, one binary (`cargo test --test arena`), each former
//! test file a module. `.ci/run` runs this binary under valgrind, without
//! `arena_oom` and `arena_replay` (see their docs), and under Miri (feature
//! `arena` only, so without `arena_replay`; tests too slow for Miri or that
//! it cannot run are `#[cfg_attr(miri, ignore)]`, each saying why).

/// For `arena_alloc_count`; it counts per thread, so the other tests of
/// this binary, running in parallel, do not disturb its counts.
#[global_allocator]
static GLOBAL: support::alloc_count::CountingAllocator = support::alloc_count::CountingAllocator;

mod arena;
mod arena_alloc_count;
mod arena_oom;
#[cfg(feature = "bench-internals")]
mod arena_replay;
