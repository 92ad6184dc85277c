//! Allocation counts of org-id extraction, of the server layer and of the
//! client layers, on headers built the way h2 decodes them off the wire
//! (counting allocator).

use std::convert::Infallible;
use std::future::ready;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use http::{Request, Response};
use support::alloc_count::allocations;
use support::tenant::{NoOp, call, tonic_request, wire_headers};
use tonic::body::Body;
use tonic::metadata::MetadataMap;
use tonic_hotpath::metadata::{OutgoingMetadata, OutgoingMetadataLayer};
use tonic_hotpath::tenant::{self, OrgId, RequireOrgIdLayer, SetOrgIdLayer};
use tower::{BoxError, Layer, Service, ServiceBuilder, service_fn};

fn metadata(org_id: &str) -> MetadataMap {
    MetadataMap::from_headers(wire_headers(org_id))
}

#[test]
fn borrowed_extraction_allocates_nothing() {
    for id in ["team-a", &"x".repeat(150)] {
        let md = metadata(id);
        let (count, got) = allocations(|| tenant::extract(&md).map(str::len));
        assert_eq!(got, Ok(id.len()));
        assert_eq!(count, 0, "{} bytes", id.len());
    }
}

#[test]
fn owned_extraction_of_ids_up_to_the_inline_capacity_allocates_nothing() {
    let uuid = "5f1b9a2c-3e4d-4c1a-9f0e-7d2b6a8c4e11";
    let longest_inline = "y".repeat(OrgId::INLINE_CAPACITY);
    for id in ["team-a", uuid, &longest_inline] {
        let md = metadata(id);
        let (count, owned) = allocations(|| tenant::extract_owned(&md));
        assert_eq!(owned.unwrap(), id);
        assert_eq!(count, 0, "{id}");
    }
}

#[test]
fn owned_extraction_of_longer_ids_allocates_once_and_clones_for_free() {
    let long = "z".repeat(OrgId::INLINE_CAPACITY + 1);
    let md = metadata(&long);
    let (count, owned) = allocations(|| tenant::extract_owned(&md));
    let owned = owned.unwrap();
    assert_eq!(count, 1);
    let (count, clone) = allocations(|| owned.clone());
    assert_eq!((count, clone), (0, owned));
}

#[test]
fn single_tenant_ids_allocate_nothing_several_do() {
    let md = metadata("solo");
    let (count, ids) = allocations(|| tenant::extract_tenant_ids(&md));
    assert_eq!(ids.unwrap().as_slice(), ["solo"]);
    assert_eq!(count, 0);
    let md = metadata("b|a|b");
    let (count, ids) = allocations(|| tenant::extract_tenant_ids(&md));
    assert_eq!(ids.unwrap().as_slice(), ["a", "b"]);
    assert!(count > 0);
}

#[test]
fn the_alternatives_cost_more() {
    // Sharing the header's bytes instead of copying inline: the first clone
    // of a wire-decoded value allocates the shared header.
    let md = metadata("team-a");
    let (count, _value) = allocations(|| md.get(tenant::OrgId::HEADER).cloned());
    assert_eq!(count, 1);
    // The full copy (Cortex before its fix): several allocations.
    let md = metadata("team-a");
    let (count, _copy) = allocations(|| md.clone());
    assert!(count >= 10, "{count}");
}

/// Allocations of one call of `service` (request set-up excluded).
fn allocations_of_call<S, B>(service: &mut S) -> (usize, Response<B>)
where
    S: Service<Request<Body>, Response = Response<B>, Error = Infallible>,
{
    let request = tonic_request("team-a");
    let (count, response) = allocations(|| call(service, request));
    (count, response.expect("a no-op call is ready at once"))
}

#[test]
fn the_server_layer_adds_at_most_one_allocation_per_request() {
    let no_op = NoOp::new();
    let mut bare = no_op.clone();
    let mut layered = RequireOrgIdLayer::new().layer(no_op.clone());
    let mut multi = RequireOrgIdLayer::new()
        .allow_multi_tenant(true)
        .layer(no_op.clone());
    for _ in 0..3 {
        let (without, _) = allocations_of_call(&mut bare);
        let (with, response) = allocations_of_call(&mut layered);
        assert!(response.headers().get("grpc-status").is_none());
        assert!(with <= without + 1, "layer: {with}, bare: {without}");
        let (with, _) = allocations_of_call(&mut multi);
        assert!(with <= without + 1, "multi layer: {with}, bare: {without}");
        no_op.clear();
    }
}

#[test]
fn the_server_layer_rejects_in_process_without_calling_the_service() {
    let mut layered = RequireOrgIdLayer::new().layer(service_fn(|_: Request<Body>| {
        ready(Err::<Response<Body>, _>(std::io::Error::other(
            "the inner service must not be called",
        )))
    }));
    let mut request = tonic_request("team-a");
    request.headers_mut().remove(tenant::OrgId::HEADER);
    let mut cx = Context::from_waker(Waker::noop());
    let Poll::Ready(Ok(response)) = pin!(layered.call(request)).poll(&mut cx) else {
        panic!("expected an immediate gRPC error response");
    };
    assert_eq!(response.headers()["grpc-status"], "16"); // UNAUTHENTICATED
    assert_eq!(response.headers()["content-type"], "application/grpc");
}

