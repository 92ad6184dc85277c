//! Redis killed (SIGKILL) mid-run and restarted, and Redis paused
//! (SIGSTOP): no call waits on Redis, the fleet keeps admitting about R
//! through the fallback (rate ÷ replicas, burst ÷ replicas), and the
//! shared buckets are used again once Redis answers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tonic_hotpath::tenant::limits::{Limits, Rate};

use crate::accuracy::shared_fleet;
use crate::fleet::{Answers, LOAD, Replica, Run, admitted_now, offer_counted, weighted};
use crate::redis_server::RedisServer;
use crate::support::wait_until;

const RATE: f64 = 1000.0;
/// A small burst: each replica's fallback bucket (100 calls) drains within
/// a second of the fallback, and the fleet's rate is then the fallback's.
const BURST: u32 = 300;
/// Each replica is offered 500/s, above its fallback share (333/s).
const OFFERED: u64 = 1500;
/// The longest a call may take: calls never wait on Redis, so this is a
/// loopback gRPC call's time on a busy machine, with a wide margin (the
/// backend's timeout is 250 ms; a call that waited on a dead or paused
/// Redis for its timeout a few times over would show).
const SLOWEST_CALL: Duration = Duration::from_secs(2);

fn limits() -> Limits {
    Limits::unlimited().with_rate(Rate::new(RATE, BURST).expect("a valid rate"))
}

/// Waits until every replica reports its backend up (or down).
async fn wait_for_backends(replicas: &[Replica], up: bool) {
    let what = if up {
        "the backends up"
    } else {
        "the backends down"
    };
    wait_until(what, || {
        replicas.iter().all(|replica| {
            replica
                .handle
                .shared_status()
                .is_some_and(|status| status.up == up)
        })
    })
    .await;
}

fn leases(replicas: &[Replica]) -> u64 {
    replicas
        .iter()
        .map(|replica| replica.handle.shared_status().expect("shared").leases)
        .sum()
}

fn slowest(run: &Run) -> Duration {
    let micros = run
        .answers
        .iter()
        .map(|answers| {
            answers
                .max_latency_us
                .load(std::sync::atomic::Ordering::Relaxed)
        })
        .max()
        .unwrap_or(0);
    Duration::from_micros(micros)
}

fn assert_no_call_waited(run: &Run) {
    let slowest = slowest(run);
    assert!(slowest < SLOWEST_CALL, "a call took {slowest:?}");
}

/// The fleet's admissions per second over the next `window`.
async fn rate_over(answers: &[Arc<Answers>], window: Duration) -> f64 {
    let (start, before) = (Instant::now(), admitted_now(answers));
    tokio::time::sleep(window).await;
    (admitted_now(answers) - before) as f64 / start.elapsed().as_secs_f64()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_redis_falls_back_to_the_local_share_and_resumes_after_a_restart() {
    let Some(mut redis) = RedisServer::start("a_killed_redis_falls_back", &[]).await else {
        return;
    };
    let _turn = LOAD.lock().await;
    let replicas = shared_fleet(&redis, "outage", limits()).await;
    let answers: Vec<Arc<Answers>> = replicas.iter().map(|_| Arc::default()).collect();
    let load = offer_counted(
        &replicas,
        &answers,
        "t",
        OFFERED,
        Duration::from_secs(12),
        weighted([7, 7, 6]),
    );
    let control = async {
        tokio::time::sleep(Duration::from_secs(3)).await;
        redis.kill();
        let killed = Instant::now();
        wait_for_backends(&replicas, false).await;
        let detected = killed.elapsed();
        // The local buckets drain (1.5 s), then the fallback's rate.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let fallback = rate_over(&answers, Duration::from_secs(2)).await;
        redis.restart().await;
        wait_for_backends(&replicas, true).await;
        let leases_back = leases(&replicas);
        (detected, fallback, leases_back)
    };
    let (run, (detected, fallback, leases_back)) = tokio::join!(load, control);
    eprintln!(
        "killed: down detected after {detected:?}; fallback {fallback:.0} admitted/s; \
         admitted {} of {}; slowest call {:?}",
        run.admitted(),
        run.offered,
        slowest(&run)
    );
    assert_no_call_waited(&run);
    assert!(
        (0.8 * RATE..=1.2 * RATE).contains(&fallback),
        "the fallback admitted {fallback:.0}/s, not about {RATE}/s"
    );
    assert!(
        leases(&replicas) > leases_back,
        "no lease after the restart: the shared buckets were not used again"
    );
    for replica in &replicas {
        let status = replica.handle.shared_status().expect("shared");
        assert!(status.up && status.time_down > Duration::ZERO, "{status:?}");
        assert_eq!(
            replica.handle.replicas(),
            3,
            "the count of the fleet is kept"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_redis_makes_no_call_wait_and_is_used_again_when_it_answers() {
    let Some(redis) = RedisServer::start("a_paused_redis_makes_no_call_wait", &[]).await else {
        return;
    };
    let _turn = LOAD.lock().await;
    let replicas = shared_fleet(&redis, "paused", limits()).await;
    let answers: Vec<Arc<Answers>> = replicas.iter().map(|_| Arc::default()).collect();
    let load = offer_counted(
        &replicas,
        &answers,
        "t",
        OFFERED,
        Duration::from_secs(8),
        weighted([7, 7, 6]),
    );
    let control = async {
        tokio::time::sleep(Duration::from_secs(2)).await;
        redis.pause();
        wait_for_backends(&replicas, false).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let during = admitted_now(&answers);
        tokio::time::sleep(Duration::from_millis(500)).await;
        let admitting = admitted_now(&answers) > during;
        redis.resume();
        wait_for_backends(&replicas, true).await;
        let leases_back = leases(&replicas);
        (admitting, leases_back)
    };
    let (run, (admitting, leases_back)) = tokio::join!(load, control);
    eprintln!(
        "paused: admitted {} of {}; slowest call {:?}",
        run.admitted(),
        run.offered,
        slowest(&run)
    );
    assert_no_call_waited(&run);
    assert!(
        admitting,
        "the fallback admitted nothing while Redis was paused"
    );
    assert!(
        leases(&replicas) > leases_back,
        "no lease after Redis resumed"
    );
}
