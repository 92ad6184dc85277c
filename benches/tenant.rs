//! `tenant` benches (in progress).
fn main() {}
