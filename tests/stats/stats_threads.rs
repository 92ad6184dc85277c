//! The server layer on several threads at once (issue #19): one layered
//! service, cloned per request as tonic does, driven by several OS threads
//! each with its own runtime. Every RPC gets exactly one `End`, the
//! records are recycled per thread (no allocation per RPC on any thread,
//! as on one), and nothing is left behind when the service goes away.

use support::stats_harness;

use std::sync::Arc;

use stats_harness::{allocations_per_in_process_rpc, current_thread_runtime, layered_echo_routes};
use tonic::Code;
use tonic_hotpath::stats::{CombinedLayer, RpcEvent, ShardedCounter, StatsHandler};

const THREADS: usize = 4;
const RPCS: u64 = 300;

/// Counts `Begin`s and successful `End`s.
#[derive(Debug, Default)]
struct Counts {
    begun: ShardedCounter,
    ok: ShardedCounter,
    other: ShardedCounter,
}

impl StatsHandler for Counts {
    type RpcState = ();
    type ConnState = ();
    const PAYLOAD_TIMES: bool = false;

    fn handle_rpc(&self, _: &mut (), event: &RpcEvent<'_>) {
        match event {
            RpcEvent::Begin { .. } => self.begun.add(1),
            RpcEvent::End(end) if end.code == Code::Ok => self.ok.add(1),
            RpcEvent::End(_) => self.other.add(1),
            _ => {}
        }
    }
}

/// Allocations per RPC on each of `THREADS` threads driving `service`
/// (cloned per request) at once.
fn per_thread_allocations<S>(service: &S) -> Vec<f64>
where
    S: tower::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<
                tonic_hotpath::stats::ObservedBody<tonic::body::Body, Arc<Counts>>,
            >,
        > + Clone
        + Send
        + Sync,
    S::Error: std::fmt::Debug,
    S::Future: Send,
{
    let barrier = std::sync::Barrier::new(THREADS);
    std::thread::scope(|scope| {
        let threads: Vec<_> = (0..THREADS)
            .map(|_| {
                let (service, barrier) = (service.clone(), &barrier);
                scope.spawn(move || {
                    let runtime = current_thread_runtime();
                    barrier.wait();
                    runtime.block_on(allocations_per_in_process_rpc(&service, RPCS))
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    })
}

#[test]
fn many_threads_recycle_records_and_deliver_every_end() {
    let counts = Arc::new(Counts::default());
    let service = layered_echo_routes(CombinedLayer::server().with(Arc::clone(&counts)));
    let bare = {
        let routes = layered_echo_routes(tower::layer::util::Identity::new());
        current_thread_runtime().block_on(allocations_per_in_process_rpc(&routes, RPCS))
    };
    let per_thread = per_thread_allocations(&service);
    eprintln!("allocations per RPC: bare {bare}, layered on {THREADS} threads {per_thread:?}");
    for (thread, allocations) in per_thread.iter().enumerate() {
        assert_eq!(
            *allocations, bare,
            "thread {thread}: records recycled per thread"
        );
    }
    // `allocations_per_in_process_rpc` warms up with 50 calls, then makes
    // 3 rounds of `RPCS`.
    let per_thread_rpcs = 50 + 3 * RPCS;
    let total = THREADS as u64 * per_thread_rpcs;
    assert_eq!(counts.begun.get(), total);
    assert_eq!((counts.ok.get(), counts.other.get()), (total, 0));
}

#[test]
fn a_dropped_service_leaves_nothing_behind_on_its_threads() {
    let counts = Arc::new(Counts::default());
    let weak = Arc::downgrade(&counts);
    let service = layered_echo_routes(CombinedLayer::server().with(Arc::clone(&counts)));
    drop(counts);
    per_thread_allocations(&service);
    // The threads have exited: their idle records (holding the handler)
    // went with them; the service itself is the last holder.
    assert!(weak.upgrade().is_some());
    drop(service);
    assert!(weak.upgrade().is_none(), "no record kept the handler alive");
}
