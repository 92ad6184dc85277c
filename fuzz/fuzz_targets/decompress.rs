#![no_main]
//! See `fuzz/checks/decompress.rs`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| tonic_hotpath_fuzz::checks::decompress::check(data));
