//! Pushback over a real tonic server and client on 127.0.0.1: a rate
//! refusal carries `grpc-retry-pushback-ms`, the time until the tenant's
//! bucket admits the call (from the GCRA state at the refusal), at several
//! points after a burst; a call retried after it is admitted; the global
//! strategy's per-replica figure; a federated call's refused tenant's
//! figure; `Retry-After` on plain HTTP; in-flight refusals without one
//! unless configured.
//!
//! The rates are slow (one call per 0.5–20 s), and every figure is checked
//! against bounds derived from the client's own measured times: a call's
//! server time lies between when it was sent and when its answer came.
use support::stacks;

use std::time::{Duration, Instant};

use support::EchoClient;
use support::limits::{
    HOLD, Span, assert_pushback, burst, client, pushback, serve, timed, wait_for,
};
use tonic::transport::Channel;
use tonic::{Code, Status};
use tonic_hotpath::limits::{LimitError, Limits, Rate, TenantLimitLayer};
use tonic_hotpath::tenant::OrgId;

/// An admitted call's span; panics if it was refused.
async fn admitted(client: &EchoClient<Channel>, org_id: &str) -> Span {
    let (result, span) = timed(client, org_id, "hi").await;
    assert!(result.is_ok(), "{org_id}: {result:?}");
    span
}

/// A refused call: its status, pushback (ms) and span.
async fn refused(client: &EchoClient<Channel>, org_id: &str) -> (Status, u64, Span) {
    let (result, span) = timed(client, org_id, "hi").await;
    let status = result.expect_err("refused");
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    let pushback = pushback(&status).unwrap_or_else(|| panic!("no pushback: {status:?}"));
    (status, pushback, span)
}

#[tokio::test]
async fn a_rate_refusal_carries_the_time_until_the_bucket_admits_the_call() {
    // A burst of 3, then one call per 10 s.
    let rate = Rate::new(0.1, 3).expect("valid rate");
    let (addr, _gate) = serve(TenantLimitLayer::new(Limits::unlimited().with_rate(rate))).await;
    let client = client(addr).await;

    let first = admitted(&client, "team-a").await;
    admitted(&client, "team-a").await;
    admitted(&client, "team-a").await;
    let due = Duration::from_secs(10);
    let mut previous = u64::MAX;
    for pause in [0, 150, 400] {
        tokio::time::sleep(Duration::from_millis(pause)).await;
        let (status, pushback, span) = refused(&client, "team-a").await;
        assert_eq!(
            status.message(),
            "request rate limit (0.1 per second, burst 3) exceeded for tenant \"team-a\""
        );
        assert_pushback(pushback, due, first, span);
        assert!(pushback < previous, "{pushback} after {previous}");
        previous = pushback;
    }
    // Another tenant has its own bucket.
    admitted(&client, "team-b").await;
}

#[tokio::test]
async fn a_call_retried_after_its_pushback_is_admitted() {
    // A burst of 2, then one call per 2 s: the interval is what keeps the
    // call after the retried one refused, so it is long beside any stall
    // of a loaded machine.
    let rate = Rate::new(0.5, 2).expect("valid rate");
    let (addr, _gate) = serve(TenantLimitLayer::new(Limits::unlimited().with_rate(rate))).await;
    let client = client(addr).await;

    let first = admitted(&client, "team-a").await;
    admitted(&client, "team-a").await;
    let (_, pushback, span) = refused(&client, "team-a").await;
    assert_pushback(pushback, Duration::from_secs(2), first, span);
    // The pushback later: admitted (a sleep never ends early); the next
    // token comes one interval after the one just taken.
    tokio::time::sleep(Duration::from_millis(pushback)).await;
    admitted(&client, "team-a").await;
    let (_, next, span) = refused(&client, "team-a").await;
    assert_pushback(next, Duration::from_secs(4), first, span);
}

