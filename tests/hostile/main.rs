//! Memory under hostile clients (issue #28), one binary (`cargo test
//! --test hostile`), one module per scenario, each over real connections
//! on 127.0.0.1:
//!
//! - `inflate`: 1 000 concurrent streams, each a gzip message that
//!   inflates past the decode limit;
//! - `trickle`: 1 000 streams each trickling a message with a large
//!   declared length, one byte per DATA frame;
//! - `idle_conns`: 10 000 idle connections through the layer's connection
//!   wrappers with channelz on (the client ends in a child process);
//! - `flood`: 100 000 distinct org ids and method names through every
//!   layer, OTel metrics and tenant limits on;
//! - `rapid_reset`: waves of 40 connections opening and cancelling calls
//!   as fast as they can until h2 gives up on them (CVE-2023-44487's
//!   shape): every call keeps its connection's state (no memory figures).
//!
//! Memory is counted process-wide ([`LiveBytesAllocator`]: bytes live and
//! their peak), so the tests take turns ([`measure::serial`]); each states
//! the bound it asserts and prints its figures (BENCHMARKS.md, "Memory
//! under hostile clients").

use support::alloc_count::LiveBytesAllocator;

/// Every allocation of the process, counted: see [`measure`].
#[global_allocator]
static ALLOCATOR: LiveBytesAllocator = LiveBytesAllocator;

mod measure;

mod flood;
mod idle_conns;
mod inflate;
mod rapid_reset;
mod trickle;
