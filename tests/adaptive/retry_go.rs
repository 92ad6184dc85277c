//! grpc-go's client, with a retry policy for `UNAVAILABLE` and round robin
//! over three replicas (the Go program in `interop/tenant-go`), retries a
//! call an overloaded replica refused onto another replica, after the
//! refusal's pushback, and is admitted there. Needs `go` on PATH; skipped
//! with a notice without it (failing when `CI` is set).

use std::time::Duration;

use support::go_interop;
use support::limits::grpc_go::{Attempts, calls, go_client_settled, serve_health};
use tonic_hotpath::limits::AdaptiveLimitLayer;

const CALLS: u32 = 9;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_go_retries_an_overload_refusal_on_another_replica() {
    let Some(binary) = go_interop::go_program("tenant-go") else {
        return;
    };
    let attempts = Attempts::default();
    let mut addrs = Vec::new();
    for server in 0..3 {
        // Health checks are never shed by default; here they are the
        // service. Replica 0 is overloaded: it sheds every call (its
        // shed-first threshold is 0 calls in flight).
        let mut layer = AdaptiveLimitLayer::new().never_shed_services(Vec::<&str>::new());
        if server == 0 {
            layer = layer
                .shed_first_services(["grpc.health.v1.Health"])
                .shed_first_below(0.0);
        }
        addrs.push(serve_health(layer, server, &attempts).await);
    }
    // grpc-go's round robin picks only replicas whose connection is
    // ready: on a busy machine every call of a run may go to replicas 1
    // and 2 before replica 0's connection is up. Run the client again
    // (a new channel) until replica 0 has refused a call.
    let deadline = support::deadline();
    let mut runs = Vec::new();
    loop {
        let first = attempts.seen().len();
        let settle = Some(Duration::from_millis(300));
        let report = go_client_settled(&binary, &addrs, "team-a", CALLS, Some(5), settle).await;
        let seen = calls(&report);
        let codes: Vec<_> = seen.iter().map(|(code, ..)| code.as_str()).collect();
        assert_eq!(codes, vec!["OK"; CALLS as usize], "{report}");
        runs.push(first..attempts.seen().len());
        if attempts.seen().iter().any(|a| a.pushback_ms.is_some()) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no call reached replica 0 in {} runs",
            runs.len()
        );
    }

    let attempts = attempts.seen();
    let refused: Vec<_> = attempts
        .iter()
        .filter(|a| a.pushback_ms.is_some())
        .collect();
    assert!(refused.iter().all(|a| a.server == 0), "{attempts:?}");
    for run in runs.iter().cloned() {
        let attempts = &attempts[run];
        // Each refusal was followed by its retry, on another replica, at
        // least the pushback later (and not grpc-go's 10 s backoff); from
        // the run's first admitted attempt on, that is (while grpc-go's
        // channel still connects, replica 0 may be the only one it can
        // pick).
        let Some(connected) = attempts.iter().position(|a| a.pushback_ms.is_none()) else {
            continue;
        };
        for pair in attempts[connected..].windows(2) {
            let (refusal, retry) = (pair[0], pair[1]);
            let Some(pushback_ms) = refusal.pushback_ms else {
                continue;
            };
            assert_ne!(retry.server, 0, "{attempts:?}");
            assert!(retry.pushback_ms.is_none(), "{attempts:?}");
            let gap = retry.arrived - refusal.arrived;
            assert!(gap >= Duration::from_millis(pushback_ms), "{attempts:?}");
            assert!(gap < Duration::from_secs(5), "{attempts:?}");
        }
    }
    assert_eq!(
        attempts.len(),
        CALLS as usize * runs.len() + refused.len(),
        "{attempts:?}"
    );
}
