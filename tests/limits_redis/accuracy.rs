//! Three replicas, one tenant at R = 1 000/s with a burst B = 2 000, a
//! load split 80/15/5: the fleet admits `B + R × T` within 2 %; under the
//! local global strategy, the replica with 80 % is held to its third.

use std::time::Duration;

use tonic_hotpath::limits::{Limits, Rate, RedisBackend, TenantLimitLayer};

use crate::fleet::{LOAD, Replica, Run, offer, weighted};
use crate::redis_server::RedisServer;
use support::wait_until;

const RATE: f64 = 1000.0;
const BURST: u32 = 2000;
const LOAD_TIME: Duration = Duration::from_secs(10);
/// Twice the rate: every replica's share of it is refused in part.
const OFFERED: u64 = 2000;

fn limits() -> Limits {
    Limits::unlimited().with_rate(Rate::new(RATE, BURST).expect("a valid rate"))
}

/// Three replicas sharing `redis` under `prefix`, once each sees the
/// other two.
pub async fn shared_fleet(redis: &RedisServer, prefix: &str, limits: Limits) -> Vec<Replica> {
    shared_fleet_with(redis, prefix, limits, Duration::from_millis(250)).await
}

/// [`shared_fleet`] for the accuracy runs: Redis operations time out after
/// 10 s, not 250 ms. A machine busy enough to stall a lease request past
/// 250 ms (seen: calls stalled for seconds while two test suites ran at
/// once) would open the breaker and fall back to the local strategy, the
/// outage tests' subject; the accuracy bounds are those of a Redis that
/// answers, which the run then checks it did (no time down).
async fn answering_fleet(redis: &RedisServer, prefix: &str) -> Vec<Replica> {
    shared_fleet_with(redis, prefix, limits(), Duration::from_secs(10)).await
}

/// [`shared_fleet`] with Redis operations timing out after `timeout`.
pub async fn shared_fleet_with(
    redis: &RedisServer,
    prefix: &str,
    limits: Limits,
    timeout: Duration,
) -> Vec<Replica> {
    fleet_beating(redis, prefix, limits, timeout, Duration::from_millis(200)).await
}

/// [`shared_fleet_with`], each replica's heartbeat every `heartbeat`.
pub async fn fleet_beating(
    redis: &RedisServer,
    prefix: &str,
    limits: Limits,
    timeout: Duration,
    heartbeat: Duration,
) -> Vec<Replica> {
    let mut replicas = Vec::new();
    for _ in 0..3 {
        let backend = RedisBackend::builder(redis.url())
            .key_prefix(prefix)
            .timeout(timeout)
            .heartbeat_interval(heartbeat)
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
    replicas
}

/// `B + R × span`.
fn budget(span: Duration) -> f64 {
    f64::from(BURST) + RATE * span.as_secs_f64()
}

fn report(name: &str, run: &Run) {
    let slowest = run
        .answers
        .iter()
        .map(|answers| {
            answers
                .max_latency_us
                .load(std::sync::atomic::Ordering::Relaxed)
        })
        .max()
        .unwrap_or(0);
    eprintln!(
        "{name}: slowest call {slowest} µs; admitted {} of {} offered over {:?}..{:?} (budget {:.0}..{:.0}); per replica \
         admitted/offered {}",
        run.admitted(),
        run.offered,
        run.shortest,
        run.longest,
        budget(run.shortest),
        budget(run.longest),
        run.per_replica()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_admit_the_fleet_budget_within_2_percent_under_an_uneven_load() {
    let Some(redis) = RedisServer::start(&[]).await else {
        return;
    };
    let _turn = LOAD.lock().await;
    let replicas = answering_fleet(&redis, "accuracy").await;
    let run = offer(&replicas, "t", OFFERED, LOAD_TIME, weighted([16, 3, 1])).await;
    report("shared", &run);
    let admitted = run.admitted() as f64;
    for replica in &replicas {
        let status = replica.handle.shared_status().expect("a shared backend");
        assert_eq!(
            status.time_down,
            Duration::ZERO,
            "Redis stopped answering within 10 s during the run: {status:?}"
        );
    }
    assert!(
        admitted <= budget(run.longest) * 1.02,
        "over-admitted: {admitted} > 1.02 × {:.0}",
        budget(run.longest)
    );
    assert!(
        admitted >= budget(run.shortest) * 0.98,
        "under-admitted: {admitted} < 0.98 × {:.0}",
        budget(run.shortest)
    );
    let statuses: Vec<_> = replicas
        .iter()
        .map(|replica| replica.handle.shared_status().expect("a shared backend"))
        .collect();
    let leases: u64 = statuses.iter().map(|status| status.leases).sum();
    eprintln!(
        "shared: {leases} lease requests ({:.1} per 1 000 admitted), {} failed",
        leases as f64 * 1000.0 / admitted,
        statuses
            .iter()
            .map(|status| status.failed_leases)
            .sum::<u64>()
    );
    assert!(statuses.iter().all(|status| status.up));

    // The same load under the local global strategy: the replica with
    // 80 % of the calls admits its own burst and a third of the rate.
    let local: Vec<Replica> = {
        let mut local = Vec::new();
        for _ in 0..3 {
            local.push(Replica::start(TenantLimitLayer::new(limits()).replicas(3)).await);
        }
        local
    };
    let run_local = offer(&local, "t", OFFERED, LOAD_TIME, weighted([16, 3, 1])).await;
    report("local ÷ 3", &run_local);
    let busiest = run_local.answers[0].admitted() as f64;
    let its_third = f64::from(BURST) + RATE / 3.0 * run_local.longest.as_secs_f64();
    assert!(
        busiest <= its_third * 1.02,
        "the busiest replica admitted {busiest}, above its third ({its_third:.0})"
    );
    // Shared, the same replica may take what the others leave: print both
    // for the record (how much more depends on the machine's pace).
    eprintln!(
        "the busiest replica: {} admitted shared, {busiest} under the local strategy (its third: \
         {its_third:.0})",
        run.answers[0].admitted()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steady_load_under_the_limit_costs_at_most_20_redis_commands_per_1000_calls() {
    let Some(redis) = RedisServer::start(&[]).await else {
        return;
    };
    let _turn = LOAD.lock().await;
    let replicas = answering_fleet(&redis, "steady").await;
    let before: u64 = replicas
        .iter()
        .map(|replica| replica.handle.shared_status().expect("shared").leases)
        .sum();
    // 80 % of the rate, split 80/15/5, for 6 s: every call is admitted.
    let run = offer(
        &replicas,
        "t",
        800,
        Duration::from_secs(6),
        weighted([16, 3, 1]),
    )
    .await;
    let statuses: Vec<_> = replicas
        .iter()
        .map(|replica| replica.handle.shared_status().expect("shared"))
        .collect();
    let leases = statuses.iter().map(|status| status.leases).sum::<u64>() - before;
    let per_thousand = leases as f64 * 1000.0 / run.admitted() as f64;
    let mean_lease = statuses
        .iter()
        .map(|status| status.units_leased)
        .sum::<u64>() as f64
        / statuses.iter().map(|status| status.leases).sum::<u64>() as f64;
    eprintln!(
        "steady: {} of {} admitted; {leases} lease requests, {per_thousand:.1} per 1 000 \
         admitted; {mean_lease:.0} units per lease on average",
        run.admitted(),
        run.offered
    );
    assert_eq!(run.admitted(), run.offered, "under the limit, all admitted");
    assert!(
        per_thousand <= 20.0,
        "{per_thousand:.1} lease requests per 1 000 calls"
    );
}
