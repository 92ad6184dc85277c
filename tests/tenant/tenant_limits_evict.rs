//! `TenantLimitLayer`'s memory: idle tenants are evicted (and only idle
//! ones: nothing in flight, a full rate bucket, no call since the last
//! sweep), and a flood of 100 000 distinct org ids leaves the tracked
//! tenants bounded and the limits of real tenants intact. In process:
//! requests as tonic hands them to a layer, over an always-ready service.

use std::time::Duration;

use http::{Request, Response};
use support::tenant::{NoOp, call, tonic_request};
use tonic::body::Body;
use tonic_hotpath::limits::{Limits, Rate, ResponseBody, TenantLimitLayer};
use tonic_hotpath::tenant::OrgId;
use tower::Layer;

type Limited = tonic_hotpath::limits::TenantLimit<NoOp>;

fn id(text: &str) -> OrgId {
    OrgId::new(text).expect("valid org id")
}

fn rate(per_second: f64, burst: u32) -> Limits {
    Limits::unlimited().with_rate(Rate::new(per_second, burst).expect("valid rate"))
}

/// One call of `tenant`, its response kept (holding its slot) or dropped
/// by the caller; true if admitted.
fn admit(service: &mut Limited, tenant: &str) -> (bool, Response<ResponseBody<Body>>) {
    let response = call(service, tonic_request(tenant)).expect("ready at once");
    (response.headers().get("grpc-status").is_none(), response)
}

fn admitted(service: &mut Limited, tenant: &str) -> bool {
    admit(service, tenant).0
}

#[test]
fn only_idle_tenants_unused_since_the_last_sweep_are_evicted() {
    let layer = TenantLimitLayer::new(rate(1000.0, 1).with_max_in_flight(10))
        .with_override(id("drained"), rate(0.001, 1))
        .idle_timeout(Duration::from_secs(3600));
    let handle = layer.handle();
    let no_op = NoOp::new();
    let mut service = layer.layer(no_op.clone());

    for i in 0..10 {
        assert!(admitted(&mut service, &format!("t-{i}")));
    }
    let (ok, busy) = admit(&mut service, "busy");
    assert!(ok);
    assert!(admitted(&mut service, "drained"));
    assert_eq!(handle.tracked_tenants(), 12);
    no_op.clear();
    std::thread::sleep(Duration::from_millis(5)); // the 1 ms buckets refill

    assert_eq!(
        handle.evict_idle(),
        0,
        "every tenant was seen since the last sweep"
    );
    assert_eq!(handle.evict_idle(), 10, "the 10 idle tenants");
    assert_eq!(handle.tracked_tenants(), 2);
    assert_eq!(
        handle.in_flight("busy"),
        Some(1),
        "a call in flight keeps its tenant"
    );
    assert_eq!(
        handle.in_flight("drained"),
        Some(0),
        "a bucket not full keeps its tenant"
    );
    // The drained tenant's empty bucket is still there: it was not reset.
    assert!(!admitted(&mut service, "drained"));

    drop(busy);
    assert_eq!(handle.evict_idle(), 1);
    assert_eq!(handle.in_flight("busy"), None);
    // An evicted tenant starts afresh, as it would have anyway.
    assert!(admitted(&mut service, "t-0"));
}

#[test]
fn new_tenants_sweep_once_an_idle_timeout_has_passed() {
    let layer = TenantLimitLayer::new(Limits::unlimited().with_max_in_flight(1))
        .idle_timeout(Duration::from_millis(30));
    let handle = layer.handle();
    let no_op = NoOp::new();
    let mut service = layer.layer(no_op.clone());
    for i in 0..50 {
        assert!(admitted(&mut service, &format!("t-{i}")));
    }
    assert_eq!(handle.tracked_tenants(), 50);
    // Two idle timeouts without calls: the first new tenant's sweep
    // clears the marks, the next one (an idle timeout later) evicts.
    for round in 0..2 {
        std::thread::sleep(Duration::from_millis(40));
        assert!(admitted(&mut service, &format!("new-{round}")));
    }
    assert_eq!(
        handle.tracked_tenants(),
        2,
        "only the two new tenants are left"
    );
    no_op.clear();
}

#[test]
fn a_flood_of_100_000_ids_stays_under_the_cap_and_real_tenants_keep_their_state() {
    const CAP: usize = 1_000;
    const FLOOD: usize = 100_000;
    // Every tenant: 1 call, then one per 1 000 s; "real" has its own
    // limits (burst 3).
    let layer = TenantLimitLayer::new(rate(0.001, 1))
        .with_override(id("real"), rate(0.001, 3))
        .max_tenants(CAP);
    let handle = layer.handle();
    let no_op = NoOp::new();
    let mut service = layer.layer(no_op.clone());

    assert!(admitted(&mut service, "real"));
    assert!(admitted(&mut service, "real"));
    assert!(admitted(&mut service, "regular"));
    assert!(!admitted(&mut service, "regular"));

    let mut flood_admitted = 0;
    for i in 0..FLOOD {
        if admitted(&mut service, &format!("flood-{i:06}")) {
            flood_admitted += 1;
        }
        if i % 200 == 0 {
            no_op.clear();
        }
    }
    no_op.clear();
    // Bounded: the cap (tenants with an override may come on top).
    assert_eq!(handle.tracked_tenants(), CAP);
    // The flood got a state each until the cap (2 real tenants already
    // tracked), then all of it shared one state and its one token.
    assert_eq!(flood_admitted, CAP - 2 + 1);
    // The real tenants' states are intact: "real" has exactly its third
    // call left, "regular" is still out of tokens.
    assert!(admitted(&mut service, "real"));
    assert!(!admitted(&mut service, "real"));
    assert!(!admitted(&mut service, "regular"));
    // A tenant with an override arriving now gets a state of its own.
    handle.set_override(id("late"), rate(0.001, 2));
    assert!(admitted(&mut service, "late"));
    assert!(admitted(&mut service, "late"));
    assert!(!admitted(&mut service, "late"));
    assert_eq!(handle.tracked_tenants(), CAP + 1);
}

#[test]
fn a_request_without_a_valid_org_id_creates_no_state() {
    let layer = TenantLimitLayer::new(Limits::unlimited().with_max_in_flight(0));
    let handle = layer.handle();
    let no_op = NoOp::new();
    let mut service = layer.layer(no_op.clone());
    for bad in ["", "a b", "..", "__markers__", &"x".repeat(151)] {
        let mut request: Request<Body> = tonic_request("placeholder");
        request.headers_mut().insert(
            "x-scope-orgid",
            http::HeaderValue::from_str(bad).expect("header value"),
        );
        let response = call(&mut service, request).expect("ready");
        assert!(response.headers().get("grpc-status").is_none(), "{bad:?}");
    }
    let mut request = tonic_request("placeholder");
    request.headers_mut().remove("x-scope-orgid");
    assert!(call(&mut service, request).is_some());
    assert_eq!(handle.tracked_tenants(), 0);
}
