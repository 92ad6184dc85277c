//! `tenant` over a real tonic server and client on 127.0.0.1 (TCP).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use support::{Echo, EchoClient, EchoRequest, EchoResponse, EchoServer, ResponseStream};
use tokio_stream::StreamExt;
use tonic::metadata::MetadataValue;
use tonic::transport::{Channel, Server};
use tonic::{Code, Request, Response, Status, Streaming};
use tonic_hotpath::tenant::{
    InjectOrgId, OrgId, OrgIdRequestExt, RequireOrgIdLayer, SetOrgIdLayer, TenantIds,
};
use tower::ServiceBuilder;

/// Answers every RPC with the tenants the layer validated (`a|b` form),
/// counting handler calls. With a `downstream`, the unary handler forwards
/// the incoming tenants to it and answers with what the downstream saw.
#[derive(Clone, Default)]
struct TenantEcho {
    calls: Arc<AtomicUsize>,
    downstream: Option<EchoClient<Channel>>,
}

impl TenantEcho {
    fn seen<T>(&self, request: &Request<T>) -> Result<String, Status> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        // The one-line accessor for single-tenant handlers, then the
        // general one.
        if let Some(org_id) = tonic_hotpath::tenant::org_id(request) {
            return Ok(org_id.to_string());
        }
        Ok(tenants(request)?.to_string())
    }
}

fn tenants<T>(request: &Request<T>) -> Result<&TenantIds, Status> {
    request
        .tenant_ids()
        .ok_or_else(|| Status::internal("handler ran without a validated org id"))
}

// Every method answers with the tenants it saw (none forwards to
// `EchoService`), so this is an `Echo` of its own, not an `EchoOverride`.
#[tonic::async_trait]
impl Echo for TenantEcho {
    async fn unary_echo(
        &self,
        request: Request<EchoRequest>,
    ) -> Result<Response<EchoResponse>, Status> {
        let seen = self.seen(&request)?;
        let Some(mut downstream) = self.downstream.clone() else {
            return Ok(Response::new(EchoResponse { message: seen }));
        };
        // The distributor → ingester pattern: forward the incoming tenants.
        let tenants = tenants(&request)?.clone();
        let mut outgoing = Request::new(request.into_inner());
        outgoing.inject_tenant_ids(&tenants)?;
        downstream.unary_echo(outgoing).await
    }

    type ServerStreamingEchoStream = ResponseStream;

    async fn server_streaming_echo(
        &self,
        request: Request<EchoRequest>,
    ) -> Result<Response<Self::ServerStreamingEchoStream>, Status> {
        let message = self.seen(&request)?;
        let one = tokio_stream::iter([Ok(EchoResponse { message })]);
        Ok(Response::new(Box::pin(one)))
    }

