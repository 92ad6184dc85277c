//! One tenant's limit across a fleet: three replicas of a real server (the
//! standard gRPC health service behind `TenantLimitLayer`) share each
//! tenant's rate through one Redis, so a load that reaches them unevenly
//! (80/15/5) is still held to one budget, `burst + rate × time`, for the
//! whole fleet. Then the same load under the local global strategy
//! (`rate ÷ replicas` each, no Redis), where the busy replica refuses its
//! calls at its third while the others' shares go unused. Prints each
//! replica's admissions and the fleet's total, and exits non-zero if the
//! shared fleet is off its budget by more than 2 %.
//!
//! Needs a Redis: `REDIS_URL` if set, else a `redis-server` on the `PATH`
//! (`apt-get install redis-server`), started on a free port and stopped at
//! the end.
//!
//! Run: `cargo run --release --example tenant-limits-redis --features limits-redis`
//! (an argument, e.g. `-- 100`, sets the lease horizon in milliseconds:
//! `LeasePolicy::horizon`, 500 by default).

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Endpoint, Server};
use tonic::{Code, Request};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::server::health_reporter;
use tonic_hotpath::limits::{LeasePolicy, Limits, Rate, RedisBackend, TenantLimitLayer};
use tonic_hotpath::tenant::{OrgId, SetOrgIdLayer};
use tower::ServiceBuilder;

/// The tenant's limit, for the whole fleet.
const RATE: f64 = 200.0;
const BURST: u32 = 100;
/// The load: twice the rate, for 3 s, split 80/15/5.
const OFFERED: u64 = 400;
const LOAD_TIME: Duration = Duration::from_secs(3);
const WEIGHTS: [u64; 3] = [16, 3, 1];

type Error = Box<dyn std::error::Error>;

/// A `redis-server` this example started (stopped on drop).
struct LocalRedis(Child);

impl Drop for LocalRedis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `REDIS_URL`, or a `redis-server` started on a free port.
async fn redis() -> Result<(String, Option<LocalRedis>), Error> {
    if let Ok(url) = std::env::var("REDIS_URL") {
        return Ok((url, None));
    }
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .stdout(Stdio::null())
        .spawn()
        .map_err(|error| {
            format!("no REDIS_URL, and redis-server did not start ({error}): install it")
        })?;
    let local = LocalRedis(child);
    let url = format!("redis://127.0.0.1:{port}/");
    for _ in 0..500 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok((url, Some(local)));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Err("redis-server did not listen within 5 s".into())
}

/// A replica: the health service behind `layer`, and a client to it that
/// stamps the tenant's org id.
async fn replica(layer: TenantLimitLayer, tenant: &str) -> Result<ReplicaClient, Error> {
    let (_reporter, health) = health_reporter();
    let incoming = TcpIncoming::bind("127.0.0.1:0".parse()?)?.with_nodelay(Some(true));
    let addr = incoming.local_addr()?;
    tokio::spawn(
        Server::builder()
            .layer(layer)
            .add_service(health)
            .serve_with_incoming(incoming),
    );
    let channel = Endpoint::from_shared(format!("http://{addr}"))?
        .connect()
        .await?;
    let stamped = ServiceBuilder::new()
        .layer(SetOrgIdLayer::new(OrgId::new(tenant)?))
        .service(channel);
    Ok(HealthClient::new(stamped))
}

type ReplicaClient = HealthClient<tonic_hotpath::tenant::SetOrgId<Channel>>;

/// Offers `OFFERED` calls a second for `LOAD_TIME`, split by `WEIGHTS`;
/// returns each replica's (admitted, offered) and the time it took.
async fn offer(clients: &[ReplicaClient]) -> Result<(Vec<(u64, u64)>, Duration), Error> {
    let counts: Vec<Arc<(AtomicU64, AtomicU64)>> = clients.iter().map(|_| Arc::default()).collect();
    let mut calls = tokio::task::JoinSet::new();
    let start = Instant::now();
    let total = OFFERED * LOAD_TIME.as_millis() as u64 / 1000;
    let mut ticker = tokio::time::interval(Duration::from_millis(2));
    let mut sent = 0;
    while sent < total {
        ticker.tick().await;
        let due = ((start.elapsed().as_secs_f64() * OFFERED as f64) as u64).min(total);
        while sent < due {
            let slot = sent % 20;
            let at = if slot < WEIGHTS[0] {
                0
            } else if slot < WEIGHTS[0] + WEIGHTS[1] {
                1
            } else {
                2
            };
            let mut client = clients[at].clone();
            let count = Arc::clone(&counts[at]);
            calls.spawn(async move {
                count.1.fetch_add(1, Ordering::Relaxed);
                match client
                    .check(Request::new(HealthCheckRequest::default()))
                    .await
                {
                    Ok(_) => {
                        count.0.fetch_add(1, Ordering::Relaxed);
                        Ok(())
                    }
                    Err(status) if status.code() == Code::ResourceExhausted => Ok(()),
                    Err(status) => Err(status),
                }
            });
            sent += 1;
        }
    }
    while let Some(call) = calls.join_next().await {
        call??;
    }
    let elapsed = start.elapsed();
    let counts = counts
        .iter()
        .map(|count| {
            (
                count.0.load(Ordering::Relaxed),
                count.1.load(Ordering::Relaxed),
            )
        })
        .collect();
    Ok((counts, elapsed))
}

