//! Org ids end to end: a server that requires one, a handler that reads it,
//! a client that stamps it on every call, and what a rejection looks like.
//!
//! `cargo run --example tenant`
#[path = "../tests/support/mod.rs"]
mod support;

use support::{Echo, EchoClient, EchoRequest, EchoResponse, EchoServer, ResponseStream};
use tonic::transport::Server;
use tonic::{Request, Response, Status, Streaming};
use tonic_hotpath::tenant::{OrgId, OrgIdRequestExt, RequireOrgIdLayer, SetOrgIdLayer};
use tower::ServiceBuilder;

/// Greets the tenant the layer validated.
struct Greeter;

#[tonic::async_trait]
impl Echo for Greeter {
    async fn unary_echo(
        &self,
        request: Request<EchoRequest>,
    ) -> Result<Response<EchoResponse>, Status> {
        let org_id = request
            .org_id()
            .ok_or_else(|| Status::unauthenticated("no org id"))?;
        println!("handler: request for tenant {org_id}");
        Ok(Response::new(EchoResponse {
            message: format!("hello {org_id}: {}", request.get_ref().message),
        }))
    }

    type ServerStreamingEchoStream = ResponseStream;

    async fn server_streaming_echo(
        &self,
        _: Request<EchoRequest>,
    ) -> Result<Response<ResponseStream>, Status> {
        Err(Status::unimplemented("unary only"))
    }

    async fn client_streaming_echo(
        &self,
        _: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<EchoResponse>, Status> {
        Err(Status::unimplemented("unary only"))
    }

    type BidirectionalStreamingEchoStream = ResponseStream;

    async fn bidirectional_streaming_echo(
        &self,
        _: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<ResponseStream>, Status> {
        Err(Status::unimplemented("unary only"))
    }
}

fn hello() -> EchoRequest {
    EchoRequest {
        message: "hi".into(),
    }
}

fn show(result: Result<Response<EchoResponse>, Status>) {
    match result {
        Ok(reply) => println!("client:  {}", reply.into_inner().message),
        Err(status) => println!("client:  {:?}: {}", status.code(), status.message()),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Server: every call must carry a valid `x-scope-orgid`.
    let (addr, incoming) = support::bind().await;
    tokio::spawn(
        Server::builder()
            .layer(RequireOrgIdLayer::new())
            .add_service(EchoServer::new(Greeter))
            .serve_with_incoming(incoming),
    );
    let channel = support::connect(addr).await;

    // Client: stamp the org id on every call.
    let stamped = ServiceBuilder::new()
        .layer(SetOrgIdLayer::new(OrgId::new("team-a")?))
        .service(channel.clone());
    show(EchoClient::new(stamped).unary_echo(hello()).await);

    // Rejections: no org id, then an invalid one. The handler never runs.
    let mut plain = EchoClient::new(channel);
    show(plain.unary_echo(hello()).await);

    let mut request = Request::new(hello());
    request
        .metadata_mut()
        .insert("x-scope-orgid", "team/a".parse()?);
    show(plain.unary_echo(request).await);
    Ok(())
}
