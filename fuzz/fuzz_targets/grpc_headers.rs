#![no_main]
//! See `fuzz/checks/grpc_headers.rs`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| tonic_hotpath_fuzz::checks::grpc_headers::check(data));
