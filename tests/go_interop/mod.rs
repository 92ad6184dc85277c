//! Building the Go peers kept in `interop/` for the interop tests: each
//! test skips (with a message) when `go` is not on PATH, and fails instead
//! when `CI` is set (a check that cannot run in CI must not pass there);
//! it builds its program in module mode into its test binary's temp dir.
//!
//! Include with `mod go_interop;`.
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

/// Whether `go` is on PATH; prints that `test` is skipped when not, and
/// panics when not under `CI`.
pub fn go_available(test: &str) -> bool {
    program_available("go", &["version"], test)
}

/// Whether `program` runs (`program args` starts); when it does not,
/// prints that `test` is skipped, or panics when the `CI` environment
/// variable is set (to anything but empty or `false`), so that CI cannot
/// pass a check it did not run.
pub fn program_available(program: &str, args: &[&str], test: &str) -> bool {
    let found = std::process::Command::new(program)
        .args(args)
        .output()
        .is_ok();
    if !found {
        let in_ci = std::env::var("CI").is_ok_and(|ci| !ci.is_empty() && ci != "false");
        assert!(
            !in_ci,
            "{test} needs `{program}`, which is not on PATH, and CI is set: a check CI cannot run \
             must fail there, not pass"
        );
        println!("skipping {test}: `{program}` is not on PATH");
    }
    found
}

/// `go build -o <this test binary's temp dir>/<name> <args>` in
/// `interop/<dir>`, in module mode (`GOFLAGS=-mod=mod`, as the READMEs
/// build them); panics with go's output if the build fails.
pub fn go_build(dir: &str, name: &str, args: &[&str]) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("interop")
        .join(dir);
    let binary = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
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
    if !go_available(&format!("the {dir} interop test")) {
        return None;
    }
    let mut built = BUILT.lock().unwrap_or_else(PoisonError::into_inner);
    let binary = built
        .entry(dir.to_owned())
        .or_insert_with(|| go_build(dir, dir, &["."]));
    Some(binary.clone())
}
