#![no_main]
//! See `fuzz/checks/overrides.rs`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| tonic_hotpath_fuzz::checks::overrides::check(data));
