//! `TenantLimitLayer` over a real tonic server and client on 127.0.0.1:
//! in-flight and rate limits under concurrent calls, other tenants
//! unaffected, limits changed while calls run, either order with
//! `RequireOrgIdLayer`, federated ids, per-method scope and plain HTTP.
use support::stacks;

use support::limits::{FAIL, HOLD, burst, call, client, count, outcomes, serve, wait_for};
use tonic::Code;
use tonic_hotpath::limits::{Limits, Rate, TenantLimitLayer};
use tonic_hotpath::tenant::{OrgId, RequireOrgIdLayer};
use tower::ServiceBuilder;

fn id(text: &str) -> OrgId {
    OrgId::new(text).expect("valid org id")
}

fn in_flight(max: u32) -> Limits {
    Limits::unlimited().with_max_in_flight(max)
}

fn in_flight_refusal(max: u32, tenant: &str) -> String {
    format!("in-flight request limit ({max}) exceeded for tenant \"{tenant}\"")
}

#[tokio::test]
async fn a_concurrent_burst_gets_exactly_the_in_flight_limit_and_other_tenants_theirs() {
    let layer = TenantLimitLayer::new(in_flight(3));
    let handle = layer.handle();
    let (addr, gate) = serve(layer).await;
    let client = client(addr).await;

    let (team_a, a_done) = burst(&client, "team-a", HOLD, 10);
    let (team_b, _) = burst(&client, "team-b", HOLD, 3);
    // 3 + 3 calls held in the handler; team-a's 7 others refused at once.
    wait_for("held calls", 6, || gate.entered()).await;
    wait_for("team-a's refusals", 7, || {
        a_done.load(std::sync::atomic::Ordering::SeqCst)
    })
    .await;
    assert_eq!(handle.in_flight("team-a"), Some(3));
    assert_eq!(handle.in_flight("team-b"), Some(3));
    // team-c is not held back by the others' full limits.
    assert_eq!(
        call(&client, Some("team-c"), "hi").await,
        (Code::Ok, "hi".into())
    );

    gate.open();
    let team_a = outcomes(team_a).await;
    assert_eq!(count(&team_a, Code::Ok), 3, "{team_a:?}");
    assert_eq!(count(&team_a, Code::ResourceExhausted), 7, "{team_a:?}");
    for (code, message) in &team_a {
        if *code == Code::ResourceExhausted {
            assert_eq!(*message, in_flight_refusal(3, "team-a"));
        }
    }
    let team_b = outcomes(team_b).await;
    assert_eq!(count(&team_b, Code::Ok), 3, "{team_b:?}");
    wait_for("slots given back", Some(0), || handle.in_flight("team-a")).await;
}

#[tokio::test]
async fn a_burst_against_a_rate_gets_exactly_the_burst_then_the_steady_rate() {
    let rate = Rate::new(1.0, 5).expect("valid rate");
    let (addr, _gate) = serve(TenantLimitLayer::new(Limits::unlimited().with_rate(rate))).await;
    let client = client(addr).await;

    let (tasks, _) = burst(&client, "team-a", "hi", 12);
    let first = outcomes(tasks).await;
    assert_eq!(count(&first, Code::Ok), 5, "{first:?}");
    assert_eq!(count(&first, Code::ResourceExhausted), 7, "{first:?}");
    let refusal = first
        .iter()
        .find(|(code, _)| *code == Code::ResourceExhausted)
        .map(|(_, message)| message.as_str());
    assert_eq!(
        refusal,
        Some("request rate limit (1 per second, burst 5) exceeded for tenant \"team-a\"")
    );
    // Another tenant has its own bucket.
    assert_eq!(call(&client, Some("team-b"), "hi").await.0, Code::Ok);

    // One interval later, one more call; the next is refused again.
    tokio::time::sleep(std::time::Duration::from_millis(1_050)).await;
    assert_eq!(call(&client, Some("team-a"), "hi").await.0, Code::Ok);
    assert_eq!(
        call(&client, Some("team-a"), "hi").await.0,
        Code::ResourceExhausted
    );
}

