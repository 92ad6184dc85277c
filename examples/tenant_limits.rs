//! Per-tenant limits on a real server: the standard gRPC health service
//! (`tonic-health`) behind `RequireOrgIdLayer` and `TenantLimitLayer`, two
//! tenants calling it as fast as they can, one of them throttled by the
//! defaults and the other with an override; then a table of what each got,
//! and the same again after the throttled tenant's limits are raised at
//! run time. Then a refusal's pushback (`grpc-retry-pushback-ms`: when the
//! tenant's next call will pass) obeyed, and a push service, shaped like
//! Cortex's distributor, that charges each write for the samples it carries
//! against a work rate. Exits non-zero if a tenant did not get what its
//! limits say.
//!
//! Run: `cargo run --example tenant-limits`

#[path = "quickstart/echo.rs"]
mod echo;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Endpoint, Server};
use tonic::{Code, Request, Response, Status};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::server::health_reporter;
use tonic_hotpath::limits::{
    LimitError, LimitKind, LimitObserver, Limits, Rate, TenantBudgetExt, TenantLimitLayer,
};
use tonic_hotpath::tenant::{OrgId, RequireOrgIdLayer, SetOrgIdLayer};
use tower::ServiceBuilder;

/// Calls each tenant makes per round, and how many at once.
const CALLS: usize = 200;
const CONCURRENCY: usize = 8;

/// Counts the refusals the layer reports, by reason.
#[derive(Debug, Default)]
struct Refusals {
    rate: AtomicU64,
    in_flight: AtomicU64,
}

