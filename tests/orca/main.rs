//! ORCA load reports (gRFC A51): the server's recorders, trailer and
//! out-of-band service, the header forms, and the client side, against real
//! tonic servers and clients on 127.0.0.1.

/// For the allocation test (`alloc`); it counts per thread, so the other
/// tests of this binary, running in parallel, do not disturb its counts.
#[global_allocator]
static ALLOCATOR: support::alloc_count::CountingAllocator = support::alloc_count::CountingAllocator;

mod alloc;

mod client;
mod interop_go;
mod rates;
mod server;
mod service;
// The tests on the harness's stacks (`support::stacks`).
mod orca_stacks;
mod stacks_faults;
