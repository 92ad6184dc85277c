#![no_main]
//! See `fuzz/checks/orca_reports.rs`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| tonic_hotpath_fuzz::checks::orca_reports::check(data));
