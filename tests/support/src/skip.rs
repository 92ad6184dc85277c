//! Tests that need a program the machine may lack (`redis-server`, `go`):
//! each asks [`require`] first, and where the program is missing the test
//! is skipped with a notice the user sees, or fails when `CI` is set (a
//! check that cannot run in CI must not pass there).
//!
//! libtest reports a skipped test as passed, and captures what the test
//! prints through `print!` and `eprint!` (shown only for a failure or
//! under `--nocapture`); the notice is written to the process's standard
//! error itself, which libtest does not capture:
//!
//! ```text
//! SKIPPED outage::a_killed_redis_falls_back_to_the_local_limit: redis-server is not on PATH (apt-get install redis-server)
//! ```

use std::io::Write;
use std::process::{Command, Stdio};

/// Whether `program` runs here (`program args` exits successfully). If it
/// does not, the calling test is skipped: [`skip`] writes why, naming
/// `install` (how to get the program), or panics when `CI` is set.
pub fn require(program: &str, args: &[&str], install: &str) -> bool {
    let found = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !found {
        skip(&format!("{program} is not on PATH ({install})"));
    }
    found
}

/// Skips the calling test for `reason`: writes `SKIPPED <test>: <reason>`
/// straight to the process's standard error (past libtest's capture), or
/// panics with the reason when the `CI` environment variable is set (to
/// anything but empty or `false`). The test is named by its thread, which
/// libtest names after it; call this on the test's own thread (a
/// `#[tokio::test]`'s body runs there, its spawned tasks do not).
pub fn skip(reason: &str) {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a test");
    assert!(
        !in_ci(),
        "{test}: {reason}, and CI is set: a check CI cannot run must fail there, not pass"
    );
    // One write, so that parallel tests' notices do not interleave; a
    // closed standard error loses the notice, not the test.
    let _ = std::io::stderr()
        .lock()
        .write_all(format!("SKIPPED {test}: {reason}\n").as_bytes());
}

/// Whether `CI` is set to anything but empty or `false`.
fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|ci| !ci.is_empty() && ci != "false")
}
