#![no_main]
//! See `fuzz/checks/admission.rs`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| tonic_hotpath_fuzz::checks::admission::check(data));
