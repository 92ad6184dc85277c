//! Work units across three replicas, as Cortex's distributors charge
//! samples: the service charges each request for the samples it carries
//! against the tenant's fleet-wide work rate; the fleet admits
//! `burst + rate × elapsed` samples within one request's worth and 2 %.

use std::sync::Arc;
use std::time::Duration;

use tonic::{Request, Response, Status};
use tonic_hotpath::tenant::limits::{
    Limits, Rate, RedisBackend, TenantBudgetExt, TenantLimitLayer,
};

use crate::fleet::{Answers, LOAD, Replica, offer_message, weighted};
use crate::redis_server::RedisServer;
use crate::support::{EchoRequest, EchoResponse, UnaryHandler, UnaryOnly, wait_until};

/// Samples a second and the burst, for the whole fleet.
const WORK_RATE: f64 = 10_000.0;
const WORK_BURST: u32 = 20_000;
/// Samples each request carries.
const SAMPLES: u64 = 100;

/// A distributor: charges each request the samples its message names.
#[derive(Debug, Default)]
struct Distributor;

#[tonic::async_trait]
impl UnaryHandler for Distributor {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_distributors_admit_the_fleet_work_budget_within_a_request_and_2_percent() {
    let Some(redis) = RedisServer::start("three_distributors", &[]).await else {
        return;
    };
    let _turn = LOAD.lock().await;
    let limits =
        Limits::unlimited().with_work_rate(Rate::new(WORK_RATE, WORK_BURST).expect("a valid rate"));
    let mut replicas = Vec::new();
    for _ in 0..3 {
        let backend = RedisBackend::builder(redis.url())
            .key_prefix("work")
            .heartbeat_interval(Duration::from_millis(200))
            .connect()
            .await
            .expect("connect to redis-server");
        let layer = TenantLimitLayer::new(limits).shared(backend);
        replicas.push(Replica::serving(layer, UnaryOnly(Distributor)).await);
    }
    wait_until("each replica to count three replicas", || {
        replicas
            .iter()
            .all(|replica| replica.handle.replicas() == 3)
    })
    .await;
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
