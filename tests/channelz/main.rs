//! The channelz tests, one binary (`cargo test --test channelz`), each
//! former test file a module. `channelz_registry` and
//! `channelz_interop_go` are binaries of their own (`tests/*.rs`): they
//! assert or walk the whole of the process's channelz registry, which the
//! tests here add to and remove from while they run.

#[path = "../channelz_support/mod.rs"]
mod channelz_support;
#[path = "../stacks/mod.rs"]
mod stacks;
#[path = "../stats_harness/mod.rs"]
mod stats_harness;
#[path = "../support/mod.rs"]
mod support;

/// For `channelz_alloc`; it counts per thread, so the other tests of this
/// binary, running in parallel, do not disturb its counts.
#[global_allocator]
static ALLOCATOR: stats_harness::CountingAllocator = stats_harness::CountingAllocator;

mod channelz;
mod channelz_alloc;