fn print_table(title: &str, counts: &[(u64, u64)], elapsed: Duration) -> u64 {
    println!("\n{title} ({elapsed:.1?}):\n");
    println!("| replica | share of calls | offered | admitted |");
    println!("|---------|----------------|---------|----------|");
    for (i, (admitted, offered)) in counts.iter().enumerate() {
        println!(
            "| {:<7} | {:>13}% | {offered:>7} | {admitted:>8} |",
            i + 1,
            WEIGHTS[i] * 5
        );
    }
    let total: u64 = counts.iter().map(|(admitted, _)| admitted).sum();
    println!(
        "| fleet   |           100% | {:>7} | {total:>8} |",
        counts.iter().map(|c| c.1).sum::<u64>()
    );
    total
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let (url, _local) = redis().await?;
    let mut policy = LeasePolicy::default();
    if let Some(horizon) = std::env::args().nth(1) {
        let millis: u64 = horizon
            .parse()
            .map_err(|_| "the argument is a horizon in ms")?;
        policy = policy.horizon(Duration::from_millis(millis));
        println!("Lease horizon: {millis} ms.");
    }
    let limits = Limits::unlimited().with_rate(Rate::new(RATE, BURST)?);
    println!(
        "Tenant \"team-a\": {RATE} calls/s with a burst of {BURST} for the whole fleet of 3 \
         replicas; offered {OFFERED} calls/s for {LOAD_TIME:?}, split 80/15/5."
    );

    // Shared: every replica connects to the same Redis, same key prefix.
    let mut shared = Vec::new();
    let mut handles = Vec::new();
    for _ in 0..3 {
        let backend = RedisBackend::builder(url.as_str())
            .key_prefix("tenant-limits-example")
            .heartbeat_interval(Duration::from_millis(200))
            .lease_policy(policy)
            .connect()
            .await?;
        let layer = TenantLimitLayer::new(limits).shared(backend);
        handles.push(layer.handle());
        shared.push(replica(layer, "team-a").await?);
    }
    // Wait until each replica has seen the other two (its fallback share).
    while handles.iter().any(|handle| handle.replicas() != 3) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (counts, elapsed) = offer(&shared).await?;
    let total = print_table("Shared through Redis", &counts, elapsed);
    let budget = f64::from(BURST) + RATE * elapsed.as_secs_f64();
    let leases: u64 = handles
        .iter()
        .filter_map(|handle| handle.shared_status())
        .map(|status| status.leases)
        .sum();
    println!(
        "\nThe fleet admitted {total}; its budget, burst + rate × time, is {budget:.0} \
         ({:+.1} %). Redis lease requests: {leases}.",
        (total as f64 / budget - 1.0) * 100.0
    );

    // Local global strategy: each replica allows rate ÷ 3, no Redis.
    let mut local = Vec::new();
    for _ in 0..3 {
        local.push(replica(TenantLimitLayer::new(limits).replicas(3), "team-b").await?);
    }
    let (counts_local, elapsed_local) = offer(&local).await?;
    let total_local = print_table(
        "Local global strategy (rate ÷ 3 per replica)",
        &counts_local,
        elapsed_local,
    );
    println!(
        "\nThe fleet admitted {total_local}: the busy replica stopped at its third while the \
         others' shares went unused."
    );

    // The shared bound: within 2 % of the budget (both ways).
    if (total as f64 - budget).abs() > budget * 0.02 {
        return Err(
            format!("the shared fleet admitted {total}, not within 2 % of {budget:.0}").into(),
        );
    }
    Ok(())
}