impl LimitObserver for Refusals {
    fn on_refused(&self, refused: &LimitError) {
        let counter = match refused.limit() {
            LimitKind::InFlight { .. } => &self.in_flight,
            _ => &self.rate,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// What one tenant got in a round.
#[derive(Debug, Default)]
struct Got {
    ok: usize,
    /// Refused for the rate, for calls in flight.
    rate: usize,
    in_flight: usize,
    other: usize,
    /// The first refusal's message of each kind.
    messages: Vec<String>,
}

impl Got {
    fn refused(&self) -> usize {
        self.rate + self.in_flight
    }

    fn add(&mut self, other: Got) {
        self.ok += other.ok;
        self.rate += other.rate;
        self.in_flight += other.in_flight;
        self.other += other.other;
        for message in other.messages {
            self.note(message);
        }
    }

    /// Keeps the first message of each kind (their texts differ before the
    /// parenthesis).
    fn note(&mut self, message: String) {
        let kind = |m: &str| m.split('(').next().unwrap_or_default().to_owned();
        if !self
            .messages
            .iter()
            .any(|known| kind(known) == kind(&message))
        {
            self.messages.push(message);
        }
    }
}

/// `CALLS` health checks stamped with `tenant`, `CONCURRENCY` at a time.
async fn round(channel: &Channel, tenant: &str) -> Result<Got, Box<dyn std::error::Error>> {
    let stamped = ServiceBuilder::new()
        .layer(SetOrgIdLayer::new(OrgId::new(tenant)?))
        .service(channel.clone());
    let client = HealthClient::new(stamped);
    let mut workers = Vec::new();
    for worker in 0..CONCURRENCY {
        let mut client = client.clone();
        workers.push(tokio::spawn(async move {
            let mut got = Got::default();
            for _ in (worker..CALLS).step_by(CONCURRENCY) {
                let check = Request::new(HealthCheckRequest::default());
                match client.check(check).await {
                    Ok(_) => got.ok += 1,
                    Err(status) if status.code() == Code::ResourceExhausted => {
                        if status.message().starts_with("request rate limit") {
                            got.rate += 1;
                        } else {
                            got.in_flight += 1;
                        }
                        got.note(status.message().to_owned());
                    }
                    Err(_) => got.other += 1,
                }
            }
            got
        }));
    }
    let mut total = Got::default();
    for worker in workers {
        total.add(worker.await?);
    }
    Ok(total)
}

fn print_table(title: &str, rows: &[(&str, &Got)], elapsed: Duration) {
    println!("\n{title} ({CALLS} calls per tenant, {CONCURRENCY} at a time, {elapsed:.0?}):\n");
    println!("| tenant   | sent | OK  | refused: rate | refused: in flight | other |");
    println!("|----------|------|-----|---------------|--------------------|-------|");
    for (tenant, got) in rows {
        println!(
            "| {tenant:<8} | {CALLS:>4} | {:>3} | {:>13} | {:>18} | {:>5} |",
            got.ok, got.rate, got.in_flight, got.other
        );
    }
    for (tenant, got) in rows {
        for message in &got.messages {
            println!("{tenant} was told: {message}");
        }
    }
}

/// A write path shaped like Cortex's distributor: each request's message is
/// the number of samples the write carries (a real one decodes them); the
/// service charges the tenant for them once it knows how many.
#[derive(Debug, Default)]
struct Distributor;

#[tonic::async_trait]
impl echo::Echo for Distributor {
    async fn unary_echo(
        &self,
        request: Request<echo::EchoRequest>,
    ) -> Result<Response<echo::EchoResponse>, Status> {
        let samples: u64 = request
            .get_ref()
            .message
            .parse()
            .map_err(|_| Status::invalid_argument("not a number of samples"))?;
        // Refused: RESOURCE_EXHAUSTED naming the tenant, the work rate and
        // the samples, with the pushback until they would fit.
        request.charge_work(samples)?;
        Ok(Response::new(echo::EchoResponse {
            message: format!("{samples} samples accepted"),
        }))
    }
}

/// A health check of `tenant`: OK, or the refusal.
async fn health_check(
    channel: &Channel,
    tenant: &str,
) -> Result<Result<(), Status>, Box<dyn std::error::Error>> {
    let stamped = ServiceBuilder::new()
        .layer(SetOrgIdLayer::new(OrgId::new(tenant)?))
        .service(channel.clone());
    let check = Request::new(HealthCheckRequest::default());
    Ok(HealthClient::new(stamped).check(check).await.map(drop))
}

/// The pushback a refusal carries, in milliseconds.
fn pushback(status: &Status) -> Option<u64> {
    status
        .metadata()
        .get(LimitError::RETRY_PUSHBACK_MS)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

/// Round 3: a refusal's pushback obeyed, then writes charged by samples.
async fn round_three(
    channel: &Channel,
    handle: &tonic_hotpath::limits::LimitsHandle,
) -> Result<(), Box<dyn std::error::Error>> {
    println!(
        "
Round 3, pushback and work units:
"
    );
    // team-slow: 2 calls per second, a burst of 1.
    handle.set_override(
        OrgId::new("team-slow")?,
        Limits::unlimited().with_rate(Rate::new(2.0, 1)?),
    );
    check(
        health_check(channel, "team-slow").await?.is_ok(),
        "team-slow's burst",
    )?;
    let refused = health_check(channel, "team-slow").await?;
    let status = refused
        .err()
        .ok_or("team-slow's second call was not refused")?;
    let wait = pushback(&status).ok_or("no pushback")?;
    println!(
        "team-slow was told: {} ({}: {wait})",
        status.message(),
        LimitError::RETRY_PUSHBACK_MS
    );
    check(
        (1..=500).contains(&wait),
        "the pushback is the time to the next token",
    )?;
    tokio::time::sleep(Duration::from_millis(wait)).await;
    check(
        health_check(channel, "team-slow").await?.is_ok(),
        "retried after the pushback, team-slow's call passes",
    )?;
    println!("team-slow retried {wait} ms later: OK");

    // team-push: 1 000 samples per second, a burst of 2 000; writes of 250
    // samples for a second, each refused one retried after its pushback.
    let samples = Limits::unlimited().with_work_rate(Rate::new(1_000.0, 2_000)?);
    handle.set_override(OrgId::new("team-push")?, samples);
    let stamped = ServiceBuilder::new()
        .layer(SetOrgIdLayer::new(OrgId::new("team-push")?))
        .service(channel.clone());
    let mut client = echo::EchoClient::new(stamped);
    let (mut writes, mut accepted, mut message) = (0, 0, None);
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(1) {
        let write = Request::new(echo::EchoRequest {
            message: "250".into(),
        });
        writes += 1;
        match client.unary_echo(write).await {
            Ok(_) => accepted += 250,
            Err(status) if status.code() == Code::ResourceExhausted => {
                message.get_or_insert_with(|| status.message().to_owned());
                // Wait until the samples fit, as the pushback says.
                let wait = pushback(&status).unwrap_or(100);
                tokio::time::sleep(Duration::from_millis(wait)).await;
            }
            Err(status) => return Err(status.into()),
        }
    }
    let due = 2_000.0 + 1_000.0 * start.elapsed().as_secs_f64();
    println!(
        "team-push sent {writes} writes of 250 samples in {:.0?}: {accepted} samples accepted \
         (burst + rate × elapsed = {due:.0})",
        start.elapsed()
    );
    if let Some(message) = message {
        println!("team-push was told: {message}");
    }
    check(
        f64::from(accepted) <= due && f64::from(accepted) > due - 500.0,
        "the samples accepted follow the work rate",
    )
}

fn check(ok: bool, what: &str) -> Result<(), Box<dyn std::error::Error>> {
    if ok {
        Ok(())
    } else {
        Err(format!("check failed: {what}").into())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Every tenant: 4 calls in flight, 20 per second with a burst of 10.
    // team-big: 64 in flight, 10 000 per second.
    let defaults = Limits::unlimited()
        .with_max_in_flight(4)
        .with_rate(Rate::new(20.0, 10)?);
    let big = Limits::unlimited()
        .with_max_in_flight(64)
        .with_rate(Rate::new(10_000.0, 1_000)?);
    let refusals = Arc::new(Refusals::default());
    let limits = TenantLimitLayer::new(defaults)
        .with_override(OrgId::new("team-big")?, big)
        .observer(Arc::clone(&refusals));
    let handle = limits.handle();

    let (_reporter, health) = health_reporter();
    let incoming = TcpIncoming::bind("127.0.0.1:0".parse()?)?.with_nodelay(Some(true));
    let addr = incoming.local_addr()?;
    tokio::spawn(
        Server::builder()
            .layer(RequireOrgIdLayer::new())
            .layer(limits)
            .add_service(health)
            .add_service(echo::EchoServer::new(Distributor))
            .serve_with_incoming(incoming),
    );
    let channel = Endpoint::from_shared(format!("http://{addr}"))?
        .connect()
        .await?;
    println!("server on {addr}: defaults {defaults:?}\n  team-big: {big:?}");

    let start = Instant::now();
    let (a, b) = tokio::join!(round(&channel, "team-a"), round(&channel, "team-big"));
    let (a, b) = (a?, b?);
    print_table(
        "Round 1",
        &[("team-a", &a), ("team-big", &b)],
        start.elapsed(),
    );
    check(b.ok == CALLS, "team-big got every call")?;
    check(
        a.refused() > 0 && a.ok >= 10,
        "team-a got its burst, then was throttled",
    )?;
    check(a.other + b.other == 0, "no call failed otherwise")?;

    // Raised at run time: the next round sees the new limits at once (the
    // calls team-a made still count, against a burst of 1 000 now).
    handle.set_override(OrgId::new("team-a")?, big);
    let start = Instant::now();
    let (a2, b2) = tokio::join!(round(&channel, "team-a"), round(&channel, "team-big"));
    let (a2, b2) = (a2?, b2?);
    print_table(
        "Round 2, team-a raised to team-big's limits",
        &[("team-a", &a2), ("team-big", &b2)],
        start.elapsed(),
    );
    check(
        a2.ok == CALLS && b2.ok == CALLS,
        "both tenants got every call",
    )?;

    println!(
        "\nrefusals reported to the observer: {} for the rate, {} for calls in flight",
        refusals.rate.load(Ordering::Relaxed),
        refusals.in_flight.load(Ordering::Relaxed)
    );
    let refused = [&a, &b, &a2, &b2]
        .iter()
        .map(|got| got.refused())
        .sum::<usize>();
    let reported =
        refusals.rate.load(Ordering::Relaxed) + refusals.in_flight.load(Ordering::Relaxed);
    check(reported == refused as u64, "every refusal was reported")?;

    round_three(&channel, &handle).await
}
