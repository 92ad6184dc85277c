//! A grpc-go v1.85 client with a retry policy, balancing round-robin over
//! three tonic replicas that share one tenant's rate through Redis: each
//! refusal carries the fleet-wide pushback (the time until the shared
//! bucket holds a unit, not the refusing replica's own view), grpc-go
//! waits it out instead of its 10 s backoff, and its retry, on the next
//! replica, is admitted there. The client calls one at a time, so the
//! fleet holds it to `B + R × T` calls (plus the credit bound).
//!
//! Needs `go` (the program in `interop/tenant-go`) and `redis-server`;
//! without either the test says it is skipped, and fails under `CI`.

use std::time::Duration;

use tonic_hotpath::limits::{LeasePolicy, Limits, Rate, RedisBackend, TenantLimitLayer};

use crate::fleet::LOAD;
use crate::redis_server::RedisServer;
use support::go_interop;
use support::limits::grpc_go::{Attempts, calls, go_client, serve_health};
use support::wait_until;

/// The tenant's fleet-wide rate: a unit every 250 ms, a burst of 4.
const RATE: f64 = 4.0;
const BURST: u32 = 4;
const REPLICAS: usize = 3;
/// Calls the client makes, one after the other.
const CALLS: u32 = 12;
/// The attempts per call of the retry policy (grpc-go's `maxAttempts`, as
/// a service would set it: 3).
const ATTEMPTS: u32 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_go_over_three_replicas_waits_the_fleet_pushback_and_is_admitted() {
    let Some(binary) = go_interop::go_program("tenant-go") else {
        return;
    };
    let Some(redis) = RedisServer::start(&[]).await else {
        return;
    };
    let _turn = LOAD.lock().await;
    let limits = Limits::unlimited().with_rate(Rate::new(RATE, BURST).expect("a valid rate"));
    let attempts = Attempts::default();
    let mut addrs = Vec::new();
    let mut handles = Vec::new();
    for server in 0..REPLICAS {
        // A call its replica cannot judge alone waits for the lease's
        // answer: long enough here that a busy machine's slow answer is
        // still waited for (past the default 20 ms the call would be
        // refused with the least pushback, not the fleet's; the paused
        // Redis test checks that bound).
        let backend = RedisBackend::builder(redis.url())
            .key_prefix("pushback-go")
            .lease_policy(LeasePolicy::default().answer_wait(Duration::from_secs(5)))
            .heartbeat_interval(Duration::from_millis(200))
            .connect()
            .await
            .expect("connect to redis-server");
        let layer = TenantLimitLayer::new(limits).shared(backend);
        handles.push(layer.handle());
        addrs.push(serve_health(layer, server, &attempts).await);
    }
    wait_until("each replica to count three replicas", || {
        handles.iter().all(|handle| handle.replicas() == 3)
    })
    .await;

    let seen = calls(&go_client(&binary, &addrs, "team-a", CALLS, Some(ATTEMPTS)).await);
    let seen_by_servers = attempts.seen();
    let codes: Vec<_> = seen.iter().map(|(code, ..)| code.as_str()).collect();
    assert_eq!(
        codes,
        vec!["OK"; CALLS as usize],
        "every call admitted within {ATTEMPTS} attempts: {seen:?}\nattempts: {seen_by_servers:?}"
    );

    let admitted = seen_by_servers
        .iter()
        .filter(|attempt| attempt.pushback_ms.is_none())
        .count();
    assert_eq!(admitted, CALLS as usize, "{seen_by_servers:?}");
    let refused: Vec<_> = seen_by_servers
        .windows(2)
        .filter_map(|pair| pair[0].pushback_ms.map(|ms| (pair[0], pair[1], ms)))
        .collect();
    let mut report = Vec::new();
    for (refusal, retry, pushback_ms) in &refused {
        let gap = retry.arrived - refusal.arrived;
        let pushback = Duration::from_millis(*pushback_ms);
        report.push(format!(
            "replica {} refused, pushback {pushback_ms} ms; retried {:.1} ms later on replica {} ({})",
            refusal.server,
            gap.as_secs_f64() * 1e3,
            retry.server,
            if retry.pushback_ms.is_none() {
                "admitted"
            } else {
                "refused"
            }
        ));
        // The retry left the client at least the pushback after the
        // refusal arrived, which left the server after the refused attempt
        // arrived; and not the 10 s backoff (up to a second late on a busy
        // machine).
        assert!(gap >= pushback, "{report:#?}");
        assert!(gap < pushback + Duration::from_secs(1), "{report:#?}");
    }
    let first = seen_by_servers.first().expect("attempts").arrived;
    let last = seen_by_servers.last().expect("attempts").arrived;
    let span = (last - first).as_secs_f64();
    let servers: std::collections::BTreeSet<_> = seen_by_servers
        .iter()
        .map(|attempt| attempt.server)
        .collect();
    eprintln!(
        "{} attempts for {CALLS} calls over {span:.3} s on replicas {servers:?}:\n{}",
        seen_by_servers.len(),
        report.join("\n")
    );
    // The fleet held the client to its rate: at most B + R × T calls, and
    // a unit per replica on credit (each replica's least debt bound).
    let bound = f64::from(BURST) + RATE * span + REPLICAS as f64;
    assert!(
        admitted as f64 <= bound,
        "{admitted} calls admitted in {span:.3} s, over B + R × T + {REPLICAS} = {bound:.1}"
    );
    assert!(
        refused.len() >= (CALLS as usize).saturating_sub(BURST as usize + REPLICAS),
        "the calls past the burst and credit were refused first: {report:#?}"
    );
    assert_eq!(servers.len(), REPLICAS, "round-robin reached every replica");
    // Nothing else takes the fleet's units (the client calls one at a
    // time), so waiting the fleet's pushback is enough, wherever the retry
    // lands: a call past the burst takes two attempts. A replica's own view
    // would not be enough: one that last heard from Redis a while ago knows
    // a wait that is over, answers the 10 ms floor, and the retry lands on a
    // replica that knows no better (before the fleet's pushback, every such
    // call took 4 attempts: 12 calls, 33 attempts). The bound leaves room
    // for a retry refused because a stalled machine delivered an answer
    // late (seen once with two test suites running at once).
    let retried = seen_by_servers.len() - CALLS as usize;
    let refused_twice = refused
        .iter()
        .filter(|(_, retry, _)| retry.pushback_ms.is_some())
        .count();
    assert!(
        refused_twice <= 2 && retried <= CALLS as usize,
        "{refused_twice} retries after the fleet's pushback were refused, {retried} retries \
         for {CALLS} calls: {report:#?}"
    );
}