    async fn client_streaming_echo(
        &self,
        request: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<EchoResponse>, Status> {
        let message = self.seen(&request)?;
        Ok(Response::new(EchoResponse { message }))
    }

    type BidirectionalStreamingEchoStream = ResponseStream;

    async fn bidirectional_streaming_echo(
        &self,
        request: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<Self::BidirectionalStreamingEchoStream>, Status> {
        let message = self.seen(&request)?;
        let one = tokio_stream::iter([Ok(EchoResponse { message })]);
        Ok(Response::new(Box::pin(one)))
    }
}

async fn spawn(layer: RequireOrgIdLayer, service: TenantEcho) -> SocketAddr {
    let (addr, incoming) = support::bind().await;
    tokio::spawn(
        Server::builder()
            .layer(layer)
            .add_service(EchoServer::new(service))
            .serve_with_incoming(incoming),
    );
    addr
}

/// A server with `layer` and its handler-call counter, plus a client.
async fn setup(layer: RequireOrgIdLayer) -> (EchoClient<Channel>, Arc<AtomicUsize>) {
    let service = TenantEcho::default();
    let calls = service.calls.clone();
    let addr = spawn(layer, service).await;
    (EchoClient::new(support::connect(addr).await), calls)
}

fn request(org_ids: &[&str]) -> Request<EchoRequest> {
    let mut request = Request::new(EchoRequest {
        message: "hi".into(),
    });
    for id in org_ids {
        let value = MetadataValue::try_from(*id).expect("header-safe test value");
        request.metadata_mut().append("x-scope-orgid", value);
    }
    request
}

async fn unary(client: &mut EchoClient<Channel>, org_ids: &[&str]) -> Result<String, Status> {
    Ok(client
        .unary_echo(request(org_ids))
        .await?
        .into_inner()
        .message)
}

/// A call with `org_ids` fails with `code` and exactly `message`.
async fn assert_refused(
    client: &mut EchoClient<Channel>,
    org_ids: &[&str],
    code: Code,
    message: &str,
) {
    let status = unary(client, org_ids).await.unwrap_err();
    assert_eq!(
        (status.code(), status.message()),
        (code, message),
        "{org_ids:?}"
    );
}

#[tokio::test]
async fn missing_org_id_is_unauthenticated_and_the_handler_never_runs() {
    let (mut client, calls) = setup(RequireOrgIdLayer::new()).await;
    assert_refused(
        &mut client,
        &[],
        Code::Unauthenticated,
        "no org id: the x-scope-orgid header is missing",
    )
    .await;
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn two_headers_are_refused() {
    let (mut client, calls) = setup(RequireOrgIdLayer::new()).await;
    assert_refused(
        &mut client,
        &["a", "b"],
        Code::InvalidArgument,
        "2 x-scope-orgid headers, exactly one is allowed",
    )
    .await;
    // Two equal values are still two headers.
    let two = "2 x-scope-orgid headers, exactly one is allowed";
    assert_refused(&mut client, &["a", "a"], Code::InvalidArgument, two).await;
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn invalid_org_ids_are_invalid_argument_with_a_precise_message() {
    let (mut client, calls) = setup(RequireOrgIdLayer::new()).await;
    let too_long = "a".repeat(151);
    let cases: [(&str, &str); 6] = [
        ("team/a", "org id has unsupported character '/' at byte 4"),
        (&too_long, "org id is 151 bytes long, the limit is 150"),
        (".", "org id is '.' or '..'"),
        ("..", "org id is '.' or '..'"),
        ("", "org id is empty at byte 0"),
        ("__markers__", "org id '__markers__' is reserved"),
    ];
    for (id, message) in cases {
        assert_refused(&mut client, &[id], Code::InvalidArgument, message).await;
    }
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_valid_org_id_reaches_the_handler() {
    let (mut client, calls) = setup(RequireOrgIdLayer::new()).await;
    let longest = "Z".repeat(150);
    for id in ["team-a", "a!-_.*'()Z9", "...", longest.as_str()] {
        assert_eq!(unary(&mut client, &[id]).await.unwrap(), id);
    }
    assert_eq!(calls.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn streaming_rpcs_are_checked_too() {
    let (mut client, calls) = setup(RequireOrgIdLayer::new()).await;
    let status = client
        .server_streaming_echo(request(&[]))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated);

    let mut outgoing = Request::new(tokio_stream::iter([EchoRequest {
        message: "x".into(),
    }]));
    outgoing
        .metadata_mut()
        .insert("x-scope-orgid", "bad id".parse().unwrap());
    let status = client.client_streaming_echo(outgoing).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(calls.load(Ordering::SeqCst), 0);

    let mut stream = client
        .server_streaming_echo(request(&["t1"]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(stream.next().await.unwrap().unwrap().message, "t1");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn multi_tenant_ids_are_normalised_when_allowed() {
    let layer = RequireOrgIdLayer::new().allow_multi_tenant(true);
    let (mut client, calls) = setup(layer).await;
    assert_eq!(unary(&mut client, &["a|b|a"]).await.unwrap(), "a|b");
    assert_eq!(unary(&mut client, &["b|a|c"]).await.unwrap(), "a|b|c");
    assert_eq!(unary(&mut client, &["solo"]).await.unwrap(), "solo");
    assert_refused(
        &mut client,
        &["a||b"],
        Code::InvalidArgument,
        "org id is empty at byte 2",
    )
    .await;
    let space = "org id has unsupported character ' ' at byte 3";
    assert_refused(&mut client, &["a|b c"], Code::InvalidArgument, space).await;
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn multi_tenant_ids_are_refused_by_default() {
    let (mut client, calls) = setup(RequireOrgIdLayer::new()).await;
    assert_refused(
        &mut client,
        &["a|b|a"],
        Code::InvalidArgument,
        "org id names several tenants ('|' at byte 1), one is required",
    )
    .await;
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn forwarding_passes_the_same_org_id_downstream() {
    let ingester = TenantEcho::default();
    let ingester_calls = ingester.calls.clone();
    let multi = RequireOrgIdLayer::new().allow_multi_tenant(true);
    let ingester_addr = spawn(multi.clone(), ingester).await;

    let distributor = TenantEcho {
        downstream: Some(EchoClient::new(support::connect(ingester_addr).await)),
        ..TenantEcho::default()
    };
    let distributor_calls = distributor.calls.clone();
    let distributor_addr = spawn(multi, distributor).await;
    let mut client = EchoClient::new(support::connect(distributor_addr).await);

    // The answer is what the ingester's handler saw.
    assert_eq!(unary(&mut client, &["team-7"]).await.unwrap(), "team-7");
    assert_eq!(unary(&mut client, &["z|y|z"]).await.unwrap(), "y|z");
    assert_eq!(distributor_calls.load(Ordering::SeqCst), 2);
    assert_eq!(ingester_calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn client_layer_stamps_every_call() {
    let service = TenantEcho::default();
    let calls = service.calls.clone();
    let addr = spawn(RequireOrgIdLayer::new(), service).await;
    let channel = ServiceBuilder::new()
        .layer(SetOrgIdLayer::new(OrgId::new("stamped").unwrap()))
        .service(support::connect(addr).await);
    let mut client = EchoClient::new(channel);

    for _ in 0..3 {
        let reply = client.unary_echo(request(&[])).await.unwrap();
        assert_eq!(reply.into_inner().message, "stamped");
    }
    // The same id already present is fine.
    let reply = client.unary_echo(request(&["stamped"])).await.unwrap();
    assert_eq!(reply.into_inner().message, "stamped");

    // A different id is refused on the client; nothing reaches the server.
    let status = client.unary_echo(request(&["other"])).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(
        status.message(),
        "cannot inject org id 'stamped': a different org id 'other' is already present"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn client_layer_can_stamp_several_tenants() {
    let layer = RequireOrgIdLayer::new().allow_multi_tenant(true);
    let service = TenantEcho::default();
    let calls = service.calls.clone();
    let addr = spawn(layer, service).await;
    let channel = ServiceBuilder::new()
        .layer(SetOrgIdLayer::new(TenantIds::parse("b|a").unwrap()))
        .service(support::connect(addr).await);
    let reply = EchoClient::new(channel)
        .unary_echo(request(&[]))
        .await
        .unwrap();
    assert_eq!(reply.into_inner().message, "a|b");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn exempt_services_reach_the_handler_without_an_org_id() {
    let exempt = RequireOrgIdLayer::new().exempt_services(&["hotpath.echo.Echo"]);
    let (mut client, calls) = setup(exempt).await;
    // The handler runs, and finds no validated org id in its extensions.
    let internal = "handler ran without a validated org id";
    assert_refused(&mut client, &[], Code::Internal, internal).await;
    assert_refused(&mut client, &["bad id"], Code::Internal, internal).await;
    assert_eq!(calls.load(Ordering::SeqCst), 2);

    let other = RequireOrgIdLayer::new().exempt_services(&["grpc.health.v1.Health"]);
    let (mut client, calls) = setup(other).await;
    let missing = "no org id: the x-scope-orgid header is missing";
    assert_refused(&mut client, &[], Code::Unauthenticated, missing).await;
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn org_id_rides_the_outgoing_metadata_chain() {
    use tonic_hotpath::metadata::{OutgoingMetadata, OutgoingMetadataLayer};

    let addr = spawn(RequireOrgIdLayer::new(), TenantEcho::default()).await;
    let channel = ServiceBuilder::new()
        .layer(OutgoingMetadataLayer::new())
        .service(support::connect(addr).await);
    let mut client = EchoClient::new(channel);

    let mut chain = OutgoingMetadata::new()
        .append_static("x-request-id", "7")
        .unwrap();
    chain
        .inject_org_id(&OrgId::new("team-chain").unwrap())
        .unwrap();
    let answer = chain
        .scope(client.unary_echo(EchoRequest {
            message: String::new(),
        }))
        .await
        .unwrap();
    assert_eq!(answer.into_inner().message, "team-chain");

    // Without the org id in the chain, the server refuses the call.
    let refused = OutgoingMetadata::new()
        .append_static("x-request-id", "8")
        .unwrap()
        .scope(client.unary_echo(EchoRequest {
            message: String::new(),
        }))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated);
}
