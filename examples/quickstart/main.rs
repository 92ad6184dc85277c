//! tonic-hotpath quickstart: a client, a gateway and a backend on
//! 127.0.0.1, using all four parts together.
//!
//! - client → gateway: `SetOrgIdLayer` stamps the org id,
//!   `OutgoingMetadataLayer` sends each call's metadata chain, a
//!   `CombinedLayer` runs two stats handlers (metrics + event log);
//! - gateway: `CombinedLayer` (the same two handlers) over
//!   `RequireOrgIdLayer`; its handler reads the org id, builds an outgoing
//!   chain step by step, injects the org id, forks the chain once per shard
//!   and fans out concurrent calls to the backend;
//! - backend: `RequireOrgIdLayer`; assembles each reply in a
//!   `MonotonicArena`, echoes back the metadata it received, resets.
//!
//! The demo checks its own invariants (fork isolation, FIFO order, the
//! same org id at every hop, the rejected call counted as
//! `Unauthenticated`) and exits 1 if one fails; bad flags exit 2.
//!
//! Run: `cargo run --release --example quickstart -- --requests 20 --fan-out 4`
//!
//! The folder is self-contained: the echo gRPC service it serves is in
//! `echo.rs` (tonic-prost-build's output for `echo.proto`, checked in), so
//! it builds in another project with tonic-hotpath (default features),
//! tonic, tonic-prost, prost, tower and tokio (`rt-multi-thread`, `time`) as
//! dependencies.

mod backend;
mod checks;
mod cli;
mod echo;
mod gateway;
mod handlers;
mod report;
mod wire;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tonic::Request;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Endpoint, Server};
use tonic_hotpath::metadata::{
    OutgoingMetadata, OutgoingMetadataExt, OutgoingMetadataLayer, OutgoingMetadataService,
};
use tonic_hotpath::stats::{ClientSide, CombinedService};
use tonic_hotpath::tenant::{OrgId, OrgIdRequestExt, RequireOrgIdLayer, SetOrgIdLayer};
use tower::ServiceBuilder;

use backend::Backend;
use checks::Checks;
use cli::{Command, Options};
use echo::{EchoClient, EchoRequest, EchoServer};
use gateway::Gateway;
use handlers::{Handlers, SideStats};

/// The gateway's client to the backend: chain written into the headers,
/// then instrumented (so the stats see the headers as sent).
pub type BackendClient =
    EchoClient<OutgoingMetadataService<CombinedService<Channel, Handlers, ClientSide>>>;

/// The tenant the client calls for.
const ORG_ID: &str = "acme-corp";
/// The client's deadline for each call.
const CALL_TIMEOUT: Duration = Duration::from_secs(2);

/// Serves a type with an inherent `unary(org_id, request)` method as the
/// echo service, handing it the org id that `RequireOrgIdLayer` validated.
macro_rules! unary_with_org_id {
    ($service:ty) => {
        #[tonic::async_trait]
        impl echo::Echo for $service {
            async fn unary_echo(
                &self,
                request: Request<EchoRequest>,
            ) -> Result<tonic::Response<echo::EchoResponse>, tonic::Status> {
                // The tenant accessor: what RequireOrgIdLayer validated.
                let org_id = request.org_id().cloned().ok_or_else(|| {
                    tonic::Status::unauthenticated(concat!(stringify!($service), ": no org id"))
                })?;
                self.unary(org_id, request).await
            }
        }
    };
}

unary_with_org_id!(Backend);
unary_with_org_id!(Gateway);

/// Every instrumented side's handlers, for the report.
#[derive(Debug, Default)]
struct Sides {
    client: SideStats,
    gateway_server: SideStats,
    gateway_client: SideStats,
}

