//! The binlog tests, one binary (`cargo test --features binlog --test
//! binlog`), each part of `tonic_hotpath::binlog` a module. proptest keeps
//! the failures it saved for a module in
//! `tests/proptest-regressions/<file stem>.txt`.

#[path = "../alloc_count/mod.rs"]
mod alloc_count;

/// For the allocation tests; it counts per thread, so the other tests of
/// this binary, running in parallel, do not disturb their counts.
#[global_allocator]
static GLOBAL: alloc_count::CountingAllocator = alloc_count::CountingAllocator;

mod filter;