#[tokio::test]
async fn under_the_global_strategy_the_pushback_is_the_per_replica_figure() {
    // 0.2 calls per second for the whole service, on 2 replicas: each
    // replica allows one per 10 s.
    let rate = Rate::new(0.2, 1).expect("valid rate");
    let layer = TenantLimitLayer::new(Limits::unlimited().with_rate(rate)).replicas(2);
    let (addr, _gate) = serve(layer).await;
    let client = client(addr).await;

    let first = admitted(&client, "team-a").await;
    let (status, pushback, span) = refused(&client, "team-a").await;
    assert_eq!(
        status.message(),
        "request rate limit (0.1 per second, burst 1) exceeded for tenant \"team-a\""
    );
    assert_pushback(pushback, Duration::from_secs(10), first, span);
}

#[tokio::test]
async fn a_federated_refusal_carries_the_refused_tenants_figure() {
    // team-b: one call per 20 s; team-a (the defaults): one per 10 s.
    let layer = TenantLimitLayer::new(Limits::unlimited().with_rate(Rate::new(0.1, 1).unwrap()))
        .with_override(
            OrgId::new("team-b").unwrap(),
            Limits::unlimited().with_rate(Rate::new(0.05, 1).unwrap()),
        );
    let (addr, _gate) = serve(layer).await;
    let client = client(addr).await;

    let first = admitted(&client, "team-b").await;
    let (status, pushback, span) = refused(&client, "team-a|team-b").await;
    assert!(status.message().contains("\"team-b\""), "{status:?}");
    assert_pushback(pushback, Duration::from_secs(20), first, span);
    // team-a's token came back.
    admitted(&client, "team-a").await;
}

#[tokio::test]
async fn plain_http_gets_retry_after_in_whole_seconds() {
    use stacks::plain_http::{get_request, http1, spawn_grpc_and_axum};

    let rate = Rate::new(0.1, 1).expect("valid rate");
    let layer = TenantLimitLayer::new(Limits::unlimited().with_rate(rate));
    let (addr, incoming) = support::bind().await;
    spawn_grpc_and_axum(layer, support::limits::GatedEcho::default(), incoming);
    let get = || {
        let mut request = get_request("/healthz");
        request
            .headers_mut()
            .insert("x-scope-orgid", "team-a".parse().expect("value"));
        request
    };

    let sent = Instant::now();
    assert_eq!(http1(addr, get()).await.status, http::StatusCode::OK);
    let reply = http1(addr, get()).await;
    let elapsed = sent.elapsed();
    assert_eq!(reply.status, http::StatusCode::TOO_MANY_REQUESTS);
    // The next token is due 10 s after the first call, less what passed:
    // rounded up to whole seconds.
    let seconds: u64 = reply
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .expect("whole seconds");
    let least = 10 - elapsed.as_secs().min(9);
    assert!((least..=10).contains(&seconds), "{seconds} s");
    assert!(reply.header(LimitError::RETRY_PUSHBACK_MS).is_none());
}

#[tokio::test]
async fn in_flight_refusals_carry_no_pushback_unless_configured() {
    for configured in [None, Some(Duration::from_micros(249_001))] {
        let mut layer = TenantLimitLayer::new(Limits::unlimited().with_max_in_flight(1));
        if let Some(after) = configured {
            layer = layer.in_flight_pushback(after);
        }
        let (addr, gate) = serve(layer).await;
        let client = client(addr).await;

        let (held, _) = burst(&client, "team-a", HOLD, 1);
        wait_for("the held call", 1, || gate.entered()).await;
        let (result, _) = timed(&client, "team-a", "hi").await;
        let status = result.expect_err("refused");
        assert_eq!(status.code(), Code::ResourceExhausted);
        assert_eq!(
            status.message(),
            "in-flight request limit (1) exceeded for tenant \"team-a\""
        );
        assert_eq!(pushback(&status), configured.map(|_| 250), "rounded up");
        gate.open();
        for task in held {
            assert_eq!(task.await.expect("task").0, Code::Ok);
        }
    }
}
