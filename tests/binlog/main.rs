//! The binary log tests, one binary (`cargo test --features binlog --test
//! binlog`): the filter (`filter`), the framings (`sink`), the file sink
//! and its rotation (`file`), the reader on good and hostile input
//! (`reader`), the entries of real calls (`entries`), the comparison
//! with grpc-go's log (`interop_go`, over the calls of `script`) and the
//! entry rules that comparison does not reach (`rules`), and the
//! allocations of a call the filter does not select (`alloc`). The
//! writer thread is crate-private; its tests are unit tests
//! (`src/binlog/writer/tests.rs`). proptest keeps the failures it saved
//! for a module in `tests/proptest-regressions/<file stem>.txt`.

/// For the allocation tests (filter lookups, what a hostile file makes the
/// reader hold); it counts per thread, so the other tests of this binary,
/// running in parallel, do not disturb their counts.
#[global_allocator]
static ALLOCATOR: support::alloc_count::CountingAllocator = support::alloc_count::CountingAllocator;

mod alloc;
mod entries;
mod file;
mod filter;
mod interop_go;
mod reader;
mod rules;
mod script;
mod sink;
