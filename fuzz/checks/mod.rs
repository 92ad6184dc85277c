//! What each fuzz target checks, shared by the libFuzzer targets
//! (`fuzz/fuzz_targets/`, nightly) and the corpus replay that runs on stable
//! with the crate's tests (`tests/fuzz_corpus.rs`). Each check takes the raw
//! input, drives the entry point the layers use, compares with an oracle
//! (tonic's own decoder, grpc-go's rules ported, or the documented grammar)
//! and panics on any disagreement.
#![allow(dead_code)]

pub mod admission;
pub mod binlog_filter;
pub mod binlog_reader;
pub mod channelz;
pub mod decompress;
pub mod frames;
pub mod grpc_headers;
pub mod orca_reports;
pub mod org_ids;
pub mod overrides;
pub mod retry;
pub mod stats_layer;

mod body;
mod input;

/// tonic's own decoder as the oracle for compressed messages.
#[path = "../../tests/support/src/compression.rs"]
pub mod compression_support;

/// A target's check: panics on a disagreement.
pub type Check = fn(&[u8]);

/// Every target: its name (the corpus directory) and its check.
pub const TARGETS: [(&str, Check); 12] = [
    ("admission", admission::check),
    ("binlog_filter", binlog_filter::check),
    ("binlog_reader", binlog_reader::check),
    ("channelz", channelz::check),
    ("decompress", decompress::check),
    ("frames", frames::check),
    ("grpc_headers", grpc_headers::check),
    ("orca_reports", orca_reports::check),
    ("org_ids", org_ids::check),
    ("overrides", overrides::check),
    ("retry", retry::check),
    ("stats_layer", stats_layer::check),
];
