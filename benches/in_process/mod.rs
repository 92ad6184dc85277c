//! Server layers measured in process, shared by the benches: the echo
//! `Routes` under a layer, a real gRPC request body, the response body
//! driven to its trailers; as criterion rows (with allocations per RPC
//! printed first) and as timed rounds for [`super::interleaved`].
//!
//! Include with `#[path = "in_process/mod.rs"] mod in_process;` next to
//! `interleaved`, `stats_harness` and `support`.
#![allow(dead_code)]

use std::hint::black_box;
use std::time::Instant;

use bytes::Bytes;
use criterion::{BenchmarkGroup, measurement::WallTime};
use http::{Request, Response};
use tokio::runtime::Runtime;
use tonic::service::Routes;
use tower::{Layer, Service};

use super::interleaved::Round;
use support::stats_harness::{
    allocations_per_call, call_in_process, layered_echo_routes, unary_body, unary_request,
};

/// Calls counted for each allocations-per-RPC figure.
pub const ALLOCATION_CALLS: u64 = 500;

/// Calls per timed round of the interleaved measurement.
pub const CALLS_PER_ROUND: u32 = 1_000;

/// Makes each request of a row from the request body.
pub type MakeRequest = fn(&Bytes) -> Request<tonic::body::Body>;

/// A criterion row: in-process unary calls through the echo routes under
/// `layer`, after printing its allocations per RPC.
pub fn in_process<L, B>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    rt: &Runtime,
    name: &str,
    layer: L,
) where
    L: Layer<Routes>,
    L::Service: Service<Request<tonic::body::Body>, Response = Response<B>> + Clone,
    <L::Service as Service<Request<tonic::body::Body>>>::Error: std::fmt::Debug,
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    in_process_with(group, rt, name, layer, unary_request);
}

/// [`in_process`] with each request made by `request` (e.g. carrying
/// more headers).
pub fn in_process_with<L, B>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    rt: &Runtime,
    name: &str,
    layer: L,
    request: MakeRequest,
) where
    L: Layer<Routes>,
    L::Service: Service<Request<tonic::body::Body>, Response = Response<B>> + Clone,
    <L::Service as Service<Request<tonic::body::Body>>>::Error: std::fmt::Debug,
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    service_in_process(group, rt, name, layered_echo_routes(layer), request);
}

/// A criterion row of in-process unary calls to `service` (a server stack
/// over the echo routes), each request made by `request`, after printing
/// its allocations per RPC.
pub fn service_in_process<S, B>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    rt: &Runtime,
    name: &str,
    service: S,
    request: MakeRequest,
) where
    S: Service<Request<tonic::body::Body>, Response = Response<B>> + Clone,
    S::Error: std::fmt::Debug,
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    let body = unary_body("hello");
    let per_rpc = rt.block_on(allocations_per_call(ALLOCATION_CALLS, || {
        let request = request(&body);
        let service = &service;
        async move { assert_eq!(call_in_process(service, request).await, Some(0)) }
    }));
    println!("allocations/rpc  in-process server  {name:<18} {per_rpc:.2}");
    group.bench_function(name, |b| {
        b.to_async(rt)
            .iter(|| async { black_box(call_in_process(&service, request(&body)).await) });
    });
}

/// One timed round of a server layer: `CALLS_PER_ROUND` in-process calls
/// through the echo routes under `layer`.
pub fn round<'a, L, B>(rt: &'a Runtime, layer: L) -> Round<'a>
where
    L: Layer<Routes>,
    L::Service: Service<Request<tonic::body::Body>, Response = Response<B>> + Clone + 'a,
    <L::Service as Service<Request<tonic::body::Body>>>::Error: std::fmt::Debug,
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    service_round(rt, layered_echo_routes(layer))
}

/// [`round`] with each request made by `request`.
pub fn round_with<'a, L, B>(rt: &'a Runtime, layer: L, request: MakeRequest) -> Round<'a>
where
    L: Layer<Routes>,
    L::Service: Service<Request<tonic::body::Body>, Response = Response<B>> + Clone + 'a,
    <L::Service as Service<Request<tonic::body::Body>>>::Error: std::fmt::Debug,
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    service_round_with(rt, layered_echo_routes(layer), request)
}

/// One timed round of `service`: `CALLS_PER_ROUND` in-process calls.
pub fn service_round<'a, S, B>(rt: &'a Runtime, service: S) -> Round<'a>
where
    S: Service<Request<tonic::body::Body>, Response = Response<B>> + Clone + 'a,
    S::Error: std::fmt::Debug,
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    service_round_with(rt, service, unary_request)
}

/// [`service_round`] with each request made by `request`.
pub fn service_round_with<'a, S, B>(rt: &'a Runtime, service: S, request: MakeRequest) -> Round<'a>
where
    S: Service<Request<tonic::body::Body>, Response = Response<B>> + Clone + 'a,
    S::Error: std::fmt::Debug,
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    let body = unary_body("hello");
    Box::new(move || {
        rt.block_on(async {
            let start = Instant::now();
            for _ in 0..CALLS_PER_ROUND {
                black_box(call_in_process(&service, request(&body)).await);
            }
            start.elapsed()
        })
    })
}
