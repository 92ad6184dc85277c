#![no_main]
//! See `fuzz/checks/channelz.rs`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| tonic_hotpath_fuzz::checks::channelz::check(data));
