//! Allocations per in-process unary RPC on the server stack: a call the
//! filter does not select allocates exactly what it allocates under a
//! no-op handler (the lookup, and nothing else; `benches/binlog.rs`
//! measures its time).

use std::io;

use tonic_hotpath::binlog::proto::GrpcLogEntry;
use tonic_hotpath::binlog::{BinaryLog, Filter, Sink};
use tonic_hotpath::stats::CombinedLayer;

use support::alloc_count::allocations_so_far;
use support::stats_harness::{
    Noop, UNARY_PATH, call_in_process, layered_echo_routes, unary_body, unary_request,
};

/// Keeps nothing.
struct Discard;

impl Sink for Discard {
    fn write(&mut self, _: &GrpcLogEntry) -> io::Result<()> {
        Ok(())
    }
}

/// Allocations per in-process echo call through `service` on this thread:
/// after a warm-up, the least of three runs (one-off allocations elsewhere
/// do not count).
async fn per_rpc<S, B>(service: &S) -> f64
where
    S: tower::Service<http::Request<tonic::body::Body>, Response = http::Response<B>> + Clone,
    S::Error: std::fmt::Debug,
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    const CALLS: usize = 200;
    let body = unary_body("hello");
    for _ in 0..50 {
        assert_eq!(
            call_in_process(service, unary_request(&body)).await,
            Some(0)
        );
    }
    let mut least = f64::MAX;
    for _ in 0..3 {
        let before = allocations_so_far();
        for _ in 0..CALLS {
            call_in_process(service, unary_request(&body)).await;
        }
        least = least.min((allocations_so_far() - before) as f64 / CALLS as f64);
    }
    least
}

#[tokio::test(flavor = "current_thread")]
async fn a_call_not_logged_allocates_as_under_a_noop_handler() {
    let noop = per_rpc(&layered_echo_routes(CombinedLayer::server().with(Noop))).await;
    assert!(noop > 0.0, "the installed allocator is the one counted");
    // Excluded by a method clause; not named by any clause.
    for config in [
        "other.Service/*,-hotpath.echo.Echo/UnaryEcho",
        "other.Service/*",
    ] {
        let filter = Filter::parse(config).expect("valid filter");
        assert_eq!(filter.lookup(UNARY_PATH), None, "{config}");
        let log = BinaryLog::builder(filter, Discard)
            .build()
            .expect("writer thread");
        let layer = CombinedLayer::server().with(log.clone());
        let excluded = per_rpc(&layered_echo_routes(layer)).await;
        assert_eq!(excluded, noop, "{config}");
        log.shutdown().expect("nothing to write");
        assert_eq!(log.counts().written, 0, "{config}");
    }
}
