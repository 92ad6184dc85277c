//! Work units across three replicas, as Cortex's distributors charge
//! samples: the service charges each request for the samples it carries
//! against the tenant's fleet-wide work rate; the fleet admits
//! `burst + rate × elapsed` samples within one request's worth and 2 %.

use std::sync::Arc;
use std::time::Duration;

use tonic::{Request, Response, Status};
use tonic_hotpath::limits::{Limits, Rate, RedisBackend, TenantBudgetExt, TenantLimitLayer};

use crate::fleet::{Answers, LOAD, Replica, offer_message, weighted};
use crate::redis_server::RedisServer;
use support::{EchoOverride, EchoRequest, EchoResponse, wait_until};

/// Samples a second and the burst, for the whole fleet.
const WORK_RATE: f64 = 10_000.0;
const WORK_BURST: u32 = 20_000;
/// Samples each request carries.
const SAMPLES: u64 = 100;

/// A distributor: charges each request the samples its message names.
#[derive(Debug, Default)]
struct Distributor;

#[tonic::async_trait]
impl EchoOverride for Distributor {
    async fn unary(&self, request: Request<EchoRequest>) -> Result<Response<EchoResponse>, Status> {
        let samples: u64 = request
            .get_ref()
            .message
            .parse()
            .map_err(|_| Status::invalid_argument("not a number of samples"))?;
        request.charge_work(samples)?;
        Ok(Response::new(EchoResponse {
            message: "accepted".to_owned(),
        }))
    }
}

/// Three distributors sharing the tenant's work rate through `redis`
/// under `prefix`, once each sees the other two.
async fn distributors(redis: &RedisServer, prefix: &str) -> Vec<Replica> {
    let limits =
        Limits::unlimited().with_work_rate(Rate::new(WORK_RATE, WORK_BURST).expect("a valid rate"));
    let mut replicas = Vec::new();
    for _ in 0..3 {
        let backend = RedisBackend::builder(redis.url())
            .key_prefix(prefix)
            .heartbeat_interval(Duration::from_millis(200))
            .connect()
            .await
            .expect("connect to redis-server");
        let layer = TenantLimitLayer::new(limits).shared(backend);
        replicas.push(Replica::serving(layer, Distributor).await);
    }
    wait_until("each replica to count three replicas", || {
        replicas
            .iter()
            .all(|replica| replica.handle.replicas() == 3)
    })
    .await;
    replicas
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_distributors_admit_the_fleet_work_budget_within_a_request_and_2_percent() {
    let Some(redis) = RedisServer::start(&[]).await else {
        return;
    };
    let _turn = LOAD.lock().await;
    let replicas = distributors(&redis, "work").await;
    // Twice the work rate in requests (200/s of 100 samples), 80/15/5, 10 s.
    let answers: Vec<Arc<Answers>> = replicas.iter().map(|_| Arc::default()).collect();
    let run = offer_message(
        &replicas,
        &answers,
        "t",
        &SAMPLES.to_string(),
        200,
        Duration::from_secs(10),
        weighted([16, 3, 1]),
    )
    .await;
    let samples = (run.admitted() * SAMPLES) as f64;
    let budget = |span: Duration| f64::from(WORK_BURST) + WORK_RATE * span.as_secs_f64();
    eprintln!(
        "work: {samples} samples admitted over {:?}..{:?}, budget {:.0}..{:.0}",
        run.shortest,
        run.longest,
        budget(run.shortest),
        budget(run.longest)
    );
    let request = SAMPLES as f64;
    assert!(
        samples <= budget(run.longest) * 1.02 + request,
        "over-admitted: {samples} samples"
    );
    assert!(
        samples >= budget(run.shortest) * 0.98 - request,
        "under-admitted: {samples} samples"
    );
}

/// Redis killed under the 80/15/5 split at twice the work rate: each
/// distributor falls back to its recent share of the tenant's work
/// traffic, so the fleet goes on admitting about the work rate, never
/// above it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_redis_falls_back_to_each_distributors_share_of_the_work() {
    let Some(mut redis) = RedisServer::start(&[]).await else {
        return;
    };
    let _turn = LOAD.lock().await;
    let replicas = distributors(&redis, "work-share").await;
    let answers: Vec<Arc<Answers>> = replicas.iter().map(|_| Arc::default()).collect();
    let samples = SAMPLES.to_string();
    let load = offer_message(
        &replicas,
        &answers,
        "t",
        &samples,
        200,
        Duration::from_secs(10),
        weighted([16, 3, 1]),
    );
    let control = async {
        // Three seconds of shared buckets, then Redis gone; the fallback
        // buckets' bursts (their share of 20 000) drain within two seconds;
        // then three seconds of the fallback's rate, and what the machine
        // delivered of the offered load meanwhile.
        tokio::time::sleep(Duration::from_secs(3)).await;
        redis.kill();
        wait_until("the backends down", || {
            replicas.iter().all(|replica| {
                replica
                    .handle
                    .shared_status()
                    .is_some_and(|status| !status.up)
            })
        })
        .await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let count = |pick: fn(&Answers) -> u64| answers.iter().map(|a| pick(a)).sum::<u64>();
        let start = std::time::Instant::now();
        let (admitted, answered) = (
            count(Answers::admitted),
            count(|a| a.admitted() + a.refused()),
        );
        tokio::time::sleep(Duration::from_secs(3)).await;
        let seconds = start.elapsed().as_secs_f64();
        let fallback = (count(Answers::admitted) - admitted) as f64 * SAMPLES as f64 / seconds;
        let delivered = (count(|a| a.admitted() + a.refused()) - answered) as f64 / seconds;
        (fallback, delivered)
    };
    let (_run, (fallback, delivered)) = tokio::join!(load, control);
    eprintln!(
        "work killed under 80/15/5 at 2×: fallback {fallback:.0} samples/s ({:.2} of the work \
         rate) of {delivered:.0} requests/s delivered",
        fallback / WORK_RATE
    );
    assert!(
        fallback <= 1.02 * WORK_RATE,
        "the fallback admitted {fallback:.0} samples/s, above the fleet's {WORK_RATE}"
    );
    let floor = 0.9 * WORK_RATE * (delivered / 200.0).min(1.0);
    assert!(
        fallback >= floor,
        "the fallback admitted {fallback:.0} samples/s, below {floor:.0} (0.9 of the rate, of \
         what was delivered)"
    );
}
