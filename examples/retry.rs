//! A tonic client rides through a refusing replica: `RetryLayer` (gRFC A6,
//! configured by the same service config JSON grpc-go takes) retries the
//! refused attempts after the server's pushback, on the next replica.
//!
//! Three replicas of the health service on 127.0.0.1, each behind
//! `AdaptiveLimitLayer`; replica 0 is overloaded (it sheds every call with
//! `UNAVAILABLE` and a `grpc-retry-pushback-ms`). The client sends its
//! calls round robin, one replica after the other, through:
//!
//! ```ignore
//! ServiceBuilder::new()
//!     .layer(RetryLayer::from_service_config(CONFIG)?)
//!     .service(round_robin_over_the_three_channels)
//! ```
//!
//! Then the same calls without the layer, for comparison.
//!
//! `cargo run --example retry`

use std::net::SocketAddr;
use std::time::Instant;

use support::RoundRobin;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;
use tonic_hotpath::limits::AdaptiveLimitLayer;
use tonic_hotpath::retry::RetryLayer;

/// The client's service config: up to 3 attempts for the health service,
/// a 10 s backoff (so a prompt retry is the pushback's doing).
const CONFIG: &str = r#"{"methodConfig": [{
    "name": [{"service": "grpc.health.v1.Health"}],
    "retryPolicy": {"maxAttempts": 3, "initialBackoff": "10s", "maxBackoff": "10s",
        "backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"]}}]}"#;

const CALLS: usize = 6;

/// A replica of the health service behind adaptive admission; `shedding`
/// makes it refuse every call.
async fn replica(shedding: bool) -> Result<SocketAddr, Box<dyn std::error::Error>> {
    // TCP_NODELAY: without it, Nagle's algorithm holds small answers back.
    let incoming = tonic::transport::server::TcpIncoming::bind("127.0.0.1:0".parse()?)?
        .with_nodelay(Some(true));
    let addr = incoming.local_addr()?;
    let mut admission = AdaptiveLimitLayer::new().never_shed_services(Vec::<&str>::new());
    if shedding {
        admission = admission
            .shed_first_services(["grpc.health.v1.Health"])
            .shed_first_below(0.0);
    }
    let (_reporter, health) = tonic_health::server::health_reporter();
    tokio::spawn(
        tonic::transport::Server::builder()
            .layer(admission)
            .add_service(health)
            .serve_with_incoming(incoming),
    );
    Ok(addr)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut channels = Vec::new();
    for shedding in [true, false, false] {
        let addr = replica(shedding).await?;
        channels.push(
            tonic::transport::Endpoint::from_shared(format!("http://{addr}"))?
                .connect()
                .await?,
        );
    }
    let round_robin = RoundRobin::new(channels);
    println!("3 replicas; replica 0 refuses every call (UNAVAILABLE + pushback)\n");

    println!("with RetryLayer:");
    let retrying = tower::ServiceBuilder::new()
        .layer(RetryLayer::from_service_config(CONFIG)?)
        .service(round_robin.clone());
    let mut client = HealthClient::new(retrying);
    for call in 0..CALLS {
        let started = Instant::now();
        let answer = client.check(HealthCheckRequest::default()).await;
        println!(
            "  call {call}: {:<12} in {:>6.2} ms",
            answer.map_or_else(|status| format!("{:?}", status.code()), |_| "OK".into()),
            started.elapsed().as_secs_f64() * 1e3
        );
    }

    println!("\nwithout it:");
    let mut client = HealthClient::new(round_robin);
    for call in 0..CALLS {
        let answer = client.check(HealthCheckRequest::default()).await;
        println!(
            "  call {call}: {}",
            answer.map_or_else(|status| format!("{:?}", status.code()), |_| "OK".into()),
        );
    }
    Ok(())
}
