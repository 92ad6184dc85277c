//! The binary log tests, one binary (`cargo test --features binlog --test
//! binlog`): the framings (`sink`), the file sink and its rotation
//! (`file`), the reader on good and hostile input (`reader`). The writer
//! thread is crate-private; its tests are unit tests
//! (`src/binlog/writer/tests.rs`).

/// For `reader`: the bytes a hostile file makes the reader hold. Per
/// thread, so the other tests, running in parallel, do not disturb it.
#[global_allocator]
static ALLOCATOR: alloc_count::CountingAllocator = alloc_count::CountingAllocator;

#[path = "../alloc_count/mod.rs"]
mod alloc_count;
mod entries;
mod file;
mod reader;
mod sink;
