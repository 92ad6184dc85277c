//! Work units over a real tonic server and client on 127.0.0.1: a service
//! shaped like Cortex's distributor decodes how many "samples" a request
//! carries and charges its tenant for them through the `TenantBudget` the
//! layer put into the request (`charge_work`). Charges above the burst,
//! a charge refusal's status and pushback, federated charges all or none,
//! charges without a work rate, and the admitted samples of a run against
//! `burst + rate × elapsed`.
use support::stacks;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::limits::{Span, assert_pushback, client, pushback, timed};
use support::{EchoClient, EchoOverride, EchoRequest, EchoResponse};
use tonic::transport::Channel;
use tonic::{Code, Request, Response, Status};
use tonic_hotpath::limits::{Limits, Rate, TenantBudgetExt, TenantLimitLayer};
use tonic_hotpath::tenant::OrgId;

/// One charge as the service made it: the limiter read its clock between
/// `before` and `after`.
#[derive(Debug, Clone, Copy)]
struct Charge {
    before: Instant,
    after: Instant,
    samples: u64,
    admitted: bool,
}

/// A distributor: each request's message is the number of samples it
/// carries; the service charges its tenant that many, then answers
/// `budget` or `no budget` (whether the layer gave the call a budget).
#[derive(Debug, Default)]
struct Distributor {
    charges: Mutex<Vec<Charge>>,
}

#[tonic::async_trait]
impl EchoOverride for Distributor {
    async fn unary(&self, request: Request<EchoRequest>) -> Result<Response<EchoResponse>, Status> {
        let samples: u64 = request
            .get_ref()
            .message
            .parse()
            .map_err(|_| Status::invalid_argument("not a number of samples"))?;
        let before = Instant::now();
        let charged = request.charge_work(samples);
        let after = Instant::now();
        self.charges.lock().expect("lock").push(Charge {
            before,
            after,
            samples,
            admitted: charged.is_ok(),
        });
        charged?;
        let budget = if request.tenant_budget().is_some() {
            "budget"
        } else {
            "no budget"
        };
        Ok(Response::new(EchoResponse {
            message: budget.to_owned(),
        }))
    }
}

/// A [`Distributor`] behind `layer` on 127.0.0.1; a client and the
/// service (for its charges).
async fn serve(layer: TenantLimitLayer) -> (EchoClient<Channel>, Arc<Distributor>) {
    let distributor = Arc::new(Distributor::default());
    let (addr, incoming) = support::bind().await;
    stacks::spawn_echo(layer, Arc::clone(&distributor), incoming);
    (client(addr).await, distributor)
}

/// Sends a request of `org_id` carrying `samples`.
async fn push(
    client: &EchoClient<Channel>,
    org_id: &str,
    samples: u64,
) -> (Result<EchoResponse, Status>, Span) {
    timed(client, org_id, &samples.to_string()).await
}

/// A push that must be admitted; its span.
async fn admitted(client: &EchoClient<Channel>, org_id: &str, samples: u64) -> Span {
    let (result, span) = push(client, org_id, samples).await;
    assert_eq!(result.expect("admitted").message, "budget");
    span
}

/// A push that must be refused; its status.
async fn refused(client: &EchoClient<Channel>, org_id: &str, samples: u64) -> (Status, Span) {
    let (result, span) = push(client, org_id, samples).await;
    let status = result.expect_err("refused");
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    (status, span)
}

/// 10 samples at once, then one per 1 000 s: refills never matter here.
fn slow_work(burst: u32) -> Limits {
    Limits::unlimited().with_work_rate(Rate::new(0.001, burst).expect("valid rate"))
}

#[tokio::test]
async fn a_charge_above_the_burst_is_refused_and_takes_nothing() {
    let (client, distributor) = serve(TenantLimitLayer::new(slow_work(10))).await;

    let (status, _) = refused(&client, "team-a", 11).await;
    assert_eq!(
        status.message(),
        "work rate limit (0.001 per second, burst 10) exceeded for tenant \"team-a\" by a \
         charge of 11"
    );
    assert_eq!(pushback(&status), None, "no wait makes it pass");
    // The whole burst is still there.
    let first = admitted(&client, "team-a", 10).await;
    let (status, span) = refused(&client, "team-a", 1).await;
    assert!(status.message().ends_with("by a charge of 1"), "{status:?}");
    // The next unit comes 1 000 s after the burst was taken.
    let pushback = pushback(&status).expect("a pushback");
    assert_pushback(pushback, Duration::from_secs(1_000), first, span);
    assert_eq!(distributor.charges.lock().unwrap().len(), 3);
}

#[tokio::test]
async fn a_refused_charge_takes_nothing_and_says_when_it_would_pass() {
    // 1 unit per 100 ms, a burst of 5.
    let work = Limits::unlimited().with_work_rate(Rate::new(10.0, 5).expect("valid rate"));
    let (client, _) = serve(TenantLimitLayer::new(work)).await;

    let first = admitted(&client, "team-a", 3).await;
    // 2 left: 4 need 2 more units, 200 ms after the first charge.
    let (status, span) = refused(&client, "team-a", 4).await;
    assert_pushback(
        pushback(&status).expect("a pushback"),
        Duration::from_millis(200),
        first,
        span,
    );
    // The refused charge took nothing: 2 are still there.
    admitted(&client, "team-a", 2).await;
}

