//! The channelz tests, one binary (`cargo test --test channelz`), each
//! former test file a module. `channelz_registry` and
//! `channelz_interop_go` are binaries of their own (`tests/*.rs`): they
//! assert or walk the whole of the process's channelz registry, which the
//! tests here add to and remove from while they run.

/// For `channelz_alloc`; it counts per thread, so the other tests of this
/// binary, running in parallel, do not disturb its counts.
#[global_allocator]
static ALLOCATOR: support::alloc_count::CountingAllocator = support::alloc_count::CountingAllocator;

mod channelz;
mod channelz_alloc;
