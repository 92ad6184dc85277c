//! A federated call (`a|b`) refused for a tenant whose fleet-wide bucket
//! is empty, on a replica that cannot judge it alone: it waits for the
//! lease's answer, as a single tenant's call does, and its refusal
//! carries the fleet's pushback, not the replica's least one.

use std::time::Duration;

use tonic::Code;
use tonic_hotpath::limits::{LeasePolicy, Limits, Rate, RedisBackend, TenantLimitLayer};

use crate::fleet::{LOAD, Replica};
use crate::redis_server::RedisServer;
use support::limits::{pushback, request};
use support::wait_until;

/// A unit every 250 ms, a burst of 4: the fleet's wait is about 250 ms
/// once the bucket is empty, far above the 10 ms least pushback.
fn limits() -> Limits {
    Limits::unlimited().with_rate(Rate::new(4.0, 4).expect("a valid rate"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_federated_call_waits_for_the_fleets_answer_and_carries_its_pushback() {
    let Some(redis) = RedisServer::start(&[]).await else {
        return;
    };
    let _turn = LOAD.lock().await;
    let mut replicas = Vec::new();
    for _ in 0..2 {
        let backend = RedisBackend::builder(redis.url())
            .key_prefix("federated")
            // Long enough that a busy machine's slow answer is waited for
            // (past it, the least pushback is the documented answer).
            .lease_policy(LeasePolicy::default().answer_wait(Duration::from_secs(5)))
            .heartbeat_interval(Duration::from_millis(200))
            .connect()
            .await
            .expect("connect to redis-server");
        replicas.push(Replica::start(TenantLimitLayer::new(limits()).shared(backend)).await);
    }
    wait_until("each replica to count two replicas", || {
        replicas
            .iter()
            .all(|replica| replica.handle.replicas() == 2)
    })
    .await;
    // Tenant b's fleet bucket emptied through the first replica.
    let call = |replica: usize, org_id: &'static str| {
        let mut client = replicas[replica].clients[0].clone();
        async move { client.unary_echo(request(Some(org_id), "x")).await }
    };
    let mut emptied = false;
    for _ in 0..20 {
        if let Err(status) = call(0, "b").await {
            assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
            if pushback(&status).is_some_and(|ms| ms >= 100) {
                emptied = true;
                break;
            }
        }
    }
    assert!(emptied, "tenant b's fleet bucket never ran dry");
    // The second replica has seen neither tenant. Eight `a|b` calls at
    // once: one may pass on credit (a unit of b's, charged to the fleet);
    // the others find a's and then b's credit used up while the lease
    // requests charging them are in flight (or, once b's answer landed,
    // b's bucket empty by it). Each refusal must carry the fleet's wait:
    // refused at once, or after waiting only for a's answer, those judged
    // before b's answer landed carried the 10 ms least.
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..8 {
        let mut client = replicas[1].clients[i].clone();
        calls.spawn(async move { client.unary_echo(request(Some("a|b"), "x")).await });
    }
    let answers = calls.join_all().await;
    let waits: Vec<u64> = answers
        .iter()
        .filter_map(|answer| answer.as_ref().err())
        .map(|status| {
            assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
            assert!(
                status.message().contains("\"b\""),
                "refused for b: {status:?}"
            );
            pushback(status).expect("a pushback")
        })
        .collect();
    // One may pass on credit, and a unit or two of b's may have come back
    // since its bucket ran dry (one every 250 ms).
    assert!(waits.len() >= 4, "most calls refused: {answers:?}");
    assert!(
        waits.iter().all(|&ms| ms >= 100),
        "pushbacks {waits:?} ms: some the replica's least, not the fleet's (about 250 ms)"
    );
}
