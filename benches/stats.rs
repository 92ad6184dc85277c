//! `stats` benches (in progress).
fn main() {}
