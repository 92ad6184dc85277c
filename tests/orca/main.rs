//! ORCA load reports (gRFC A51): the server's recorders, trailer and
//! out-of-band service, the header forms, and the client side, against real
//! tonic servers and clients on 127.0.0.1.

/// For the allocation test (`alloc`); it counts per thread, so the other
/// tests of this binary, running in parallel, do not disturb its counts.
#[global_allocator]
static ALLOCATOR: alloc_count::CountingAllocator = alloc_count::CountingAllocator;

#[path = "../go_interop/mod.rs"]
mod go_interop;
#[path = "../orca_support/mod.rs"]
mod orca_support;

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
