//! ORCA load reports (gRFC A51): the server's recorders, trailer and
//! out-of-band service, the header forms, and the client side, against real
//! tonic servers and clients on 127.0.0.1.

/// For the allocation test (`alloc`); it counts per thread, so the other
/// tests of this binary, running in parallel, do not disturb its counts.
#[global_allocator]
static ALLOCATOR: alloc_count::CountingAllocator = alloc_count::CountingAllocator;

#[path = "../go_interop/mod.rs"]
mod go_interop;
#[path = "../h2_reply/mod.rs"]
mod h2_reply;
#[path = "../orca_support/mod.rs"]
mod orca_support;
#[path = "../stacks/mod.rs"]
mod stacks;

// The echo routes driven in process (`alloc`), and the counting allocator.
#[path = "../stats_harness/mod.rs"]
mod stats_harness;
use stats_harness::alloc_count;
#[path = "../support/mod.rs"]
mod support;

mod alloc;

mod client;
mod interop_go;
mod rates;
mod server;
mod service;
// The tests on the harness's stacks (the harness owns the name `stacks`).
#[path = "stacks.rs"]
mod orca_stacks;
mod stacks_faults;
