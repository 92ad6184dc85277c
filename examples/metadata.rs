//! Outgoing metadata as a persistent chain, sent by `OutgoingMetadataLayer`.
//!
//! Starts an echo server on 127.0.0.1 that answers with the metadata it
//! received, builds a chain (a base map, appends, a fork), sends it once on
//! the request and once through the task-local scope, and prints what
//! arrived.
//!
//! Run: `cargo run --example metadata`

#[path = "../tests/support/mod.rs"]
mod support;

use support::{EchoClient, EchoRequest, EchoResponse, EchoServer, UnaryHandler, UnaryOnly};
use tonic::metadata::{KeyAndValueRef, MetadataMap, MetadataValue};
use tonic::{Request, Response, Status};
use tonic_hotpath::metadata::{OutgoingMetadata, OutgoingMetadataExt, OutgoingMetadataLayer};
use tower::ServiceBuilder;

/// Answers every unary call with the `x-` metadata it received.
struct ShowMetadata;

fn show(metadata: &MetadataMap) -> String {
    let mut lines = Vec::new();
    for entry in metadata.iter() {
        match entry {
            KeyAndValueRef::Ascii(key, value) if key.as_str().starts_with("x-") => {
                lines.push(format!("  {key}: {}", value.to_str().unwrap_or("?")));
            }
            KeyAndValueRef::Binary(key, value) if key.as_str().starts_with("x-") => {
                lines.push(format!(
                    "  {key}: {:?}",
                    value.to_bytes().unwrap_or_default()
                ));
            }
            _ => {}
        }
    }
    lines.join("\n")
}

#[tonic::async_trait]
impl UnaryHandler for ShowMetadata {
    async fn unary(&self, request: Request<EchoRequest>) -> Result<Response<EchoResponse>, Status> {
        Ok(Response::new(EchoResponse {
            message: show(request.metadata()),
        }))
    }
}

fn request() -> Request<EchoRequest> {
    Request::new(EchoRequest {
        message: String::new(),
    })
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (addr, incoming) = support::bind().await;
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(EchoServer::new(UnaryOnly(ShowMetadata)))
            .serve_with_incoming(incoming),
    );

    // The layer goes over the Channel, under the generated client.
    let channel = support::connect(addr).await;
    let mut client = EchoClient::new(
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

    // 1. Attached to the request.
    let mut call = request();
    call.set_outgoing_metadata(to_eu);
    let reply = client.unary_echo(call).await?.into_inner();
    println!("server received (request extension):\n{}", reply.message);

    // 2. Through the task-local scope, like a Go context.
    let reply = to_us
        .scope(async { client.unary_echo(request()).await })
        .await?
        .into_inner();
    println!("server received (task-local scope):\n{}", reply.message);
    Ok(())
}
