//! `arena` benches (in progress).
fn main() {}