#[tokio::test]
async fn a_federated_charge_is_all_or_none() {
    let layer = TenantLimitLayer::new(slow_work(10))
        .with_override(OrgId::new("team-b").expect("id"), slow_work(4));
    let (client, _) = serve(layer).await;

    admitted(&client, "team-a|team-b", 3).await;
    // team-b has 1 left: refused, and team-a's 3 come back.
    let (status, _) = refused(&client, "team-a|team-b", 3).await;
    assert_eq!(
        status.message(),
        "work rate limit (0.001 per second, burst 4) exceeded for tenant \"team-b\" by a \
         charge of 3"
    );
    // team-a: 7 left (10 less the first charge), not 4.
    admitted(&client, "team-a", 7).await;
    refused(&client, "team-a", 1).await;
    // team-b: the 1 left.
    admitted(&client, "team-b", 1).await;
    refused(&client, "team-b", 1).await;
}

#[tokio::test]
async fn without_a_work_rate_every_charge_succeeds() {
    let calls = Limits::unlimited().with_rate(Rate::new(1000.0, 1000).expect("valid rate"));
    let layer = TenantLimitLayer::new(calls)
        .with_override(OrgId::new("team-w").expect("id"), slow_work(10));
    let (client, _) = serve(layer).await;

    for _ in 0..3 {
        let (result, _) = push(&client, "team-a", u64::MAX).await;
        assert_eq!(result.expect("admitted").message, "no budget");
    }
    // A federated call charges only the tenants with a work rate.
    admitted(&client, "team-a|team-w", 10).await;
    let (status, _) = refused(&client, "team-a|team-w", 1).await;
    assert!(status.message().contains("\"team-w\""), "{status:?}");
}

#[tokio::test]
async fn admitted_samples_follow_the_work_rate_while_calls_stay_admitted() {
    const SAMPLES: u64 = 50;
    const RATE: f64 = 1_000.0;
    const BURST: u32 = 500;
    // Calls: far more than the run makes. Samples: 500 at once, then
    // 1 000 per second.
    let limits = Limits::unlimited()
        .with_rate(Rate::new(100_000.0, 100_000).expect("valid rate"))
        .with_work_rate(Rate::new(RATE, BURST).expect("valid rate"));
    let (client, distributor) = serve(TenantLimitLayer::new(limits)).await;

    // Pushes for 1.5 s and until 5 calls were refused, so that the run
    // is past the rate whatever the machine's speed.
    let run = Instant::now();
    let deadline = support::deadline();
    let (mut sent, mut ok, mut refused) = (0, 0, 0);
    while run.elapsed() < Duration::from_millis(1_500) || refused < 5 {
        assert!(Instant::now() < deadline, "5 refusals in {sent} calls");
        let (result, _) = push(&client, "team-a", SAMPLES).await;
        sent += 1;
        match result {
            Ok(_) => ok += 1,
            Err(status) => {
                refused += 1;
                // Refused by the charge, never by the call rate, with the
                // wait for the missing samples: at most 50 ms.
                assert!(
                    status.message().starts_with("work rate limit"),
                    "{status:?}"
                );
                let pushback = pushback(&status).expect("a pushback");
                assert!((1..=50).contains(&pushback), "{pushback} ms");
            }
        }
    }

    let charges = distributor.charges.lock().expect("lock").clone();
    assert_eq!(charges.len(), sent, "every call reached the service");
    let admitted: u64 = charges
        .iter()
        .filter(|charge| charge.admitted)
        .map(|charge| charge.samples)
        .sum();
    assert_eq!(admitted, ok * SAMPLES);
    let (first, last) = (charges[0], charges[charges.len() - 1]);
    let previous = charges[charges.len() - 2];
    // The bucket's window lies between the first and last clock reads,
    // each somewhere in its charge's [before, after]: bounds taken from the
    // outer and inner instants hold however long a thread was preempted
    // there on a loaded machine.
    let longest = (last.after - first.before).as_secs_f64();
    let shortest = (last.before - first.after).as_secs_f64();
    let gap = (last.after - previous.before).as_secs_f64();
    let most = f64::from(BURST) + RATE * longest;
    let least = f64::from(BURST) + RATE * shortest;
    // Never more than the bucket gave (2 samples of clock slack); less by
    // at most what was left after the last charge: under one request's
    // worth, plus what came in since the charge before it.
    let admitted = admitted as f64;
    println!(
        "admitted {admitted} samples in {ok} of {sent} calls over {shortest:.3}-{longest:.3} s; \
         burst + rate × elapsed = {least:.1}-{most:.1}"
    );
    assert!(
        admitted <= most + 2.0 && admitted > least - SAMPLES as f64 - RATE * gap - 2.0,
        "admitted {admitted} samples, expected {least:.1}-{most:.1} (elapsed {shortest:.3}-\
         {longest:.3} s, last gap {gap:.4} s, {sent} calls)"
    );
}
