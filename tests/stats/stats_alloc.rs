//! Allocations the `CombinedLayer` adds per RPC, from a counting allocator:
//! in process on the server stack (deterministic) and over loopback with a
//! real client and server.

use support::stats_harness;

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use stats_harness::{
    allocations_per_call, allocations_per_in_process_rpc, current_thread_runtime, echo_transport,
    layered_echo_routes, one_rpc, open_linked_connection,
};
use support::{EchoClient, EchoServer, EchoService, combined, loopback_client};
use tonic::codegen::StdError;
use tonic_hotpath::stats::{CombinedLayer, RpcInfo, ServerSide, StatsHandler};
use tower::Layer;

const RPCS: u64 = 200;

fn per_call<F: Future>(runtime: &tokio::runtime::Runtime, one: impl FnMut() -> F) -> f64 {
    runtime.block_on(allocations_per_call(RPCS, one))
}

/// Allocations per in-process RPC through the echo `Routes` under `$layer`.
macro_rules! server_stack {
    ($layer:expr, $rt:expr) => {
        $rt.block_on(allocations_per_in_process_rpc(
            &layered_echo_routes($layer),
            RPCS,
        ))
    };
}

#[test]
fn server_stack_allocations_per_rpc() {
    let rt = current_thread_runtime();
    let none = server_stack!(tower::layer::util::Identity::new(), rt);
    let zero = server_stack!(CombinedLayer::server(), rt);
    let one = server_stack!(combined!(server, 1), rt);
    let two = server_stack!(combined!(server, 2), rt);
    let eight = server_stack!(combined!(server, 8), rt);
    let stacked = server_stack!(combined!(server, stacked), rt);
    eprintln!(
        "server stack allocations per RPC: no layer {none}, 0 handlers {zero}, 1 {one}, 2 {two}, 8 {eight}, 2 stacked {stacked}"
    );
    assert_eq!(zero, none, "no handlers: the inner service unchanged");
    // Per-RPC records come from the layer's free list in steady state.
    assert_eq!(one, none, "a recycled record: no allocation per RPC");
    assert_eq!(two, none, "an extra handler adds no allocation");
    assert_eq!(eight, none, "an extra handler adds no allocation");
    assert_eq!(stacked, none, "each stacked layer recycles its records");
}

/// Allocations per unary RPC over loopback (client and server on one
/// current-thread runtime).
fn loopback<T>(rt: &tokio::runtime::Runtime, client: EchoClient<T>) -> f64
where
    T: tonic::client::GrpcService<tonic::body::Body> + Clone,
    T::Error: Into<StdError>,
    T::ResponseBody: http_body::Body<Data = Bytes> + Send + 'static,
    <T::ResponseBody as http_body::Body>::Error: Into<StdError> + Send,
{
    per_call(rt, || one_rpc(client.clone()))
}

#[test]
fn loopback_allocations_per_rpc() {
    let rt = current_thread_runtime();
    let identity = tower::layer::util::Identity::new;
    let none = loopback(&rt, rt.block_on(loopback_client!(identity(), identity())));
    let two = loopback(
        &rt,
        rt.block_on(loopback_client!(combined!(server, 2), combined!(client, 2))),
    );
    let eight = loopback(
        &rt,
        rt.block_on(loopback_client!(combined!(server, 8), combined!(client, 8))),
    );
    let stacked = loopback(
        &rt,
        rt.block_on(loopback_client!(
            combined!(server, stacked),
            combined!(client, stacked)
        )),
    );
    eprintln!(
        "loopback allocations per RPC (client + server): no layer {none}, 2+2 handlers {two}, 8+8 handlers {eight}, 2+2 stacked {stacked}"
    );
    // Records are recycled on both sides; what remains is the client's
    // request body re-boxed into `tonic::body::Body` for the Channel, once
    // per client layer. (Averages: allow a twentieth of an allocation of
    // transport noise.)
    let close = |added: f64, expected: f64| (added - expected).abs() < 0.05;
    assert!(close(two - none, 1.0), "2+2 handlers add {}", two - none);
    assert!(
        close(eight - none, 1.0),
        "8+8 handlers add {}",
        eight - none
    );
    assert!(
        close(stacked - none, 2.0),
        "2+2 stacked add {}",
        stacked - none
    );
}

