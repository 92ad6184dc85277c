//! Runs the quickstart example end to end (`cargo run --example quickstart`)
//! and checks its exit code and key lines. The demo checks its own
//! invariants (fork isolation, FIFO order, one org id at every hop, the
//! rejected call counted as Unauthenticated) and exits 1 if one fails.
#![cfg(all(feature = "grpc", feature = "arena"))]

use std::process::{Command, Output};

/// Runs the example with `args` through the same cargo that runs the tests.
/// `cargo test` has already built the example, so this only checks it is
/// fresh and runs it.
fn quickstart(args: &[&str]) -> Output {
    Command::new(env!("CARGO"))
        .args(["run", "--quiet", "--example", "quickstart", "--"])
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn demo_passes_its_checks_and_prints_every_table() {
    let output = quickstart(&["--requests", "3", "--fan-out", "2"]);
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(
        output.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    for expected in [
        "tonic-hotpath quickstart: 3 requests, fan-out 2 (org id acme-corp)",
        "client got Unauthenticated",
        "== org id at each hop ==",
        "== metadata as the backend received it (req-0000",
        "fork 1",
        "== per-method stats",
        "Ok=3 Unauthenticated=1",
        "Ok=6",
        "== events",
        "== backend arena",
        "all checks passed",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
    assert!(
        !stdout.contains("fork 2"),
        "fan-out 2 printed a third fork:\n{stdout}"
    );
    // The backend received each fork's chain in FIFO order, own shard last.
    let keys: Vec<&str> = stdout
        .lines()
        .skip_while(|line| !line.contains("metadata as the backend received it"))
        .skip(3)
        .take(7)
        .filter_map(|line| line.split_whitespace().find(|w| w.starts_with("x-")))
        .collect();
    assert_eq!(
        keys.join(" "),
        "x-request-id x-hop x-hop x-deadline-budget-ms x-gateway-key-bin x-scope-orgid x-shard",
        "{stdout}"
    );
}

#[test]
fn help_prints_usage_and_exits_zero() {
    let output = quickstart(&["--help"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(stdout.contains("--requests N"), "{stdout}");
    assert!(stdout.contains("--fan-out K"), "{stdout}");
}

#[test]
fn bad_flags_exit_2_with_a_clear_message() {
    for (args, message) in [
        (&["--bogus"][..], "unknown argument '--bogus'"),
        (&["--requests"][..], "--requests needs a value"),
        (
            &["--fan-out", "0"][..],
            "--fan-out must be an integer from 1 to 64, got '0'",
        ),
        (
            &["--requests=many"][..],
            "--requests must be an integer from 1 to 10000, got 'many'",
        ),
    ] {
        let output = quickstart(args);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert!(output.stdout.is_empty(), "{args:?} printed to stdout");
    }
}
