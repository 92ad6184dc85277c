//! The stats tests, one binary (`cargo test --test stats`), each former
//! test file a module, with `echo` (the shared echo service) and
//! `stacks_smoke` (the stacks the stats tests run on):
//! `stats_compression` and `stats_compression_len` need the
//! `bench-internals` feature, so they are built only with it.

/// For `stats_alloc` and `stats_threads`; it counts per thread, so the
/// other tests of this binary, running in parallel, do not disturb their
/// counts.
#[global_allocator]
static ALLOCATOR: support::alloc_count::CountingAllocator = support::alloc_count::CountingAllocator;

mod echo;
mod stacks_smoke;
mod stats;
mod stats_alloc;
#[cfg(feature = "bench-internals")]
mod stats_compression;
#[cfg(feature = "bench-internals")]
mod stats_compression_len;
mod stats_conn;
mod stats_frame;
mod stats_malformed;
mod stats_message_data;
mod stats_peers;
mod stats_recycle;
mod stats_responses;
mod stats_stacks;
mod stats_threads;
mod stats_times;
