//! Building the Go peers kept in `interop/` for the interop tests: each
//! test is skipped (with a notice, [`crate::skip`]) when `go` is not on
//! PATH, and fails instead when `CI` is set; it builds its program in
//! module mode into its test binary's temp dir.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

/// Whether `go` is on PATH; if not, the calling test is skipped with a
/// notice, or fails under `CI` ([`crate::skip::require`]).
pub fn go_available() -> bool {
    crate::skip::require("go", &["version"], "https://go.dev/doc/install")
}

/// The repository's root (this crate is `tests/support` in it).
fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The target directory's `tmp`, which cargo gives integration tests and
/// benches as `CARGO_TARGET_TMPDIR` (and this crate, a library, does not
/// get): the running test binary is in `<target>/<profile>/deps/`.
fn target_tmpdir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let target = exe
        .ancestors()
        .nth(3)
        .expect("the test binary is in <target>/<profile>/deps");
    let tmp = target.join("tmp");
    std::fs::create_dir_all(&tmp).expect("create the target's tmp directory");
    tmp
}

/// `go build -o <the target directory's tmp>/<name> <args>` in
/// `interop/<dir>`, in module mode (`GOFLAGS=-mod=mod`, as the READMEs
/// build them); panics with go's output if the build fails.
pub fn go_build(dir: &str, name: &str, args: &[&str]) -> PathBuf {
    let source = repository().join("interop").join(dir);
    let binary = target_tmpdir().join(name);
    let started = Instant::now();
    let output = std::process::Command::new("go")
        .args(["build", "-o"])
        .arg(&binary)
        .args(args)
        .current_dir(&source)
        .env("GOFLAGS", "-mod=mod")
        .output()
        .expect("run go build");
    assert!(
        output.status.success(),
        "go build in {} failed:\n{}",
        source.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    println!("go build of {name} took {:?}", started.elapsed());
    binary
}

/// The main package of `interop/<dir>`, built as `<dir>` once per test
/// process (tests that run at once share one build rather than each
/// rewriting the binary another may be running); `None` (the test is
/// skipped) without `go`, a panic without `go` under `CI`.
pub fn go_program(dir: &str) -> Option<PathBuf> {
    static BUILT: Mutex<BTreeMap<String, PathBuf>> = Mutex::new(BTreeMap::new());
    if !go_available() {
        return None;
    }
    let mut built = BUILT.lock().unwrap_or_else(PoisonError::into_inner);
    let binary = built
        .entry(dir.to_owned())
        .or_insert_with(|| go_build(dir, dir, &["."]));
    Some(binary.clone())
}
