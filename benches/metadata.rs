//! `metadata` benches (in progress).
fn main() {}
