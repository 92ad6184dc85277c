//! The checks the fuzz targets run (`fuzz/checks/`), shared with the
//! corpus replay in the crate's tests (`tests/fuzz_corpus.rs`).

#[path = "../checks/mod.rs"]
pub mod checks;
