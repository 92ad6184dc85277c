//! Placeholder: the two-hop demo lands with issue 6.
fn main() {
    println!("tonic-hotpath quickstart: see examples/metadata.rs, tenant.rs, stats.rs, arena.rs");
}
