//! Allocations of `TenantLimitLayer` per call (counting allocator), on
//! requests as tonic hands them to a layer: none for an admitted call of a
//! known tenant, alone or under `RequireOrgIdLayer`; with a work rate, one
//! (the budget in the request's extensions), and none per charge.

use support::alloc_count::allocations;
use support::tenant::{NoOp, call, tonic_request};
use tonic_hotpath::limits::{Limits, Rate, TenantLimitLayer};
use tonic_hotpath::tenant::RequireOrgIdLayer;
use tower::{Layer, ServiceBuilder};

/// Limits a call never reaches: every call admitted and counted.
fn generous() -> Limits {
    Limits::unlimited()
        .with_max_in_flight(1_000_000)
        .with_rate(Rate::new(1e9, 1_000_000).expect("valid rate"))
}

/// Allocations of one call of `service` for `tenant` (request set-up and
/// the response's drop excluded), after a warm-up call.
fn steady_allocations<S, B>(service: &mut S, no_op: &NoOp, tenant: &str) -> usize
where
    S: tower::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<B>,
            Error = std::convert::Infallible,
        >,
{
    let warm_up = call(service, tonic_request(tenant)).expect("ready");
    assert!(warm_up.headers().get("grpc-status").is_none(), "admitted");
    drop(warm_up);
    no_op.clear();
    let request = tonic_request(tenant);
    let (count, response) = allocations(|| call(service, request));
    let response = response.expect("ready");
    assert!(response.headers().get("grpc-status").is_none(), "admitted");
    drop(response);
    no_op.clear();
    count
}

#[test]
fn an_admitted_call_of_a_known_tenant_allocates_nothing() {
    let no_op = NoOp::new();
    let bare = steady_allocations(&mut no_op.clone(), &no_op, "team-a");
    let layer = TenantLimitLayer::new(generous());
    let mut limited = layer.layer(no_op.clone());
    for tenant in [
        "team-a",
        "5f1b9a2c-3e4d-4c1a-9f0e-7d2b6a8c4e11",
        &"x".repeat(150),
    ] {
        for _ in 0..3 {
            let with = steady_allocations(&mut limited, &no_op, tenant);
            assert_eq!(with, bare, "{} bytes", tenant.len());
        }
    }
    // A tenant without limits: nothing counted, nothing allocated.
    let mut unlimited = TenantLimitLayer::new(Limits::unlimited()).layer(no_op.clone());
    assert_eq!(steady_allocations(&mut unlimited, &no_op, "team-a"), bare);
}

#[test]
fn under_require_org_id_the_limits_add_no_allocation() {
    let no_op = NoOp::new();
    let mut require = RequireOrgIdLayer::new().layer(no_op.clone());
    let alone = steady_allocations(&mut require, &no_op, "team-a");
    let mut both = ServiceBuilder::new()
        .layer(RequireOrgIdLayer::new())
        .layer(TenantLimitLayer::new(generous()))
        .service(no_op.clone());
    for _ in 0..3 {
        assert_eq!(steady_allocations(&mut both, &no_op, "team-a"), alone);
    }
}

#[test]
fn a_new_tenant_allocates_its_state_once() {
    let no_op = NoOp::new();
    let layer = TenantLimitLayer::new(generous());
    let mut limited = layer.layer(no_op.clone());
    let request = tonic_request("fresh");
    let (first, response) = allocations(|| call(&mut limited, request));
    drop(response);
    no_op.clear();
    let request = tonic_request("fresh");
    let (second, response) = allocations(|| call(&mut limited, request));
    drop(response);
    assert!(first > second, "first {first}, then {second}");
}

#[test]
fn a_work_rate_adds_one_allocation_the_budget_and_a_charge_none() {
    use tonic_hotpath::limits::TenantBudgetExt;

    let no_op = NoOp::new();
    let bare = steady_allocations(&mut no_op.clone(), &no_op, "team-a");
    let work = generous().with_work_rate(Rate::new(1e9, 1_000_000).expect("valid rate"));
    let mut limited = TenantLimitLayer::new(work).layer(no_op.clone());
    for tenant in ["team-a", "5f1b9a2c-3e4d-4c1a-9f0e-7d2b6a8c4e11"] {
        for _ in 0..3 {
            let with = steady_allocations(&mut limited, &no_op, tenant);
            assert_eq!(with, bare + 1, "the budget in the extensions");
        }
    }
    let response = call(&mut limited, tonic_request("team-a")).expect("ready");
    let request = no_op.take().pop().expect("the call reached the service");
    let (count, charged) = allocations(|| request.charge_work(1_000));
    assert_eq!((count, charged), (0, Ok(())));
    let budget = request.tenant_budget().expect("a budget").clone();
    assert_eq!(allocations(|| budget.charge(1)).0, 0);
    drop(response);
}
