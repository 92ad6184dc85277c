//! ORCA load reports steering a tonic client (gRFC A51, A58): three
//! servers on 127.0.0.1 report utilizations 0.2, 0.5 and 0.9 at the same
//! qps in each call's `endpoint-load-metrics-bin` trailer; a client
//! balances 600 health checks over them with `tower`'s `p2c`, weighing each
//! replica by its reports, and prints how the calls were split.
//!
//! `cargo run --example orca --features orca`

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio_stream::Stream;
use tonic::transport::{Endpoint, Server};
use tonic::{Request, Response, Status};
use tonic_health::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::health_server::{Health, HealthServer};
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};
use tonic_hotpath::orca::client::{EndpointWeights, WeightConfig};
use tonic_hotpath::orca::server::CallMetricsLayer;
use tonic_hotpath::orca::{CallMetricsRecorder, ServerMetricsRecorder};
use tonic_hotpath::stats::CombinedLayer;
use tower::ServiceBuilder;
use tower::balance::p2c::Balance;
use tower::buffer::Buffer;
use tower::discover::ServiceList;

const UTILIZATIONS: [f64; 3] = [0.2, 0.5, 0.9];
const CALLS: usize = 600;

/// The health service, counting its checks and taking each call's
/// recorder: the server layer then reports the process's values (and
/// the call's own, here a request cost) in the call's trailer.
#[derive(Default)]
struct CountedHealth {
    checks: Arc<AtomicU64>,
}

type WatchStream = Pin<Box<dyn Stream<Item = Result<HealthCheckResponse, Status>> + Send>>;

#[tonic::async_trait]
impl Health for CountedHealth {
    async fn check(
        &self,
        _: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        self.checks.fetch_add(1, Ordering::Relaxed);
        if let Some(recorder) = CallMetricsRecorder::current() {
            recorder.set_request_cost("checks", 1.0);
        }
        Ok(Response::new(HealthCheckResponse {
            status: ServingStatus::Serving as i32,
        }))
    }

    type WatchStream = WatchStream;

    async fn watch(&self, _: Request<HealthCheckRequest>) -> Result<Response<WatchStream>, Status> {
        Err(Status::unimplemented("watch"))
    }
}

/// One server reporting `utilization` at 100 qps; its address and check
/// counter.
async fn server(utilization: f64) -> Result<(SocketAddr, Arc<AtomicU64>), std::io::Error> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    // The process's values, as a load monitor would keep them current.
    let process = ServerMetricsRecorder::new();
    process.set_cpu_utilization(utilization);
    process.set_qps(100.0);
    let health = CountedHealth::default();
    let checks = Arc::clone(&health.checks);
    tokio::spawn(
        Server::builder()
            .layer(CallMetricsLayer::builder().server_metrics(process).build())
            .add_service(HealthServer::new(health))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    Ok((addr, checks))
}

/// Checks through `client` until `left` runs out. (Generic over the
/// client's service: a spawned future naming the `Buffer` directly trips
/// a known higher-ranked lifetime error of tonic's client bounds.)
async fn caller<T>(mut client: HealthClient<T>, left: Arc<AtomicUsize>) -> Result<(), Status>
where
    T: tonic::client::GrpcService<tonic::body::Body>,
    T::Error: Into<tonic::codegen::StdError>,
    T::ResponseBody: tonic::codegen::Body<Data = bytes::Bytes> + Send + 'static,
    <T::ResponseBody as tonic::codegen::Body>::Error: Into<tonic::codegen::StdError> + Send,
{
    while left
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
        .is_ok()
    {
        client.check(HealthCheckRequest::default()).await?;
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The replicas' weights are compared within one group. gRPC waits 10 s
    // of reports before it trusts a weight (the blackout period); this
    // short demo uses them at once.
    let config = WeightConfig::builder()
        .blackout_period(Duration::ZERO)
        .build()?;
    let group = EndpointWeights::new(config);

    let mut replicas = Vec::new();
    let mut servers = Vec::new();
    for utilization in UTILIZATIONS {
        let (addr, checks) = server(utilization).await?;
        // Per replica: its channel, a client stats layer whose handler
        // reads the trailers into the replica's weight, and the load the
        // balancer compares.
        let endpoint = group.endpoint();
        let channel = Endpoint::from_shared(format!("http://{addr}"))?
            .connect()
            .await?;
        let channel = ServiceBuilder::new()
            .layer(CombinedLayer::client().with(endpoint.stats_handler()))
            .service(channel);
        replicas.push(endpoint.load(channel));
        servers.push((utilization, checks, endpoint));
    }
    let balanced = Balance::new(ServiceList::new::<http::Request<tonic::body::Body>>(
        replicas,
    ));
    let client = HealthClient::new(Buffer::new(balanced, 64));

    // Four callers at once, 600 checks in all.
    let left = Arc::new(AtomicUsize::new(CALLS));
    let mut callers = Vec::new();
    for _ in 0..4 {
        callers.push(tokio::spawn(caller(client.clone(), Arc::clone(&left))));
    }
    for caller in callers {
        caller.await??;
    }

    println!("{CALLS} calls over three replicas (same qps):");
    for (utilization, checks, endpoint) in &servers {
        let weight = endpoint.weight().unwrap_or_default();
        println!(
            "  utilization {utilization:.1}: weight {weight:6.1}, {:3} calls",
            checks.load(Ordering::Relaxed)
        );
    }
    Ok(())
}