#[tokio::test]
async fn overrides_swapped_while_calls_run_take_effect_and_keep_the_count() {
    let layer = TenantLimitLayer::new(in_flight(2));
    let handle = layer.handle();
    let (addr, gate) = serve(layer).await;
    let client = client(addr).await;

    let (held, _) = burst(&client, "team-a", HOLD, 2);
    wait_for("held calls", 2, || gate.entered()).await;
    assert_eq!(
        call(&client, Some("team-a"), "hi").await.0,
        Code::ResourceExhausted
    );

    // Raised while 2 are in flight: room for 2 more, not 4.
    handle.set_override(id("team-a"), in_flight(4));
    let (more, more_done) = burst(&client, "team-a", HOLD, 3);
    wait_for("calls held under the new limit", 4, || gate.entered()).await;
    wait_for("the refusal over the new limit", 1, || {
        more_done.load(std::sync::atomic::Ordering::SeqCst)
    })
    .await;
    assert_eq!(handle.in_flight("team-a"), Some(4));

    // Lowered below what is in flight: those 4 still count.
    handle.set_override(id("team-a"), in_flight(1));
    assert_eq!(
        call(&client, Some("team-a"), "hi").await,
        (Code::ResourceExhausted, in_flight_refusal(1, "team-a"))
    );
    gate.open();
    assert_eq!(count(&outcomes(held).await, Code::Ok), 2);
    let more = outcomes(more).await;
    assert_eq!(
        (
            count(&more, Code::Ok),
            count(&more, Code::ResourceExhausted)
        ),
        (2, 1)
    );
    wait_for("slots given back", Some(0), || handle.in_flight("team-a")).await;
    assert_eq!(call(&client, Some("team-a"), "hi").await.0, Code::Ok);

    // A new rate applies to the bucket the old one left.
    handle.set_defaults(Limits::unlimited().with_rate(Rate::new(0.01, 2).expect("rate")));
    for _ in 0..2 {
        assert_eq!(call(&client, Some("team-b"), "hi").await.0, Code::Ok);
    }
    assert_eq!(
        call(&client, Some("team-b"), "hi").await.0,
        Code::ResourceExhausted
    );
    handle.set_defaults(Limits::unlimited().with_rate(Rate::new(0.01, 3).expect("rate")));
    assert_eq!(call(&client, Some("team-b"), "hi").await.0, Code::Ok);
    assert_eq!(
        call(&client, Some("team-b"), "hi").await.0,
        Code::ResourceExhausted
    );
    // Back to no limit at all: nothing is counted.
    handle.set_defaults(Limits::unlimited());
    assert_eq!(call(&client, Some("team-b"), "hi").await.0, Code::Ok);
}

#[tokio::test]
async fn either_order_with_require_org_id_limits_alike() {
    for limits_outside in [true, false] {
        let limits = TenantLimitLayer::new(in_flight(1));
        let handle = limits.handle();
        let require = RequireOrgIdLayer::new().allow_multi_tenant(true);
        let (addr, gate) = if limits_outside {
            serve(
                ServiceBuilder::new()
                    .layer(limits)
                    .layer(require)
                    .into_inner(),
            )
            .await
        } else {
            serve(
                ServiceBuilder::new()
                    .layer(require)
                    .layer(limits)
                    .into_inner(),
            )
            .await
        };
        let client = client(addr).await;
        let (held, _) = burst(&client, "team-a", HOLD, 1);
        wait_for("the held call", 1, || gate.entered()).await;
        assert_eq!(
            call(&client, Some("team-a"), "hi").await,
            (Code::ResourceExhausted, in_flight_refusal(1, "team-a")),
            "limits outside: {limits_outside}"
        );
        assert_eq!(
            call(&client, Some("team-a|team-b"), "hi").await.0,
            Code::ResourceExhausted
        );
        assert_eq!(call(&client, Some("team-b"), "hi").await.0, Code::Ok);
        // No org id, or a bad one: RequireOrgIdLayer refuses, in either order.
        assert_eq!(call(&client, None, "hi").await.0, Code::Unauthenticated);
        assert_eq!(
            call(&client, Some("team a"), "hi").await.0,
            Code::InvalidArgument
        );
        gate.open();
        assert_eq!(count(&outcomes(held).await, Code::Ok), 1);
        wait_for("slot given back", Some(0), || handle.in_flight("team-a")).await;
    }
}

#[tokio::test]
async fn calls_without_a_valid_org_id_pass_unlimited_without_require_org_id() {
    let (addr, _gate) = serve(TenantLimitLayer::new(in_flight(0))).await;
    let client = client(addr).await;
    assert_eq!(call(&client, None, "hi").await.0, Code::Ok);
    assert_eq!(call(&client, Some("team a"), "hi").await.0, Code::Ok);
    assert_eq!(
        call(&client, Some("team-a"), "hi").await.0,
        Code::ResourceExhausted
    );
}

