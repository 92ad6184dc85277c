//! Who is admitted at a fixed limit (the controller pinned, so that the
//! rules are what is tested): refusals, fair shares, priority classes.

use std::time::Duration;

use support::limits::{HOLD, burst, call, client, count, outcomes, pushback, request, serve};
use support::wait_until;
use tonic::Code;
use tonic_hotpath::limits::{AdaptiveLimitLayer, Gradient};
use tonic_hotpath::tenant::OrgId;

/// A layer whose limit stays at `limit`.
fn pinned(limit: u32) -> AdaptiveLimitLayer {
    AdaptiveLimitLayer::new().gradient(
        Gradient::default()
            .initial_limit(limit)
            .limits(limit, limit),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_limit_a_call_is_refused_at_once_with_unavailable_and_a_pushback() {
    let layer = pinned(4);
    let handle = layer.handle();
    let (addr, gate) = serve(layer).await;
    let client = client(addr).await;
    let (held, _) = burst(&client, "a", HOLD, 4);
    wait_until("four calls held", || gate.entered() == 4).await;
    assert_eq!(handle.status().in_flight, 4);

    let refused = client
        .clone()
        .unary_echo(request(Some("a"), "more"))
        .await
        .expect_err("refused past the limit");
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");
    assert_eq!(
        refused.message(),
        "server overloaded: concurrency limit 4 reached, tenant \"a\" holds its share (4)"
    );
    assert!(pushback(&refused).is_some_and(|ms| ms >= 1), "{refused:?}");
    assert_eq!(
        gate.entered(),
        4,
        "the refused call never reached the handler"
    );

    gate.open();
    assert_eq!(count(&outcomes(held).await, Code::Ok), 4);
    wait_until("every place given back", || handle.status().in_flight == 0).await;
    assert_eq!(call(&client, Some("a"), "again").await.0, Code::Ok);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_limit_a_tenant_beyond_its_share_is_refused_and_a_light_one_is_not() {
    let layer = pinned(8);
    let handle = layer.handle();
    let (addr, gate) = serve(layer).await;
    let client = client(addr).await;
    // The noisy tenant's quick calls fill a window (its admissions are
    // what the next window judges by); the quiet tenant makes none.
    gate.open();
    let deadline = support::deadline();
    while handle.status().latency.is_zero() {
        assert_eq!(call(&client, Some("noisy"), "quick").await.0, Code::Ok);
        assert!(std::time::Instant::now() < deadline, "no window closed");
    }
    gate.close();
    let entered = gate.entered();
    let (noisy, _) = burst(&client, "noisy", HOLD, 8);
    wait_until("the noisy tenant holds the limit", || {
        gate.entered() == entered + 8
    })
    .await;
    // At the limit, over its share (all of the last window's admissions):
    // refused.
    let refused = call(&client, Some("noisy"), "more").await;
    assert_eq!(refused.0, Code::Unavailable, "{refused:?}");
    assert!(
        refused.1.contains("tenant \"noisy\" holds its share (8)"),
        "{refused:?}"
    );

    // The quiet tenant, light (none of the last window's admissions), is
    // admitted within its share of the calls in flight (4 of 8) and
    // beyond, up to twice the limit in all.
    let (quiet, _) = burst(&client, "quiet", HOLD, 8);
    wait_until("eight quiet calls admitted", || {
        gate.entered() == entered + 16
    })
    .await;
    let ninth = call(&client, Some("quiet"), "ninth").await;
    assert_eq!(ninth.0, Code::Unavailable, "{ninth:?}");
    assert!(
        ninth.1.contains("tenant \"quiet\" holds its share (4)"),
        "{ninth:?}"
    );
    assert_eq!(
        call(&client, Some("noisy"), "more").await.0,
        Code::Unavailable
    );

    gate.open();
    assert_eq!(count(&outcomes(noisy).await, Code::Ok), 8);
    assert_eq!(count(&outcomes(quiet).await, Code::Ok), 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_admissions_to_judge_by_a_tenant_gets_its_share_of_the_calls_in_flight() {
    let (addr, gate) = serve(pinned(4)).await;
    let client = client(addr).await;
    let (noisy, _) = burst(&client, "noisy", HOLD, 4);
    wait_until("the noisy tenant holds the limit", || gate.entered() == 4).await;
    // Two tenants with calls in flight: a share of 2 each.
    let (quiet, _) = burst(&client, "quiet", HOLD, 2);
    wait_until("the quiet tenant's two calls admitted", || {
        gate.entered() == 6
    })
    .await;
    let third = call(&client, Some("quiet"), "third").await;
    assert_eq!(third.0, Code::Unavailable, "{third:?}");
    assert!(third.1.contains("holds its share (2)"), "{third:?}");
    assert_eq!(
        call(&client, Some("noisy"), "more").await.0,
        Code::Unavailable
    );
    gate.open();
    assert_eq!(count(&outcomes(noisy).await, Code::Ok), 4);
    assert_eq!(count(&outcomes(quiet).await, Code::Ok), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_weighted_tenant_gets_its_weighted_share() {
    let layer = pinned(8).tenant_weight(OrgId::new("big").expect("id"), 3);
    let (addr, gate) = serve(layer).await;
    let client = client(addr).await;
    let (small, _) = burst(&client, "small", HOLD, 8);
    wait_until("the small tenant holds the limit", || gate.entered() == 8).await;
    // Weights 3 and 1: the big tenant's share is 8 × 3 ÷ 4 = 6.
    let (big, _) = burst(&client, "big", HOLD, 6);
    wait_until("six big calls admitted", || gate.entered() == 14).await;
    let seventh = call(&client, Some("big"), "seventh").await;
    assert!(seventh.1.contains("holds its share (6)"), "{seventh:?}");
    gate.open();
    assert_eq!(count(&outcomes(small).await, Code::Ok), 8);
    assert_eq!(count(&outcomes(big).await, Code::Ok), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_shed_methods_pass_and_shed_first_ones_go_first() {
    let layer = pinned(4)
        .never_shed_methods(["/hotpath.echo.Echo/UnaryEcho"])
        .shed_first_services(["hotpath.echo.Echo"])
        .shed_first_below(0.5);
    let (addr, gate) = serve(layer).await;
    let client = client(addr).await;
    // Unary calls are never shed: six held at a limit of 4.
    let (held, _) = burst(&client, "a", HOLD, 6);
    wait_until("six never-shed calls held", || gate.entered() == 6).await;
    // The service's other methods are shed first: refused at 2 of 4.
    let mut stream = client.clone();
    let refused = stream
        .server_streaming_echo(request(Some("b"), "batch"))
        .await
        .expect_err("a shed-first call refused");
    assert_eq!(refused.code(), Code::Unavailable);
    assert_eq!(
        refused.message(),
        "server overloaded: shed-first call refused at 6 of 4 in flight"
    );
    gate.open();
    assert_eq!(count(&outcomes(held).await, Code::Ok), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_call_holds_its_place_for_its_whole_life() {
    let layer = pinned(1);
    let handle = layer.handle();
    let (addr, gate) = serve(layer).await;
    let mut client = client(addr).await;
    let mut stream = client
        .server_streaming_echo(request(Some("a"), "first second"))
        .await
        .expect("the stream admitted")
        .into_inner();
    let first = stream.message().await.expect("a message");
    assert_eq!(first.map(|m| m.message).as_deref(), Some("first"));
    // Its first message is out; the stream still holds the one place.
    assert_eq!(handle.status().in_flight, 1);
    assert_eq!(call(&client, Some("a"), "x").await.0, Code::Unavailable);
    gate.open();
    while stream
        .message()
        .await
        .expect("the stream ends well")
        .is_some()
    {}
    wait_until("the stream's place given back", || {
        handle.status().in_flight == 0
    })
    .await;
    assert_eq!(call(&client, Some("a"), "x").await.0, Code::Ok);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_gives_its_place_back() {
    let layer = pinned(1);
    let handle = layer.handle();
    let (addr, gate) = serve(layer).await;
    let client = client(addr).await;
    let mut timed = request(Some("a"), HOLD);
    timed.set_timeout(Duration::from_millis(200));
    let expired = client.clone().unary_echo(timed).await.expect_err("expired");
    assert!(
        matches!(expired.code(), Code::Cancelled | Code::DeadlineExceeded),
        "{expired:?}"
    );
    assert_eq!(gate.entered(), 1);
    wait_until("the cancelled call's place given back", || {
        handle.status().in_flight == 0
    })
    .await;
}
