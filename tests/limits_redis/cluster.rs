//! A local 3-primary Redis Cluster: tenants' buckets spread over the
//! primaries (one slot per tenant), and a tenant's limit holds.

use std::time::Duration;

use tonic::Code;
use tonic_hotpath::limits::{Limits, Rate, RedisBackend, TenantLimitLayer};

use crate::fleet::Replica;
use crate::redis_server::RedisCluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_spread_over_a_cluster_and_each_keeps_its_burst() {
    let Some(cluster) = RedisCluster::start().await else {
        return;
    };
    // Taking turns with the load tests: starting and stopping a cluster
    // (three servers, redis-cli) takes CPU from a load test's offered
    // rate, which its bounds assume.
    let _turn = crate::fleet::LOAD.lock().await;
    // A slow rate: each tenant has its burst of 5, then nothing for 100 s.
    let limits = Limits::unlimited().with_rate(Rate::new(0.01, 5).expect("a valid rate"));
    let mut replicas = Vec::new();
    for _ in 0..2 {
        let backend = RedisBackend::builder("unused")
            .cluster(cluster.urls())
            .key_prefix("cluster")
            .heartbeat_interval(Duration::from_millis(200))
            .connect()
            .await
            .expect("connect to the cluster");
        replicas.push(Replica::start(TenantLimitLayer::new(limits).shared(backend)).await);
    }
    // 40 tenants: every primary gets some (a primary holding none of 40
    // random slots has odds of 3 × (2/3)^40, about 3 in 10 million).
    let tenants: Vec<String> = (0..40).map(|i| format!("tenant-{i}")).collect();
    for tenant in &tenants {
        let mut admitted = 0;
        // Calls alternating replicas until both refuse for the fleet's
        // bucket (a pushback of over 50 s: the next unit is 100 s away).
        let mut dry = [false, false];
        for i in 0..400 {
            let replica = i % 2;
            let response = replicas[replica].clients[0]
                .clone()
                .unary_echo(support::limits::request(Some(tenant), "x"))
                .await;
            match response {
                Ok(_) => admitted += 1,
                Err(status) if status.code() == Code::ResourceExhausted => {
                    let pushback = support::limits::pushback(&status).unwrap_or(0);
                    dry[replica] |= pushback > 50_000;
                }
                Err(status) => panic!("{tenant}: {status:?}"),
            }
            if dry == [true, true] {
                break;
            }
        }
        assert_eq!(dry, [true, true], "{tenant}: the bucket never ran dry");
        // The burst, plus at most one call per replica admitted on credit
        // before its first lease (charged to the bucket: the fleet's
        // bucket then owes it).
        assert!(
            (5..=7).contains(&admitted),
            "{tenant}: {admitted} admitted, not the burst of 5"
        );
    }
    // Every primary holds some tenants' buckets.
    for node in &cluster.nodes {
        let keys = node.cli(&["--scan", "--pattern", "cluster:*:calls"]);
        assert!(
            !keys.trim().is_empty(),
            "node {} holds no bucket",
            node.port()
        );
    }
}
