//! `RetryLayer` (gRFC A6) with tonic clients against real servers on
//! 127.0.0.1: grpc-go's retry tests ported (unary, streaming, throttling,
//! attempts), deadlines, transparent retries, proxies, memory bounds.

#[global_allocator]
static ALLOCATOR: support::alloc_count::CountingAllocator = support::alloc_count::CountingAllocator;

mod allocations;
mod go_peer;
mod limits;
mod memory;
#[cfg(feature = "otel")]
mod otel;
mod script;
mod streaming;
mod transparent;
mod unary;
