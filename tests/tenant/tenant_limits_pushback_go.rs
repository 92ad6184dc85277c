//! A grpc-go v1.85 client with a retry policy against a tonic server with
//! `TenantLimitLayer` (issue #27): the Go program in `interop/tenant-go`
//! calls a tenant over its rate; the refusal's `grpc-retry-pushback-ms`
//! trailer times grpc-go's retry (its own backoff is 10 s), so the retried
//! attempt arrives at the server the pushback after the refused one, and
//! is admitted. Without a retry policy the Go client sees
//! `RESOURCE_EXHAUSTED` with the layer's message.
//!
//! The server records each attempt's arrival (outside the limit layer) and
//! the pushback each answer carried. Needs `go` on PATH (and a warm module
//! cache or the Go module proxy); without `go` the test prints why and
//! passes, or fails when `CI` is set.

use crate::go_interop;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tonic_hotpath::tenant::limits::{
    Limits, RETRY_PUSHBACK_MS, Rate, TenantLimitBody, TenantLimitLayer,
};
use tower::ServiceBuilder;

/// The attempts the server saw: arrival times, and the pushback (ms) each
/// answer carried, in order (the client calls one at a time).
#[derive(Debug, Default, Clone)]
struct Attempts {
    arrivals: Arc<Mutex<Vec<Instant>>>,
    pushbacks: Arc<Mutex<Vec<Option<u64>>>>,
}

/// Serves the health service behind `layer`, recording every attempt.
async fn serve(layer: TenantLimitLayer) -> (SocketAddr, Attempts) {
    let attempts = Attempts::default();
    let (arrivals, pushbacks) = (
        Arc::clone(&attempts.arrivals),
        Arc::clone(&attempts.pushbacks),
    );
    let stack = ServiceBuilder::new()
        .map_request(move |request: http::Request<tonic::body::Body>| {
            arrivals.lock().expect("lock").push(Instant::now());
            request
        })
        .map_response(
            move |response: http::Response<TenantLimitBody<tonic::body::Body>>| {
                let pushback = response
                    .headers()
                    .get(RETRY_PUSHBACK_MS)
                    .map(|value| value.to_str().unwrap().parse().unwrap());
                pushbacks.lock().expect("lock").push(pushback);
                response
            },
        )
        .layer(layer)
        .into_inner();
    // TCP_NODELAY: without it, Nagle's algorithm and delayed ACKs hold
    // the refusal back by about 40 ms.
    let (addr, incoming) = crate::support::bind().await;
    let (_reporter, health) = tonic_health::server::health_reporter();
    tokio::spawn(
        tonic::transport::Server::builder()
            .layer(stack)
            .add_service(health)
            .serve_with_incoming(incoming),
    );
    (addr, attempts)
}

/// One call as the Go client saw it: (code, message, milliseconds).
fn calls(stdout: &str) -> Vec<(String, String, f64)> {
    stdout
        .lines()
        .filter(|line| line.starts_with('{'))
        .map(|line| {
            let json: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
            (
                json["code"].as_str().expect("code").to_owned(),
                json["message"].as_str().expect("message").to_owned(),
                json["ms"].as_f64().expect("ms"),
            )
        })
        .collect()
}

/// Runs the Go client: `calls` health checks for `org` against `addr`.
pub(crate) async fn go_client(
    binary: &Path,
    addr: SocketAddr,
    org: &str,
    calls: u32,
    retry: bool,
) -> String {
    let output = tokio::process::Command::new(binary)
        .arg(format!("-addr={addr}"))
        .arg(format!("-org={org}"))
        .arg(format!("-calls={calls}"))
        .arg(format!("-retry={retry}"))
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
async fn grpc_go_retries_after_the_pushback_and_is_admitted() {
    let Some(binary) = go_interop::go_program("tenant-go") else {
        return;
    };
    // A burst of 1, then one call per second.
    let rate = Rate::new(1.0, 1).expect("a valid rate");
    let (addr, attempts) = serve(TenantLimitLayer::new(Limits::unlimited().with_rate(rate))).await;

    let seen = calls(&go_client(&binary, addr, "team-a", 2, true).await);
    let codes: Vec<_> = seen.iter().map(|(code, ..)| code.as_str()).collect();
    assert_eq!(codes, ["OK", "OK"], "{seen:?}");

    let arrivals = attempts.arrivals.lock().unwrap().clone();
    let pushbacks = attempts.pushbacks.lock().unwrap().clone();
    // Call 0 admitted; call 1 refused once, then retried and admitted.
    assert_eq!(arrivals.len(), 3, "{pushbacks:?}");
    let pushback = match pushbacks.as_slice() {
        [None, Some(pushback), None] => *pushback,
        other => panic!("expected one refusal with a pushback between two admissions: {other:?}"),
    };
    // The refusal came right after the admitted call, so the next token
    // was almost a second away.
    assert!((900..=1_000).contains(&pushback), "pushback {pushback} ms");
    let gap = arrivals[2] - arrivals[1];
    let sent = Duration::from_millis(pushback);
    println!(
        "grpc-go retried {:.1} ms after the refusal; pushback {pushback} ms; the call took {:.1} ms",
        gap.as_secs_f64() * 1e3,
        seen[1].2
    );
    // Not before the pushback (the server measures both ends: the retry
    // leaves the client at least the pushback after the refusal arrived),
    // and within a few milliseconds of it (the backoff would be 8–12 s).
    assert!(gap >= sent, "retried after {gap:?}, pushback {sent:?}");
    assert!(
        gap < sent + Duration::from_millis(25),
        "retried after {gap:?}, pushback {sent:?}"
    );
}

#[tokio::test]
async fn grpc_go_without_a_retry_policy_sees_resource_exhausted_with_the_message() {
    let Some(binary) = go_interop::go_program("tenant-go") else {
        return;
    };
    let rate = Rate::new(0.001, 1).expect("a valid rate");
    let (addr, attempts) = serve(TenantLimitLayer::new(Limits::unlimited().with_rate(rate))).await;

    let seen = calls(&go_client(&binary, addr, "team-a", 2, false).await);
    let seen: Vec<_> = seen
        .into_iter()
        .map(|(code, message, _)| (code, message))
        .collect();
    assert_eq!(
        seen,
        [
            ("OK".to_owned(), String::new()),
            (
                "ResourceExhausted".to_owned(),
                "request rate limit (0.001 per second, burst 1) exceeded for tenant \"team-a\""
                    .to_owned()
            )
        ]
    );
    // One attempt per call, the refusal with its pushback (~1 000 s).
    let pushbacks = attempts.pushbacks.lock().unwrap().clone();
    assert!(
        matches!(pushbacks.as_slice(), [None, Some(ms)] if (990_000..=1_000_000).contains(ms)),
        "{pushbacks:?}"
    );
}
