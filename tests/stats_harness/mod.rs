//! Shared by the stats allocation tests and benches: a no-op handler, a
//! counting allocator, and the server stack driven in process (tonic
//! `Routes` + layers, a real gRPC request body, the response body driven
//! to its trailers).
//!
//! Include with `#[path = "../tests/stats_harness/mod.rs"] mod stats_harness;`
//! (benches) or `mod stats_harness;` (tests), next to `support`.
#![allow(dead_code, unreachable_pub)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::{BufMut, Bytes, BytesMut};
use http::{Request, Response};
use http_body::Body;
use http_body_util::BodyExt;
use prost::Message;
use tonic_hotpath::stats::StatsHandler;
use tower::{Service, ServiceExt};

use super::support::EchoRequest;

/// A handler that observes nothing (every method is the no-op default).
#[derive(Debug, Default, Clone, Copy)]
pub struct Noop;

impl StatsHandler for Noop {
    type RpcState = ();
    type ConnState = ();
}

/// Counts heap allocations (all threads).
#[derive(Debug)]
pub struct CountingAllocator;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

/// Allocations so far.
pub fn allocations() -> u64 {
    ALLOCATIONS.load(Ordering::Relaxed)
}

// SAFETY: forwards every call unchanged to the system allocator and only
// adds a relaxed counter increment.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// The unary echo path.
pub const UNARY_PATH: &str = "/hotpath.echo.Echo/UnaryEcho";

/// One length-prefixed `EchoRequest` as a gRPC request body.
pub fn unary_body(message: &str) -> Bytes {
    let request = EchoRequest {
        message: message.to_owned(),
    };
    let mut wire = BytesMut::with_capacity(5 + request.encoded_len());
    wire.put_u8(0);
    wire.put_u32(request.encoded_len() as u32);
    request
        .encode(&mut wire)
        .expect("encode into a sized buffer");
    wire.freeze()
}

/// A unary echo request as tonic's server hands it to user layers.
pub fn unary_request(body: &Bytes) -> Request<tonic::body::Body> {
    Request::builder()
        .method(http::Method::POST)
        .uri(UNARY_PATH)
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(tonic::body::Body::new(http_body_util::Full::new(
            body.clone(),
        )))
        .expect("valid request")
}

/// Calls `service` with `request` and drives the response body to its end;
/// returns the `grpc-status` from the headers (trailers-only) or trailers.
pub async fn call_in_process<S, B>(service: &S, request: Request<tonic::body::Body>) -> Option<i32>
where
    S: Service<Request<tonic::body::Body>, Response = Response<B>> + Clone,
    S::Error: std::fmt::Debug,
    B: Body,
    B::Error: std::fmt::Debug,
{
    let response = service
        .clone()
        .oneshot(request)
        .await
        .expect("in-process call");
    let (parts, body) = response.into_parts();
    let collected = body.collect().await.expect("response body");
    let status = match parts.headers.get("grpc-status") {
        Some(status) => status,
        None => collected.trailers()?.get("grpc-status")?,
    };
    status.to_str().ok()?.parse().ok()
}
