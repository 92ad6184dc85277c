#![no_main]
//! See `fuzz/checks/org_ids.rs`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| tonic_hotpath_fuzz::checks::org_ids::check(data));