/// Serving through the layer's `StatsIncoming` costs no allocation per
/// RPC: the connections keep tonic's own `TcpConnectInfo` (nothing to put
/// back), and a handler with connection state finds its connection in the
/// layer's registry without allocating.
#[test]
fn stats_incoming_adds_no_allocation_per_rpc() {
    let rt = current_thread_runtime();
    let identity = tower::layer::util::Identity::new;
    let plain = loopback(
        &rt,
        rt.block_on(loopback_client!(combined!(server, 2), identity())),
    );
    let tagged = loopback(
        &rt,
        rt.block_on(served_through_incoming(combined!(server, 2))),
    );
    let with_state = CombinedLayer::server().with(ConnCounter::default());
    let counter = std::sync::Arc::clone(with_state.handler());
    let linked = loopback(&rt, rt.block_on(served_through_incoming(with_state)));
    eprintln!(
        "loopback allocations per RPC, 2 server handlers: {plain}; with StatsIncoming {tagged}; \
         a handler with connection state {linked}"
    );
    assert!(
        (tagged - plain).abs() < 0.05,
        "StatsIncoming adds {}",
        tagged - plain
    );
    assert!(
        counter.0.load(Ordering::Relaxed) >= RPCS,
        "the RPCs were linked to their connection"
    );
    assert!(
        (linked - plain).abs() < 0.05,
        "linking RPCs to their connection adds {}",
        linked - plain
    );
}

/// An echo server behind `layer`, served through `layer.incoming`, and a
/// plain client of it.
async fn served_through_incoming<H: StatsHandler>(
    layer: CombinedLayer<H, ServerSide>,
) -> EchoClient<tonic::transport::Channel> {
    let (addr, incoming) = support::bind().await;
    let incoming = layer.incoming(incoming);
    tokio::spawn(
        tonic::transport::Server::builder()
            .layer(layer)
            .add_service(EchoServer::new(EchoService))
            .serve_with_incoming(incoming),
    );
    EchoClient::new(support::connect(addr).await)
}

/// A handler with connection state: counts the RPCs linked to one.
#[derive(Debug, Default)]
struct ConnCounter(AtomicU64);

impl StatsHandler for ConnCounter {
    type RpcState = ();
    type ConnState = u64;
    const PAYLOAD_TIMES: bool = false;

    fn tag_rpc(&self, _: &RpcInfo<'_>, conn: Option<&u64>) {
        if conn.is_some() {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Counts the RPCs `tag_rpc` saw with a connection.
#[derive(Debug, Default)]
struct SeesConn(AtomicU64);

impl StatsHandler for SeesConn {
    type RpcState = ();
    type ConnState = ();
    const PAYLOAD_TIMES: bool = false;

    fn tag_rpc(&self, _: &RpcInfo<'_>, conn: Option<&()>) {
        if conn.is_some() {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Linking client RPCs to the connection the layer's connector opened
/// costs no allocation: in process, the client layer with a connection
/// open allocates exactly as much per RPC as without a connector.
#[test]
fn client_link_adds_no_allocation_per_rpc() {
    let rt = current_thread_runtime();
    let plain = CombinedLayer::client().with(SeesConn::default());
    let linked = CombinedLayer::client().with(SeesConn::default());
    let _open = rt.block_on(open_linked_connection(&linked));
    let per_rpc = |layer: &CombinedLayer<SeesConn, _>| {
        let service = layer.layer(echo_transport());
        rt.block_on(allocations_per_in_process_rpc(&service, RPCS))
    };
    let (plain_allocs, linked_allocs) = (per_rpc(&plain), per_rpc(&linked));
    eprintln!(
        "in-process client allocations per RPC: {plain_allocs} unlinked, {linked_allocs} linked"
    );
    assert_eq!(plain.handler().0.load(Ordering::Relaxed), 0);
    assert!(
        linked.handler().0.load(Ordering::Relaxed) >= RPCS,
        "RPCs saw the connection"
    );
    assert_eq!(plain_allocs, linked_allocs);
}
