//! A grpc-go client against a tonic server with `TenantLimitLayer`
//! (issue #21): the Go program in `interop/tenant-go` (grpc-go v1.85's
//! health client, `x-scope-orgid` in its outgoing metadata) calls until its
//! tenant is over its rate limit, and sees what a Go service calling a
//! Rust one sees: `ResourceExhausted` with the layer's documented message,
//! while another tenant's calls go through.
//!
//! Needs `go` on PATH (and the Go module proxy, or a warm module cache, for
//! the first build); without `go` the test prints why and passes.

use std::path::{Path, PathBuf};
use std::time::Instant;

use tonic_hotpath::tenant::limits::{Limits, Rate, TenantLimitLayer};

/// Builds the Go program; `None` (the test is skipped) without `go`.
fn build_go_program() -> Option<PathBuf> {
    if std::process::Command::new("go")
        .arg("version")
        .output()
        .is_err()
    {
        println!("skipping the grpc-go interop test: `go` is not on PATH");
        return None;
    }
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("interop/tenant-go");
    let binary = Path::new(env!("CARGO_TARGET_TMPDIR")).join("tenant-go");
    let started = Instant::now();
    let output = std::process::Command::new("go")
        .args(["build", "-o"])
        .arg(&binary)
        .arg(".")
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
    println!("go build took {:?}", started.elapsed());
    Some(binary)
}

/// One call as the Go client saw it: (code, message).
fn calls(stdout: &str) -> Vec<(String, String)> {
    let field = |line: &str, key: &str| {
        let pattern = format!("\"{key}\":\"");
        let start = line.find(&pattern).map(|at| at + pattern.len());
        let start = start.unwrap_or_else(|| panic!("no {key} in {line}"));
        // The messages hold `\"` around the tenant: read up to an
        // unescaped quote, and unescape it.
        let mut value = String::new();
        let mut chars = line[start..].chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => value.extend(chars.next()),
                '"' => break,
                c => value.push(c),
            }
        }
        value
    };
    stdout
        .lines()
        .filter(|line| line.starts_with('{'))
        .map(|line| (field(line, "code"), field(line, "message")))
        .collect()
}

/// Runs the Go client: `calls` health checks for `org` against `addr`.
async fn go_client(binary: &Path, addr: std::net::SocketAddr, org: &str, calls: u32) -> String {
    let output = tokio::process::Command::new(binary)
        .arg(format!("-addr={addr}"))
        .arg(format!("-org={org}"))
        .arg(format!("-calls={calls}"))
        .output()
        .await
        .expect("run the Go client");
    assert!(
        output.status.success(),
        "the Go client failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

#[tokio::test]
async fn grpc_go_client_sees_resource_exhausted_with_the_message() {
    let Some(binary) = build_go_program() else {
        return;
    };
    // A burst of 3, then one call every 1 000 s: exactly 3 pass.
    let rate = Rate::new(0.001, 3).expect("a valid rate");
    let layer = TenantLimitLayer::new(Limits::unlimited().with_rate(rate));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (_reporter, health) = tonic_health::server::health_reporter();
    tokio::spawn(
        tonic::transport::Server::builder()
            .layer(layer)
            .add_service(health)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );

    let throttled = calls(&go_client(&binary, addr, "team-a", 5).await);
    let refused = (
        "ResourceExhausted".to_owned(),
        "request rate limit (0.001 per second, burst 3) exceeded for tenant \"team-a\"".to_owned(),
    );
    let ok = ("OK".to_owned(), String::new());
    assert_eq!(
        throttled,
        [ok.clone(), ok.clone(), ok.clone(), refused.clone(), refused]
    );
    let other = calls(&go_client(&binary, addr, "team-b", 2).await);
    assert_eq!(other, [ok.clone(), ok], "another tenant is unaffected");
}
