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

/// The id of each node and the node owning `slot`, from `CLUSTER NODES`
/// as `node` sees it.
fn owner_of(cluster: &RedisCluster, node: usize, slot: u16) -> Option<String> {
    let nodes = cluster.nodes[node].cli(&["cluster", "nodes"]);
    nodes.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let owns = fields.iter().skip(8).any(|range| {
            let (low, high) = range.split_once('-').unwrap_or((range, range));
            match (low.parse::<u16>(), high.parse::<u16>()) {
                (Ok(low), Ok(high)) => (low..=high).contains(&slot),
                _ => false,
            }
        });
        owns.then(|| fields[0].to_owned())
    })
}

/// Each node's id, by `CLUSTER MYID`.
fn ids(cluster: &RedisCluster) -> Vec<String> {
    cluster
        .nodes
        .iter()
        .map(|node| node.cli(&["cluster", "myid"]).trim().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_moved_after_the_slot_map_was_read_is_followed_not_an_outage() {
    let Some(cluster) = RedisCluster::start().await else {
        return;
    };
    let _turn = crate::fleet::LOAD.lock().await;
    let limits = Limits::unlimited().with_rate(Rate::new(100.0, 100).expect("a valid rate"));
    let backend = RedisBackend::builder("unused")
        .cluster(cluster.urls())
        .key_prefix("cluster-moved")
        .heartbeat_interval(Duration::from_millis(200))
        .connect()
        .await
        .expect("connect to the cluster");
    let replica = Replica::start(TenantLimitLayer::new(limits).shared(backend)).await;

    // The tenant's slot moves to another primary (as `redis-cli --cluster
    // reshard` moves an empty slot) after the backend read the slot map.
    let tenant = "moved-tenant";
    let slot: u16 = cluster.nodes[0]
        .cli(&["cluster", "keyslot", tenant])
        .trim()
        .parse()
        .expect("a slot number");
    let ids = ids(&cluster);
    let owner_id = owner_of(&cluster, 0, slot).expect("the slot's owner");
    let owner = ids.iter().position(|id| *id == owner_id).expect("a node");
    let target = (owner + 1) % ids.len();
    let slot_arg = slot.to_string();
    let set = |node: usize, how: &[&str]| {
        let mut args = vec!["cluster", "setslot", slot_arg.as_str()];
        args.extend_from_slice(how);
        let reply = cluster.nodes[node].cli(&args);
        assert_eq!(reply.trim(), "OK", "node {node}: {args:?}");
    };
    set(target, &["importing", &ids[owner]]);
    set(owner, &["migrating", &ids[target]]);
    for node in [target, owner, (owner + 2) % ids.len()] {
        set(node, &["node", &ids[target]]);
    }
    support::wait_until("every node to see the slot moved", || {
        (0..ids.len()).all(|node| owner_of(&cluster, node, slot).as_ref() == Some(&ids[target]))
    })
    .await;

    // The tenant's first lease goes to the old owner, which answers MOVED:
    // followed to the new owner, it is a lease, not a failed one.
    let status = || replica.handle.shared_status().expect("a shared backend");
    replica.clients[0]
        .clone()
        .unary_echo(support::limits::request(Some(tenant), "x"))
        .await
        .expect("the first call is admitted");
    support::wait_until("the first lease's answer", || {
        let status = status();
        status.leases + status.failed_leases >= 1
    })
    .await;
    let status = status();
    assert_eq!((status.leases, status.failed_leases), (1, 0), "{status:?}");
    assert!(status.up, "{status:?}");
}
