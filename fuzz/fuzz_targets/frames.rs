#![no_main]
//! See `fuzz/checks/frames.rs`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| tonic_hotpath_fuzz::checks::frames::check(data));
