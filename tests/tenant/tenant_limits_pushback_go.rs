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
//! cache or the Go module proxy); without `go` the test is skipped with a
//! notice (`support::skip`), or fails when `CI` is set.

use support::go_interop;
use support::limits::grpc_go::{Attempts, calls, go_client, serve_health};

use std::time::Duration;

use tonic_hotpath::limits::{Limits, Rate, TenantLimitLayer};

#[tokio::test]
async fn grpc_go_retries_after_the_pushback_and_is_admitted() {
    let Some(binary) = go_interop::go_program("tenant-go") else {
        return;
    };
    // A burst of 1, then one call per second.
    let rate = Rate::new(1.0, 1).expect("a valid rate");
    let attempts = Attempts::default();
    let layer = TenantLimitLayer::new(Limits::unlimited().with_rate(rate));
    let addr = serve_health(layer, 0, &attempts).await;

    let seen = calls(&go_client(&binary, &[addr], "team-a", 2, Some(3)).await);
    let codes: Vec<_> = seen.iter().map(|(code, ..)| code.as_str()).collect();
    assert_eq!(codes, ["OK", "OK"], "{seen:?}");

    let seen_by_server = attempts.seen();
    let arrivals: Vec<_> = seen_by_server
        .iter()
        .map(|attempt| attempt.arrived)
        .collect();
    let pushbacks: Vec<_> = seen_by_server
        .iter()
        .map(|attempt| attempt.pushback_ms)
        .collect();
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
    let attempts = Attempts::default();
    let layer = TenantLimitLayer::new(Limits::unlimited().with_rate(rate));
    let addr = serve_health(layer, 0, &attempts).await;

    let seen = calls(&go_client(&binary, &[addr], "team-a", 2, None).await);
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
    let pushbacks: Vec<_> = attempts
        .seen()
        .iter()
        .map(|attempt| attempt.pushback_ms)
        .collect();
    assert!(
        matches!(pushbacks.as_slice(), [None, Some(ms)] if (990_000..=1_000_000).contains(ms)),
        "{pushbacks:?}"
    );
}
