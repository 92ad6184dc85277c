//! The crate's own server signals reach the crate's own client:
//! `RetryLayer` waits the pushback of a `TenantLimitLayer` refusal
//! (`RESOURCE_EXHAUSTED`) instead of its 10 s backoff and is admitted; and
//! over three replicas in round robin, a call an overloaded replica
//! refuses (`AdaptiveLimitLayer`'s `UNAVAILABLE`) is admitted on the next.

use std::net::SocketAddr;
use std::time::Duration;

use support::RoundRobin;
use support::limits::grpc_go::{Attempts, serve_health};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;
use tonic_hotpath::limits::{AdaptiveLimitLayer, Limits, Rate, TenantLimitLayer};
use tonic_hotpath::retry::RetryLayer;

/// A retry policy for both refusal codes with a backoff of `backoff`
/// (long, so that a sooner retry was timed by the pushback).
fn config(backoff: &str) -> String {
    format!(
        r#"{{"methodConfig": [{{
            "name": [{{"service": "grpc.health.v1.Health"}}],
            "retryPolicy": {{"maxAttempts": 3, "initialBackoff": "{backoff}",
                "maxBackoff": "{backoff}", "backoffMultiplier": 1,
                "retryableStatusCodes": ["RESOURCE_EXHAUSTED", "UNAVAILABLE"]}}}}]}}"#
    )
}

const SLOW_BACKOFF: &str = "30s";
/// `interop/tenant-go`'s.
const GO_PEER_BACKOFF: &str = "10s";

async fn client(
    addrs: &[SocketAddr],
    backoff: &str,
) -> HealthClient<tonic_hotpath::retry::Retry<RoundRobin>> {
    let mut channels = Vec::new();
    for addr in addrs {
        channels.push(support::connect(*addr).await);
    }
    let round_robin = RoundRobin::new(channels);
    HealthClient::new(
        tower::ServiceBuilder::new()
            .layer(RetryLayer::from_service_config(&config(backoff)).unwrap())
            .service(round_robin),
    )
}

fn request(tenant: &str) -> tonic::Request<HealthCheckRequest> {
    let mut request = tonic::Request::new(HealthCheckRequest::default());
    request
        .metadata_mut()
        .insert("x-scope-orgid", tenant.parse().unwrap());
    request
}

#[tokio::test]
async fn a_rate_refusal_is_retried_after_its_pushback_and_admitted() {
    // A burst of 1, then one call per 4 s: a second call refused unless
    // the machine stalled 4 s between the two (then the next one is).
    let rate = Rate::new(0.25, 1).unwrap();
    let attempts = Attempts::default();
    let layer = TenantLimitLayer::new(Limits::unlimited().with_rate(rate));
    let addr = serve_health(layer, 0, &attempts).await;
    let mut client = client(&[addr], SLOW_BACKOFF).await;
    for _ in 0..3 {
        client.check(request("team-a")).await.unwrap();
        if attempts
            .seen()
            .iter()
            .any(|attempt| attempt.pushback_ms.is_some())
        {
            break;
        }
    }
    let seen = attempts.seen();
    let refused = seen
        .iter()
        .position(|attempt| attempt.pushback_ms.is_some())
        .expect("a call refused for the rate");
    let retry = seen.get(refused + 1).expect("the refused call retried");
    assert_eq!(retry.pushback_ms, None, "the retry admitted: {seen:?}");
    let sent = Duration::from_millis(seen[refused].pushback_ms.unwrap());
    let gap = retry.arrived - seen[refused].arrived;
    assert!(gap >= sent, "retried after {gap:?}, pushback {sent:?}");
    // The policy's own backoff would be at least 24 s.
    assert!(
        gap < sent + Duration::from_secs(10),
        "retried after {gap:?}, pushback {sent:?}"
    );
}

#[tokio::test]
async fn an_overload_refusal_is_retried_on_the_next_replica() {
    const CALLS: usize = 9;
    let attempts = Attempts::default();
    let mut addrs = Vec::new();
    for server in 0..3 {
        // Replica 0 sheds every call (its shed-first threshold is 0).
        let mut layer = AdaptiveLimitLayer::new().never_shed_services(Vec::<&str>::new());
        if server == 0 {
            layer = layer
                .shed_first_services(["grpc.health.v1.Health"])
                .shed_first_below(0.0);
        }
        addrs.push(serve_health(layer, server, &attempts).await);
    }
    let mut client = client(&addrs, GO_PEER_BACKOFF).await;
    for _ in 0..CALLS {
        client.check(request("team-a")).await.unwrap();
    }
    let seen = attempts.seen();
    // Round robin: attempts 0, 3, 6, ... reach replica 0 and are refused,
    // each retried on replica 1 after its pushback.
    let refused: Vec<_> = seen.iter().filter(|a| a.pushback_ms.is_some()).collect();
    assert!(refused.iter().all(|a| a.server == 0), "{seen:?}");
    assert_eq!(
        seen.len(),
        CALLS + refused.len(),
        "one retry per refusal: {seen:?}"
    );
    assert!(seen.len() <= 3 * CALLS, "within maxAttempts × calls");
    for pair in seen.windows(2) {
        if let Some(pushback_ms) = pair[0].pushback_ms {
            assert_ne!(pair[1].server, 0, "{seen:?}");
            assert!(pair[1].arrived - pair[0].arrived >= Duration::from_millis(pushback_ms));
        }
    }
}
