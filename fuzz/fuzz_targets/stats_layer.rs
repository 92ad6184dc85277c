#![no_main]
//! See `fuzz/checks/stats_layer.rs`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| tonic_hotpath_fuzz::checks::stats_layer::check(data));
