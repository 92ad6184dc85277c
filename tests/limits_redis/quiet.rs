//! Quiet near the limit: three replicas, one tenant at R = 1 000/s with a
//! burst B = 2 000, a load split 80/15/5 at 1×, 2× and 5× the rate. At
//! every load the fleet asks Redis at most 20 times per 1 000 calls
//! (lease requests and heartbeats together, at the default 1 s heartbeat),
//! and admits `B + R × T` within 2 %. (Under the limit the leases cover
//! half a second of each replica's calls; over it, a replica that learned
//! when the fleet's bucket holds its next batch asks nothing before then.)

use std::time::Duration;

use tonic_hotpath::limits::{Limits, Rate};

use crate::accuracy::fleet_beating;
use crate::fleet::{LOAD, Replica, Run, offer, weighted};
use crate::redis_server::RedisServer;

const RATE: f64 = 1000.0;
const BURST: u32 = 2000;
const LOAD_TIME: Duration = Duration::from_secs(10);

/// Three replicas at the default heartbeat (1 s), operations timing out
/// after 10 s (see `accuracy::answering_fleet`: the bounds are those of a
/// Redis that answers).
async fn fleet(redis: &RedisServer, prefix: &str) -> Vec<Replica> {
    let limits = Limits::unlimited().with_rate(Rate::new(RATE, BURST).expect("a valid rate"));
    fleet_beating(
        redis,
        prefix,
        limits,
        Duration::from_secs(10),
        Duration::from_secs(1),
    )
    .await
}

/// Redis commands so far: lease requests (answered or not) and heartbeats.
fn commands(replicas: &[Replica]) -> (u64, u64) {
    replicas.iter().fold((0, 0), |(leases, beats), replica| {
        let status = replica.handle.shared_status().expect("a shared backend");
        (
            leases + status.leases + status.failed_leases,
            beats + status.heartbeats,
        )
    })
}

/// `B + R × span`.
fn budget(span: Duration) -> f64 {
    f64::from(BURST) + RATE * span.as_secs_f64()
}

/// One load: its figures printed as a row of the BENCHMARKS table; its
/// bounds checked (what failed, in words).
async fn one_load(redis: &RedisServer, times: u64) -> Vec<String> {
    let replicas = fleet(redis, &format!("quiet-{times}x")).await;
    let (leases_before, beats_before) = commands(&replicas);
    let offered = RATE as u64 * times;
    let run: Run = offer(&replicas, "t", offered, LOAD_TIME, weighted([16, 3, 1])).await;
    let (leases_after, beats_after) = commands(&replicas);
    let leases = leases_after - leases_before;
    let beats = beats_after - beats_before;
    let calls = run.offered as f64;
    let admitted = run.admitted() as f64;
    let per_thousand = (leases + beats) as f64 * 1000.0 / calls;
    let pushback = run
        .answers
        .iter()
        .map(|answers| {
            answers
                .max_pushback_ms
                .load(std::sync::atomic::Ordering::Relaxed)
        })
        .max()
        .unwrap_or(0);
    eprintln!(
        "quiet {times}×: {} calls, {} admitted (budget {:.0}..{:.0}); {leases} lease requests + \
         {beats} heartbeats = {per_thousand:.1} commands per 1 000 calls ({:.1} per 1 000 \
         admitted); largest pushback {pushback} ms; per replica admitted/offered {}",
        run.offered,
        run.admitted(),
        budget(run.shortest),
        budget(run.longest),
        (leases + beats) as f64 * 1000.0 / admitted,
        run.per_replica()
    );
    for replica in &replicas {
        let status = replica.handle.shared_status().expect("a shared backend");
        assert_eq!(
            status.time_down,
            Duration::ZERO,
            "Redis stopped answering within 10 s during the run: {status:?}"
        );
    }
    let mut failed = Vec::new();
    if admitted > budget(run.longest) * 1.02 {
        failed.push(format!(
            "{times}×: over-admitted: {admitted} > 1.02 × {:.0}",
            budget(run.longest)
        ));
    }
    // At 1× every call fits the budget: all of them are the bound.
    let floor = budget(run.shortest).min(calls) * 0.98;
    if admitted < floor {
        failed.push(format!("{times}×: under-admitted: {admitted} < {floor:.0}"));
    }
    if per_thousand > 20.0 {
        failed.push(format!(
            "{times}×: {per_thousand:.1} Redis commands per 1 000 calls"
        ));
    }
    failed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn near_and_over_the_limit_the_fleet_asks_redis_at_most_20_times_per_1000_calls() {
    let Some(redis) = RedisServer::start(&[]).await else {
        return;
    };
    let _turn = LOAD.lock().await;
    let mut failed = Vec::new();
    for times in [1, 2, 5] {
        failed.extend(one_load(&redis, times).await);
    }
    assert!(failed.is_empty(), "{}", failed.join("; "));
}
