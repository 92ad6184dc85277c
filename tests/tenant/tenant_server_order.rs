//! `RequireOrgIdLayer` stacked above and below other server layers (tonic's
//! `InterceptorLayer`, the stats `CombinedLayer`), over a real tonic server
//! and client on 127.0.0.1: every order compiles, refuses and admits alike.

use std::sync::{Arc, Mutex};

use support::{EchoClient, EchoRequest, EchoServer, EchoService};
use tonic::transport::Server;
use tonic::{Code, Request, Status};
use tonic_hotpath::stats::{CombinedLayer, RpcEvent, StatsHandler};
use tonic_hotpath::tenant::RequireOrgIdLayer;
use tower::ServiceBuilder;

/// The codes of every `End` the stats layer reported.
#[derive(Debug, Default)]
struct Ends(Mutex<Vec<Code>>);

impl StatsHandler for Ends {
    type RpcState = ();
    type ConnState = ();
    const PAYLOAD_TIMES: bool = false;

    fn handle_rpc(&self, _: &mut (), event: &RpcEvent<'_>) {
        if let RpcEvent::End(end) = event {
            self.0.lock().unwrap().push(end.code);
        }
    }
}

impl Ends {
    fn codes(&self) -> Vec<Code> {
        self.0.lock().unwrap().clone()
    }
}

/// The org ids tonic's interceptor saw (`None` for a call without one).
type Seen = Arc<Mutex<Vec<Option<String>>>>;

fn interceptor(seen: Seen) -> impl Fn(Request<()>) -> Result<Request<()>, Status> + Clone {
    move |request: Request<()>| {
        let org_id = request
            .metadata()
            .get("x-scope-orgid")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        seen.lock().unwrap().push(org_id);
        Ok(request)
    }
}

/// Where the tenant layer sits in the stack.
#[derive(Debug, Clone, Copy)]
enum TenantAt {
    Outermost,
    Innermost,
}

/// Serves echo with the three layers in the given order; returns a client,
/// what the interceptor saw and what the stats layer reported.
async fn serve(tenant_at: TenantAt) -> (EchoClient<tonic::transport::Channel>, Seen, Arc<Ends>) {
    let seen = Seen::default();
    let ends = Arc::new(Ends::default());
    let stats = CombinedLayer::server().with(Arc::clone(&ends));
    let intercept = tonic::service::InterceptorLayer::new(interceptor(Arc::clone(&seen)));
    let (addr, incoming) = support::bind().await;
    let echo = EchoServer::new(EchoService);
    // ServiceBuilder: the first layer is the outermost.
    match tenant_at {
        TenantAt::Outermost => tokio::spawn(
            Server::builder()
                .layer(
                    ServiceBuilder::new()
                        .layer(RequireOrgIdLayer::new())
                        .layer(intercept)
                        .layer(stats)
                        .into_inner(),
                )
                .add_service(echo)
                .serve_with_incoming(incoming),
        ),
        TenantAt::Innermost => tokio::spawn(
            Server::builder()
                .layer(
                    ServiceBuilder::new()
                        .layer(stats)
                        .layer(intercept)
                        .layer(RequireOrgIdLayer::new())
                        .into_inner(),
                )
                .add_service(echo)
                .serve_with_incoming(incoming),
        ),
    };
    let client = EchoClient::new(support::connect(addr).await);
    (client, seen, ends)
}

async fn unary(
    client: &mut EchoClient<tonic::transport::Channel>,
    org_id: Option<&str>,
) -> Result<String, Status> {
    let mut request = Request::new(EchoRequest {
        message: "hi".into(),
    });
    if let Some(org_id) = org_id {
        request
            .metadata_mut()
            .insert("x-scope-orgid", org_id.parse().unwrap());
    }
    Ok(client.unary_echo(request).await?.into_inner().message)
}

/// No org id → UNAUTHENTICATED, a bad one → INVALID_ARGUMENT, a good one
/// is echoed.
async fn refuse_two_then_admit_one(client: &mut EchoClient<tonic::transport::Channel>) {
    let refused = unary(client, None).await.unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    let refused = unary(client, Some("a/b")).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
    assert_eq!(unary(client, Some("team-a")).await.unwrap(), "hi");
}

#[tokio::test]
async fn tenant_layer_outside_an_interceptor_and_stats_refuses_before_them() {
    let (mut client, seen, ends) = serve(TenantAt::Outermost).await;

    refuse_two_then_admit_one(&mut client).await;

    // Refused calls never reached the layers below.
    assert_eq!(*seen.lock().unwrap(), [Some("team-a".to_owned())]);
    support::wait_until("one End", || !ends.codes().is_empty()).await;
    assert_eq!(ends.codes(), [Code::Ok]);
}

#[tokio::test]
async fn tenant_layer_inside_an_interceptor_and_stats_is_seen_by_them() {
    let (mut client, seen, ends) = serve(TenantAt::Innermost).await;

    refuse_two_then_admit_one(&mut client).await;

    // The layers above saw every call, and stats the refusals' codes.
    assert_eq!(
        *seen.lock().unwrap(),
        [None, Some("a/b".to_owned()), Some("team-a".to_owned())]
    );
    support::wait_until("three Ends", || ends.codes().len() == 3).await;
    assert_eq!(
        ends.codes(),
        [Code::Unauthenticated, Code::InvalidArgument, Code::Ok]
    );
}