/// Allocations of one call of a client-side `service` (request set-up,
/// attaching `chain` included, excluded).
fn allocations_of_client_call<S>(service: &mut S, chain: Option<&OutgoingMetadata>) -> usize
where
    S: Service<Request<Body>, Response = Response<Body>, Error = BoxError>,
{
    let mut request = tonic_request("unused");
    request.headers_mut().remove(tenant::OrgId::HEADER);
    if let Some(chain) = chain {
        request.extensions_mut().insert(chain.clone());
    }
    let mut cx = Context::from_waker(Waker::noop());
    let (count, poll) =
        allocations(|| pin!(service.call(request)).poll(&mut cx).map(|r| r.is_ok()));
    assert_eq!(poll, Poll::Ready(true));
    count
}

/// `SetOrgIdLayer` judges the request's headers only. Above an
/// `OutgoingMetadataLayer`, with a chain pending (attached, or in the
/// task's scope), it claims the org id it checked: one allocation (the
/// claim's extension box), and the metadata layer judging the chain against
/// the claim adds none. Below it (the chain already in the headers, the
/// scope hidden) it claims nothing and adds no allocation.
#[test]
fn the_client_layers_add_one_allocation_for_the_claim_above_and_none_below() {
    let no_op = NoOp::new();
    let id = OrgId::new("team-a").unwrap();
    let chain = OutgoingMetadata::new()
        .append_static("x-request-id", "42")
        .unwrap()
        .append_static("x-scope-orgid", "team-a")
        .unwrap();
    let mut metadata_only = ServiceBuilder::new()
        .layer(OutgoingMetadataLayer::new())
        .map_err(BoxError::from)
        .service(no_op.clone());
    let mut set_outside = ServiceBuilder::new()
        .layer(SetOrgIdLayer::new(id.clone()))
        .layer(OutgoingMetadataLayer::new())
        .service(no_op.clone());
    let mut set_inside = ServiceBuilder::new()
        .layer(OutgoingMetadataLayer::new())
        .layer(SetOrgIdLayer::new(id.clone()))
        .service(no_op.clone());
    for _ in 0..3 {
        let attached = Some(&chain);
        let base = allocations_of_client_call(&mut metadata_only, attached);
        let outside = allocations_of_client_call(&mut set_outside, attached);
        let inside = allocations_of_client_call(&mut set_inside, attached);
        assert_eq!((outside, inside), (base + 1, base), "attached chain");

        let scoped = chain.clone().sync_scope(|| {
            [
                allocations_of_client_call(&mut metadata_only, None),
                allocations_of_client_call(&mut set_outside, None),
                allocations_of_client_call(&mut set_inside, None),
            ]
        });
        assert_eq!(
            scoped,
            [scoped[0], scoped[0] + 1, scoped[0]],
            "chain in scope"
        );
        no_op.clear();
    }
}

/// With no chain pending, `SetOrgIdLayer` claims nothing: alone, or above
/// or below an `OutgoingMetadataLayer`, it adds no allocation.
#[test]
fn without_a_chain_the_org_id_layer_adds_no_allocation() {
    let no_op = NoOp::new();
    let id = OrgId::new("team-a").unwrap();
    let mut bare = ServiceBuilder::new()
        .map_err(BoxError::from)
        .service(no_op.clone());
    let mut metadata_only = ServiceBuilder::new()
        .layer(OutgoingMetadataLayer::new())
        .map_err(BoxError::from)
        .service(no_op.clone());
    let mut set_alone = SetOrgIdLayer::new(id.clone()).layer(no_op.clone());
    let mut set_outside = ServiceBuilder::new()
        .layer(SetOrgIdLayer::new(id.clone()))
        .layer(OutgoingMetadataLayer::new())
        .service(no_op.clone());
    let mut set_inside = ServiceBuilder::new()
        .layer(OutgoingMetadataLayer::new())
        .layer(SetOrgIdLayer::new(id))
        .service(no_op.clone());
    for _ in 0..3 {
        let without = allocations_of_client_call(&mut bare, None);
        let alone = allocations_of_client_call(&mut set_alone, None);
        assert_eq!(alone, without, "SetOrgIdLayer alone");
        let base = allocations_of_client_call(&mut metadata_only, None);
        let outside = allocations_of_client_call(&mut set_outside, None);
        let inside = allocations_of_client_call(&mut set_inside, None);
        assert_eq!(
            (outside, inside),
            (base, base),
            "with OutgoingMetadataLayer"
        );
        no_op.clear();
    }
}
