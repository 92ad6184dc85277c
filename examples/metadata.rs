//! Outgoing metadata as a persistent chain, sent by `OutgoingMetadataLayer`.
//!
//! Serves the standard gRPC health service (`tonic-health`) on 127.0.0.1
//! behind an interceptor that prints the `x-` metadata each call carries,
//! builds a chain (a base map, appends, a fork), and sends it once on the
//! request and once through the task-local scope.
//!
//! Run: `cargo run --example metadata`

use std::time::Duration;

use tonic::metadata::{KeyAndValueRef, MetadataMap, MetadataValue};
use tonic::service::InterceptorLayer;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Endpoint, Server};
use tonic::{Request, Status};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;
use tonic_hotpath::metadata::{OutgoingMetadata, OutgoingMetadataExt, OutgoingMetadataLayer};
use tower::ServiceBuilder;

/// Server side: prints the `x-` metadata a call arrived with.
fn show_metadata(request: Request<()>) -> Result<Request<()>, Status> {
    println!("server received:");
    print_x_metadata(request.metadata());
    Ok(request)
}

fn print_x_metadata(metadata: &MetadataMap) {
    for entry in metadata.iter() {
        match entry {
            KeyAndValueRef::Ascii(key, value) if key.as_str().starts_with("x-") => {
                println!("  {key}: {}", value.to_str().unwrap_or("?"));
            }
            KeyAndValueRef::Binary(key, value) if key.as_str().starts_with("x-") => {
                println!(
                    "  {key}: {:?} (decoded)",
                    value.to_bytes().unwrap_or_default()
                );
            }
            _ => {}
        }
    }
}

fn health_check() -> Request<HealthCheckRequest> {
    Request::new(HealthCheckRequest {
        service: String::new(), // the server as a whole
    })
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A server: the health service, with an interceptor to show metadata.
    let (_reporter, health) = tonic_health::server::health_reporter();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(
        Server::builder()
            .layer(InterceptorLayer::new(show_metadata))
            .add_service(health)
            .serve_with_incoming(TcpIncoming::from(listener)),
    );

    // The layer goes over the Channel, under the generated client.
    let channel = Endpoint::from_shared(format!("http://{addr}"))?
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await?;
    let mut client = HealthClient::new(
        ServiceBuilder::new()
            .layer(OutgoingMetadataLayer::new())
            .service(channel),
    );

    // A base map (grpc-go's NewOutgoingContext), then O(1) appends.
    let mut base = MetadataMap::new();
    base.insert("x-request-id", MetadataValue::from_static("req-42"));
    let parent = OutgoingMetadata::from_metadata_map(base)?
        .append_static("x-caller", "billing")?
        .append_bin("x-trace-bin", &[0xca, 0xfe])?;

    // Two forks share the parent and do not see each other.
    let to_eu = parent.append("x-region", "eu-west-1")?;
    let to_us = parent.append("x-region", "us-east-1")?;
    println!("chain (values redacted): {to_eu:?}");
    println!("x-trace-bin read back: {:?}", to_eu.get_bin("x-trace-bin")?);

    // 1. Attached to the request.
    let mut call = health_check();
    call.set_outgoing_metadata(to_eu);
    let status = client.check(call).await?.into_inner().status();
    println!("client: health {status:?} (chain sent on the request)\n");

    // 2. Through the task-local scope, like a Go context.
    let status = to_us
        .scope(async { client.check(health_check()).await })
        .await?
        .into_inner()
        .status();
    println!("client: health {status:?} (chain sent from the task-local scope)");
    Ok(())
}
