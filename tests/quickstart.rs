//! Runs the quickstart example end to end (`cargo run --example quickstart`)
//! and checks its exit code and key lines. The demo checks its own
//! invariants (fork isolation, FIFO order, one org id at every hop, the
//! rejected call counted as Unauthenticated) and exits 1 if one fails.
#![cfg(all(feature = "grpc", feature = "arena"))]

use std::process::{Command, Output};

/// Runs the example with `args` through the same cargo that runs the
/// tests, with the features this test was built with, so that the build
/// `cargo test` made is reused as it is: cargo only checks it is fresh and
/// runs it.
///
/// Cargo gives the test process variables of its own (`CARGO_MANIFEST_DIR`,
/// `CARGO_PKG_*`, ...). Passed on, a build script that watches one (ring's
/// watches `CARGO_MANIFEST_DIR`) reruns, and the whole tree above it is
/// rebuilt twice: here, and again by the next `cargo test`. So they are
/// removed.
fn quickstart(args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO"));
    command
        .args(["run", "--quiet", "--example", "quickstart"])
        .args(["--no-default-features", "--features", &features()])
        .arg("--")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        let set_by_cargo_for_tests = [
            "CARGO_PKG_",
            "CARGO_MANIFEST_",
            "CARGO_CRATE_NAME",
            "CARGO_BIN_",
            "CARGO_PRIMARY_PACKAGE",
            "CARGO_TARGET_TMPDIR",
        ]
        .iter()
        .any(|prefix| key.starts_with(prefix));
        if set_by_cargo_for_tests {
            command.env_remove(&*key);
        }
    }
    command.output().expect("run cargo")
}

/// The crate's features and whether this test binary was built with each
/// (a feature missing here costs a rebuild of the crate and the example:
/// [`every_feature_is_passed_on`] checks the list against Cargo.toml).
const FEATURES: &[(&str, bool)] = &[
    ("metadata", cfg!(feature = "metadata")),
    ("tenant", cfg!(feature = "tenant")),
    ("stats", cfg!(feature = "stats")),
    ("limits", cfg!(feature = "limits")),
    ("retry", cfg!(feature = "retry")),
    ("arena", cfg!(feature = "arena")),
    ("bench-internals", cfg!(feature = "bench-internals")),
    ("zstd", cfg!(feature = "zstd")),
    ("otel", cfg!(feature = "otel")),
    (
        "otel-bound-instruments",
        cfg!(feature = "otel-bound-instruments"),
    ),
    ("channelz", cfg!(feature = "channelz")),
    ("limits-file", cfg!(feature = "limits-file")),
    ("binlog", cfg!(feature = "binlog")),
    ("limits-redis", cfg!(feature = "limits-redis")),
    ("limits-redis-tls", cfg!(feature = "limits-redis-tls")),
    ("orca", cfg!(feature = "orca")),
    ("grpc", cfg!(feature = "grpc")),
    ("default", cfg!(feature = "default")),
];

/// The features this test binary was built with, comma-separated.
fn features() -> String {
    FEATURES
        .iter()
        .filter(|(_, on)| *on)
        .map(|(name, _)| *name)
        .collect::<Vec<_>>()
        .join(",")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Every feature Cargo.toml declares is in [`FEATURES`], so that the
/// example runs with the build `cargo test` made (a missing one rebuilt
/// the crate and the example inside this test: about 50 s of CI).
#[test]
fn every_feature_is_passed_on() {
    let manifest = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .expect("read Cargo.toml");
    let declared: Vec<&str> = manifest
        .lines()
        .skip_while(|line| line.trim() != "[features]")
        .skip(1)
        .take_while(|line| !line.starts_with('['))
        .filter_map(|line| line.split_once(" = ").map(|(name, _)| name.trim()))
        .filter(|name| !name.starts_with('#'))
        .collect();
    assert!(declared.contains(&"default"), "features read: {declared:?}");
    for name in declared {
        assert!(
            FEATURES.iter().any(|(known, _)| *known == name),
            "feature {name} is not passed on to the example (add it to FEATURES)"
        );
    }
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
