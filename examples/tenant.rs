//! Org ids end to end on the standard gRPC health service (`tonic-health`):
//! a server that requires an org id, an interceptor that reads the tenant
//! the layer validated, a client that stamps it on every call, what a
//! rejection looks like, and a service exempted by a list read at run time.
//!
//! Run: `cargo run --example tenant`

use std::net::SocketAddr;

use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Endpoint, Server};
use tonic::{Request, Status};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::health_server::HealthServer;
use tonic_health::server::{HealthReporter, HealthService};
use tonic_hotpath::tenant::{OrgId, OrgIdRequestExt, RequireOrgIdLayer, SetOrgIdLayer};
use tower::ServiceBuilder;

/// Server side, after `RequireOrgIdLayer`: the validated tenants are in the
/// request's extensions (none on an exempt service).
fn show_tenant(request: Request<()>) -> Result<Request<()>, Status> {
    match request.tenant_ids() {
        Some(tenants) => println!("server:  call for tenant {tenants}"),
        None => println!("server:  call on an exempt service, no tenant"),
    }
    Ok(request)
}

/// Starts the health service behind `layer` on 127.0.0.1 and connects to it.
async fn serve(layer: RequireOrgIdLayer) -> Result<Channel, Box<dyn std::error::Error>> {
    let reporter = HealthReporter::new();
    let health =
        HealthServer::with_interceptor(HealthService::from_health_reporter(reporter), show_tenant);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr: SocketAddr = listener.local_addr()?;
    tokio::spawn(
        Server::builder()
            .layer(layer)
            .add_service(health)
            .serve_with_incoming(TcpIncoming::from(listener)),
    );
    Ok(Endpoint::from_shared(format!("http://{addr}"))?
        .connect()
        .await?)
}

fn check() -> Request<HealthCheckRequest> {
    Request::new(HealthCheckRequest {
        service: String::new(),
    })
}

fn show(result: Result<tonic::Response<tonic_health::pb::HealthCheckResponse>, Status>) {
    match result {
        Ok(reply) => {
            let status = ServingStatus::try_from(reply.into_inner().status);
            println!("client:  {status:?}");
        }
        Err(status) => println!("client:  {:?}: {}", status.code(), status.message()),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Server: every call must carry a valid `x-scope-orgid`.
    let channel = serve(RequireOrgIdLayer::new()).await?;

    // Client: stamp the org id on every call.
    let stamped = ServiceBuilder::new()
        .layer(SetOrgIdLayer::new(OrgId::new("team-a")?))
        .service(channel.clone());
    show(HealthClient::new(stamped).check(check()).await);

    // Rejections: no org id, then an invalid one. The service never runs.
    let mut plain = HealthClient::new(channel);
    show(plain.check(check()).await);
    let mut request = check();
    request
        .metadata_mut()
        .insert("x-scope-orgid", "team/a".parse()?);
    show(plain.check(request).await);

    // Exemptions from configuration (here an environment variable): health
    // checks from a load balancer carry no org id.
    let exempt: Vec<String> = std::env::var("EXEMPT_SERVICES")
        .unwrap_or_else(|_| "grpc.health.v1.Health".into())
        .split(',')
        .map(str::to_owned)
        .collect();
    println!("exempt services: {exempt:?}");
    let channel = serve(RequireOrgIdLayer::new().exempt_services(&exempt)).await?;
    show(HealthClient::new(channel).check(check()).await);
    Ok(())
}
