#![no_main]
//! See `fuzz/checks/binlog_reader.rs`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| tonic_hotpath_fuzz::checks::binlog_reader::check(data));
