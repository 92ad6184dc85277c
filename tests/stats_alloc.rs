//! Allocations the `CombinedLayer` adds per RPC, from a counting allocator:
//! in process on the server stack (deterministic) and over loopback with a
//! real client and server.

mod stats_harness;
mod support;

use std::future::Future;

use http::{Request, Response};
use stats_harness::{
    CountingAllocator, Noop, allocations, call_in_process, unary_body, unary_request,
};
use support::{EchoClient, EchoRequest, EchoServer, EchoService};
use tonic::service::Routes;
use tonic::transport::Server;
use tonic_hotpath::stats::CombinedLayer;
use tower::{Layer, Service, ServiceBuilder};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

const RPCS: u64 = 200;

/// The allocator is global: tests in this binary must not count at the
/// same time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Allocations per call of `one`, after a warm-up, averaged over `RPCS`;
/// the least of three runs, so one-off allocations elsewhere in the process
/// (lazy runtime initialisation) do not count.
fn per_call<F: Future<Output = ()>>(
    runtime: &tokio::runtime::Runtime,
    mut one: impl FnMut() -> F,
) -> f64 {
    runtime.block_on(async {
        for _ in 0..20 {
            one().await;
        }
        let mut least = f64::MAX;
        for _ in 0..3 {
            let before = allocations();
            for _ in 0..RPCS {
                one().await;
            }
            least = least.min((allocations() - before) as f64 / RPCS as f64);
        }
        least
    })
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn routes() -> Routes {
    Routes::new(EchoServer::new(EchoService))
}

fn server_stack<L, B>(layer: L, rt: &tokio::runtime::Runtime) -> f64
where
    L: Layer<Routes>,
    L::Service: Service<Request<tonic::body::Body>, Response = Response<B>> + Clone,
    <L::Service as Service<Request<tonic::body::Body>>>::Error: std::fmt::Debug,
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    let service = layer.layer(routes());
    let body = unary_body("hello");
    per_call(rt, || {
        let service = service.clone();
        let request = unary_request(&body);
        async move {
            assert_eq!(call_in_process(&service, request).await, Some(0));
        }
    })
}

#[test]
fn server_stack_allocations_per_rpc() {
    let _serial = serial();
    let rt = runtime();
    let none = server_stack(tower::layer::util::Identity::new(), &rt);
    let zero = server_stack(CombinedLayer::server(), &rt);
    let one = server_stack(CombinedLayer::server().with(Noop), &rt);
    let two = server_stack(CombinedLayer::server().with(Noop).with(Noop), &rt);
    let eight = server_stack(
        CombinedLayer::server()
            .with(Noop)
            .with(Noop)
            .with(Noop)
            .with(Noop)
            .with(Noop)
            .with(Noop)
            .with(Noop)
            .with(Noop),
        &rt,
    );
    let stacked = server_stack(
        tower::layer::util::Stack::new(
            CombinedLayer::server().with(Noop),
            CombinedLayer::server().with(Noop),
        ),
        &rt,
    );
    eprintln!(
        "server stack allocations per RPC: no layer {none}, 0 handlers {zero}, 1 {one}, 2 {two}, 8 {eight}, 2 stacked {stacked}"
    );
    assert_eq!(zero, none, "no handlers: the inner service unchanged");
    assert_eq!(
        one,
        none + 1.0,
        "one per-RPC allocation for the shared record"
    );
    assert_eq!(two, one, "an extra handler adds no allocation");
    assert_eq!(eight, one, "an extra handler adds no allocation");
    assert_eq!(stacked, none + 2.0, "stacking pays one record per layer");
    assert!(two < stacked);
}

/// Allocations per unary RPC over loopback (client and server on one
/// current-thread runtime) with the given server and client layers.
macro_rules! loopback_rpcs {
    ($server_layer:expr, $client_layer:expr $(,)?) => {
        async {
            let (addr, incoming) = support::bind().await;
            tokio::spawn(
                Server::builder()
                    .layer($server_layer)
                    .add_service(EchoServer::new(EchoService))
                    .serve_with_incoming(incoming),
            );
            let channel = support::connect(addr).await;
            let layered = ServiceBuilder::new().layer($client_layer).service(channel);
            let mut client = EchoClient::new(layered);
            let request = || EchoRequest {
                message: "hello".to_owned(),
            };
            for _ in 0..50 {
                client.unary_echo(request()).await.expect("warm-up rpc");
            }
            let before = allocations();
            for _ in 0..RPCS {
                client.unary_echo(request()).await.expect("rpc");
            }
            (allocations() - before) as f64 / RPCS as f64
        }
    };
}

#[test]
fn loopback_allocations_per_rpc() {
    let _serial = serial();
    let rt = runtime();
    let none = rt.block_on(loopback_rpcs!(
        tower::layer::util::Identity::new(),
        tower::layer::util::Identity::new()
    ));
    let two = rt.block_on(loopback_rpcs!(
        CombinedLayer::server().with(Noop).with(Noop),
        CombinedLayer::client().with(Noop).with(Noop),
    ));
    let eight = rt.block_on(loopback_rpcs!(
        CombinedLayer::server()
            .with(Noop)
            .with(Noop)
            .with(Noop)
            .with(Noop)
            .with(Noop)
            .with(Noop)
            .with(Noop)
            .with(Noop),
        CombinedLayer::client()
            .with(Noop)
            .with(Noop)
            .with(Noop)
            .with(Noop)
            .with(Noop)
            .with(Noop)
            .with(Noop)
            .with(Noop),
    ));
    eprintln!(
        "loopback allocations per RPC (client + server): no layer {none}, 2+2 handlers {two}, 8+8 handlers {eight}"
    );
    // Server: the shared record. Client: the shared record and the request
    // body re-boxed into `tonic::body::Body` for the Channel. Allow a quarter
    // of an allocation of noise from the transport's buffer reuse.
    assert!(
        two - none <= 3.25,
        "2+2 handlers add {} allocations",
        two - none
    );
    assert!(
        (eight - two).abs() <= 0.5,
        "8 vs 2 handlers: {eight} vs {two}"
    );
}
