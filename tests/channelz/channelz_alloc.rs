//! What channelz costs in memory: allocations per RPC with the channelz
//! handlers on both sides beside no-op handlers on the same stack (the
//! connection linked on both sides, so the sockets count too), and bytes
//! per tracked socket, from a counting allocator.

use support::stats_harness;

use stats_harness::{
    Noop, allocations_per_call, current_thread_runtime, linked_loopback_client, one_rpc,
};
use support::alloc_count::net_bytes_so_far;
use tonic_hotpath::channelz::{ChannelEntry, ServerEntry};
use tonic_hotpath::stats::{ConnInfo, Side, StatsHandler};

const RPCS: u64 = 300;

/// Allocations per loopback unary RPC with `server` and `client` handlers,
/// the connection linked on both sides (client and server on this thread).
fn linked_loopback<S: StatsHandler, C: StatsHandler>(
    rt: &tokio::runtime::Runtime,
    server: S,
    client: C,
) -> f64 {
    let client = rt.block_on(linked_loopback_client(server, client));
    rt.block_on(allocations_per_call(RPCS, || one_rpc(client.clone())))
}

#[test]
fn channelz_handlers_add_no_allocation_per_rpc() {
    let rt = current_thread_runtime();
    let noop = linked_loopback(&rt, Noop, Noop);
    let channelz = linked_loopback(&rt, ServerEntry::new(), ChannelEntry::new("loopback"));
    eprintln!("allocations per loopback RPC: no-op handlers {noop}, channelz handlers {channelz}");
    // hyper allocates now and then (buffer growth): a few hundredths of an
    // allocation per RPC move between runs; a per-RPC allocation is 1.
    assert!(
        channelz < noop + 0.1,
        "channelz counts without allocating: {channelz} vs {noop}"
    );
}

#[test]
fn a_tracked_socket_costs_under_half_a_kib_and_leaves_nothing() {
    const SOCKETS: usize = 10_000;
    let handler = ServerEntry::new();
    let info = |n: usize| {
        let peer = std::net::SocketAddr::from(([127, 0, 0, 2], (n % 60_000) as u16 + 1));
        ConnInfo::new(
            Side::Server,
            Some(peer),
            Some("127.0.0.1:443".parse().unwrap()),
        )
    };
    // Warm the registry's tables.
    drop(
        (0..100)
            .map(|n| handler.tag_conn(&info(n)))
            .collect::<Vec<_>>(),
    );
    let mut sockets = Vec::with_capacity(SOCKETS);
    let before = net_bytes_so_far();
    for n in 0..SOCKETS {
        sockets.push(handler.tag_conn(&info(n)));
    }
    let per_socket = (net_bytes_so_far() - before) as f64 / SOCKETS as f64;
    eprintln!("bytes per tracked socket: {per_socket:.0}");
    assert!(sockets.iter().all(|socket| socket.id().is_some()));
    assert!(per_socket < 512.0, "{per_socket} bytes per socket");
    drop(sockets);
    let left = net_bytes_so_far() - before;
    assert!(left < 4_096, "{left} bytes left after closing every socket");
}
