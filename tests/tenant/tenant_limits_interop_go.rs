//! A grpc-go client against a tonic server with `TenantLimitLayer`
//! (issue #21): the Go program in `interop/tenant-go` (grpc-go v1.85's
//! health client, `x-scope-orgid` in its outgoing metadata) calls until its
//! tenant is over its rate limit, and sees what a Go service calling a
//! Rust one sees: `ResourceExhausted` with the layer's documented message,
//! while another tenant's calls go through.
//!
//! Needs `go` on PATH (and the Go module proxy, or a warm module cache, for
//! the first build); without `go` the test is skipped with a notice (`support::skip`), or fails when `CI` is set.

use support::go_interop;
use support::limits::grpc_go::{self, go_client};

use tonic_hotpath::limits::{Limits, Rate, TenantLimitLayer};

/// One call as the Go client saw it: (code, message).
fn calls(stdout: &str) -> Vec<(String, String)> {
    grpc_go::calls(stdout)
        .into_iter()
        .map(|(code, message, _)| (code, message))
        .collect()
}

#[tokio::test]
async fn grpc_go_client_sees_resource_exhausted_with_the_message() {
    let Some(binary) = go_interop::go_program("tenant-go") else {
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

    let throttled = calls(&go_client(&binary, &[addr], "team-a", 5, None).await);
    let refused = (
        "ResourceExhausted".to_owned(),
        "request rate limit (0.001 per second, burst 3) exceeded for tenant \"team-a\"".to_owned(),
    );
    let ok = ("OK".to_owned(), String::new());
    assert_eq!(
        throttled,
        [ok.clone(), ok.clone(), ok.clone(), refused.clone(), refused]
    );
    let other = calls(&go_client(&binary, &[addr], "team-b", 2, None).await);
    assert_eq!(other, [ok.clone(), ok], "another tenant is unaffected");
}
