//! The metadata tests, one binary (`cargo test --test metadata`), each
//! former test file a module. proptest keeps the failures it saved for a
//! module in `tests/proptest-regressions/<file stem>.txt`: with a main.rs
//! above the source file, that is where its default persistence looks.

/// For `metadata_alloc`; it counts per thread, so the other tests of this
/// binary, running in parallel, do not disturb its counts.
#[global_allocator]
static GLOBAL: support::alloc_count::CountingAllocator = support::alloc_count::CountingAllocator;

mod metadata;
mod metadata_alloc;
mod metadata_chain;
mod metadata_const;
mod metadata_reserved;
mod metadata_write;
