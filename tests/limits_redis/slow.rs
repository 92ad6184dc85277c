//! A tenant too slow for batches (under one unit a batch) near its limit
//! fetches nothing ahead: a unit fetched ahead would wait on the replica
//! that fetched it while a caller refused elsewhere retries on a third
//! replica, which would then find the fleet's bucket empty (grpc-go's
//! retries over three replicas exhausted their attempts that way). Its
//! next call asks instead, and is judged by the answer.

use std::time::Duration;

use tonic_hotpath::limits::{LeasePolicy, Limits, Rate, RedisBackend, TenantLimitLayer};

use crate::fleet::{LOAD, Replica};
use crate::redis_server::RedisServer;
use support::limits::request;
use support::wait_until;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_tenant_near_its_limit_fetches_no_unit_ahead() {
    let Some(redis) = RedisServer::start(&[]).await else {
        return;
    };
    let _turn = LOAD.lock().await;
    // 4 calls a second: 0.2 units a 50 ms batch.
    let limits = Limits::unlimited().with_rate(Rate::new(4.0, 4).expect("a valid rate"));
    let mut replicas = Vec::new();
    for _ in 0..3 {
        let backend = RedisBackend::builder(redis.url())
            .key_prefix("slow")
            .lease_policy(LeasePolicy::default().answer_wait(Duration::from_secs(5)))
            .heartbeat_interval(Duration::from_millis(200))
            .connect()
            .await
            .expect("connect to redis-server");
        replicas.push(Replica::start(TenantLimitLayer::new(limits).shared(backend)).await);
    }
    wait_until("each replica to count three replicas", || {
        replicas
            .iter()
            .all(|replica| replica.handle.replicas() == 3)
    })
    .await;
    let leases = || {
        replicas[0]
            .handle
            .shared_status()
            .expect("a shared backend")
            .leases
    };
    let mut client = replicas[0].clients[0].clone();

    // The first call goes on credit; its request charges it and leases a
    // third of the 3 units left: 1, short of the 4 asked (near the
    // limit), with 2 left in the bucket (no wait named).
    client
        .unary_echo(request(Some("slow"), "1"))
        .await
        .expect("the first call is admitted");
    wait_until("the first lease's answer", || leases() == 1).await;

    // The second spends the leased unit: the lease is at its low-water
    // mark, but nothing is fetched ahead.
    client
        .unary_echo(request(Some("slow"), "2"))
        .await
        .expect("the second call is admitted from the lease");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(leases(), 1, "a unit fetched ahead for a slow tenant");

    // The third asks, waits for the answer and is admitted by it.
    client
        .unary_echo(request(Some("slow"), "3"))
        .await
        .expect("the third call is admitted by the fleet's answer");
    assert_eq!(leases(), 2);
}
