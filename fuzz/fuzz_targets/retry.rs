#![no_main]
//! See `fuzz/checks/retry.rs`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| tonic_hotpath_fuzz::checks::retry::check(data));