#[tokio::test]
async fn a_federated_call_is_charged_to_every_tenant_or_to_none() {
    let layer = TenantLimitLayer::new(in_flight(1))
        .with_override(id("a-big"), in_flight(5))
        .with_override(id("free"), Limits::unlimited());
    let handle = layer.handle();
    let (addr, gate) = serve(layer).await;
    let client = client(addr).await;

    let (held, _) = burst(&client, "b|a|b", HOLD, 1);
    wait_for("the held call", 1, || gate.entered()).await;
    assert_eq!(
        (handle.in_flight("a"), handle.in_flight("b")),
        (Some(1), Some(1))
    );
    for tenant in ["a", "b"] {
        assert_eq!(
            call(&client, Some(tenant), "hi").await,
            (Code::ResourceExhausted, in_flight_refusal(1, tenant))
        );
    }
    // Refused for `b`: `a-big`, charged first (sorted order), gets its
    // place back.
    assert_eq!(
        call(&client, Some("b|a-big"), "hi").await,
        (Code::ResourceExhausted, in_flight_refusal(1, "b"))
    );
    assert_eq!(handle.in_flight("a-big"), Some(0));
    // A tenant without limits is not counted; the others are.
    assert_eq!(call(&client, Some("free|a-big|c"), "hi").await.0, Code::Ok);
    assert_eq!(handle.in_flight("free"), None);

    gate.open();
    assert_eq!(count(&outcomes(held).await, Code::Ok), 1);
    wait_for("slots given back", (Some(0), Some(0)), || {
        (handle.in_flight("a"), handle.in_flight("b"))
    })
    .await;
}

#[tokio::test]
async fn only_the_methods_in_scope_are_limited() {
    let layer = TenantLimitLayer::new(in_flight(0)).only_methods([stacks::UNARY_PATH]);
    let (addr, _gate) = serve(layer).await;
    let client = client(addr).await;
    assert_eq!(
        call(&client, Some("team-a"), "hi").await.0,
        Code::ResourceExhausted
    );
    let mut stream = client
        .clone()
        .server_streaming_echo(support::limits::request(Some("team-a"), "one two"))
        .await
        .expect("streaming calls are out of scope")
        .into_inner();
    assert_eq!(
        stream
            .message()
            .await
            .expect("first message")
            .map(|m| m.message),
        Some("one".into())
    );

    let layer = TenantLimitLayer::new(in_flight(0)).only_services(["hotpath.echo.Echo"]);
    let (addr, _gate) = serve(layer).await;
    let client = support::limits::client(addr).await;
    assert_eq!(
        call(&client, Some("team-a"), "hi").await.0,
        Code::ResourceExhausted
    );
}

#[tokio::test]
async fn an_error_from_the_handler_is_not_a_refusal_and_frees_its_slot() {
    let layer = TenantLimitLayer::new(in_flight(1));
    let handle = layer.handle();
    let (addr, _gate) = serve(layer).await;
    let client = client(addr).await;
    for _ in 0..3 {
        assert_eq!(call(&client, Some("team-a"), FAIL).await.0, Code::Internal);
        wait_for("slot given back", Some(0), || handle.in_flight("team-a")).await;
    }
}

#[tokio::test]
async fn plain_http_over_a_limit_gets_429_with_the_message() {
    use stacks::plain_http::{get_request, http1, spawn_grpc_and_axum};

    let layer = TenantLimitLayer::new(in_flight(0)).with_override(id("ok"), Limits::unlimited());
    let (addr, incoming) = support::bind().await;
    spawn_grpc_and_axum(layer, support::limits::GatedEcho::default(), incoming);

    let mut request = get_request("/healthz");
    request
        .headers_mut()
        .insert("x-scope-orgid", "team-a".parse().expect("value"));
    let reply = http1(addr, request).await;
    assert_eq!(reply.status, http::StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        reply.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(
        reply.text(),
        format!("{}\n", in_flight_refusal(0, "team-a"))
    );

    let mut request = get_request("/healthz");
    request
        .headers_mut()
        .insert("x-scope-orgid", "ok".parse().expect("value"));
    assert_eq!(http1(addr, request).await.text(), "ok");
    assert_eq!(
        http1(addr, get_request("/healthz")).await.status,
        http::StatusCode::OK
    );
}
