//! Org ids end to end: a server that requires one, a handler that reads it,
//! a client that stamps it on every call, and what a rejection looks like.
//!
//! `cargo run --example tenant`
#[path = "../tests/support/mod.rs"]
mod support;

use support::{EchoClient, EchoRequest, EchoResponse, EchoServer, UnaryHandler, UnaryOnly};
use tonic::transport::Server;
use tonic::{Request, Response, Status};
use tonic_hotpath::tenant::{OrgId, OrgIdRequestExt, RequireOrgIdLayer, SetOrgIdLayer};
use tower::ServiceBuilder;

/// Greets the tenant the layer validated.
struct Greeter;

#[tonic::async_trait]
impl UnaryHandler for Greeter {
    async fn unary(&self, request: Request<EchoRequest>) -> Result<Response<EchoResponse>, Status> {
        let org_id = request
            .org_id()
            .ok_or_else(|| Status::unauthenticated("no org id"))?;
        println!("handler: request for tenant {org_id}");
        Ok(Response::new(EchoResponse {
            message: format!("hello {org_id}: {}", request.get_ref().message),
        }))
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
            .add_service(EchoServer::new(UnaryOnly(Greeter)))
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