fn main() -> ExitCode {
    let options = match cli::parse(std::env::args().skip(1)) {
        Ok(Command::Run(options)) => options,
        Ok(Command::Help) => {
            print!("{}", cli::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            eprintln!("quickstart: {error}\n\n{}", cli::USAGE);
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("quickstart: cannot start the tokio runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(options)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("quickstart: FAILED: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Starts the backend: every call must carry a valid org id.
fn spawn_backend() -> std::io::Result<(SocketAddr, Arc<Backend>)> {
    let backend = Arc::new(Backend::default());
    let (addr, incoming) = bind_nodelay()?;
    tokio::spawn(
        Server::builder()
            .layer(RequireOrgIdLayer::new())
            .add_service(EchoServer::from_arc(Arc::clone(&backend)))
            .serve_with_incoming(incoming),
    );
    println!("  backend  {addr}  RequireOrgIdLayer, MonotonicArena per reply");
    Ok((addr, backend))
}

/// Starts the gateway: stats outermost (so refused calls are counted too),
/// then the org-id check; its own client to the backend is instrumented.
async fn spawn_gateway(
    backend_addr: SocketAddr,
    fan_out: usize,
    sides: &Sides,
) -> Result<SocketAddr, Box<dyn std::error::Error>> {
    let backend_client: BackendClient = EchoClient::new(
        ServiceBuilder::new()
            .layer(OutgoingMetadataLayer::new())
            .layer(sides.gateway_client.client_layer())
            .service(connect(backend_addr).await?),
    );
    let (addr, incoming) = bind_nodelay()?;
    tokio::spawn(
        Server::builder()
            .layer(sides.gateway_server.server_layer())
            .layer(RequireOrgIdLayer::new())
            .add_service(EchoServer::new(Gateway::new(backend_client, fan_out)))
            .serve_with_incoming(incoming),
    );
    println!(
        "  gateway  {addr}  CombinedLayer[metrics, events] > RequireOrgIdLayer; fans out to the backend"
    );
    Ok(addr)
}

async fn run(options: Options) -> Result<(), Box<dyn std::error::Error>> {
    let started = Instant::now();
    let org_id = OrgId::new(ORG_ID)?;
    let sides = Sides::default();
    println!(
        "tonic-hotpath quickstart: {} requests, fan-out {} (org id {org_id})",
        options.requests, options.fan_out
    );
    let (backend_addr, backend) = spawn_backend()?;
    let gateway_addr = spawn_gateway(backend_addr, options.fan_out, &sides).await?;

    // Client: org id stamped, metadata chain written, stats on what is sent.
    let gateway_channel = connect(gateway_addr).await?;
    let mut client = EchoClient::new(
        ServiceBuilder::new()
            .layer(SetOrgIdLayer::new(org_id.clone()))
            .layer(OutgoingMetadataLayer::new())
            .layer(sides.client.client_layer())
            .service(gateway_channel.clone()),
    );
    println!(
        "  client   SetOrgIdLayer({org_id}) > OutgoingMetadataLayer > CombinedLayer[metrics, events]"
    );

    let mut checks = Checks::new(&org_id, options);
    for i in 0..options.requests {
        let request_id = format!("req-{i:04}");
        let chain = OutgoingMetadata::new()
            .append("x-request-id", &request_id)?
            .append_static("x-hop", "client")?;
        let mut request = Request::new(EchoRequest {
            message: format!("order-batch-{i}"),
        });
        request.set_outgoing_metadata(chain);
        request.set_timeout(CALL_TIMEOUT);
        let reply = client.unary_echo(request).await?.into_inner();
        let reply = wire::parse_gateway_reply(&reply.message)?;
        checks.reply(&request_id, reply)?;
    }

    // One call without an org id: the gateway's RequireOrgIdLayer refuses
    // it before the handler runs; both sides' stats count it.
    let mut anonymous = EchoClient::new(
        ServiceBuilder::new()
            .layer(OutgoingMetadataLayer::new())
            .layer(sides.client.client_layer())
            .service(gateway_channel),
    );
    let mut request = Request::new(EchoRequest {
        message: "no org id".into(),
    });
    request.set_outgoing_metadata(
        OutgoingMetadata::new().append_static("x-request-id", "req-anonymous")?,
    );
    let rejected = match anonymous.unary_echo(request).await {
        Ok(_) => return Err("the call without an org id was accepted".into()),
        Err(status) => status,
    };
    checks.rejected(&rejected)?;

    // The server records End when its response body finishes, which can
    // trail the client's view by a moment.
    let expected_server_calls = options.requests as u64 + 1;
    let deadline = Instant::now() + Duration::from_secs(2);
    while calls(&sides.gateway_server) < expected_server_calls && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    checks.report(&rejected);
    let client_stats = sides.client.metrics.snapshot();
    let gateway_server_stats = sides.gateway_server.metrics.snapshot();
    let gateway_client_stats = sides.gateway_client.metrics.snapshot();
    report::section("per-method stats (metrics handler, one CombinedLayer per side)");
    report::stats_table(&[
        ("client", &client_stats),
        ("gateway server", &gateway_server_stats),
        ("gateway->backend", &gateway_client_stats),
    ]);
    report::section("events (event-log handler, same layers)");
    report::event_logs(&[
        ("client", &sides.client.log),
        ("gateway server", &sides.gateway_server.log),
        ("gateway->backend", &sides.gateway_client.log),
    ]);
    checks.arena(backend.arena_totals())?;
    checks.stats(&client_stats, &gateway_server_stats, &gateway_client_stats)?;
    println!(
        "\nall checks passed in {:.2?} ({} calls to the gateway, {} to the backend)",
        started.elapsed(),
        expected_server_calls,
        options.requests * options.fan_out
    );
    Ok(())
}

/// Binds `127.0.0.1:0` with `TCP_NODELAY` on accepted connections.
///
/// `serve_with_incoming` ignores the builder's `tcp_nodelay`, and without
/// it h2's small header/data/trailer writes stall ~40 ms on delayed ACKs.
fn bind_nodelay() -> std::io::Result<(SocketAddr, TcpIncoming)> {
    let incoming =
        TcpIncoming::bind(SocketAddr::from(([127, 0, 0, 1], 0)))?.with_nodelay(Some(true));
    Ok((incoming.local_addr()?, incoming))
}

/// Connects a channel to `addr` (plain HTTP/2 over TCP).
async fn connect(addr: SocketAddr) -> Result<Channel, tonic::transport::Error> {
    Endpoint::from_shared(format!("http://{addr}"))?
        .connect()
        .await
}

/// Calls one side's metrics handler has seen end, over all methods.
fn calls(side: &SideStats) -> u64 {
    side.metrics.snapshot().values().map(|m| m.calls).sum()
}
