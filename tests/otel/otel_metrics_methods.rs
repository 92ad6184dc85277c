//! On a server, `OtelMetrics` gives a method of a registered service its
//! own `grpc.method` only once the server is seen to serve it (issue #18):
//! made-up methods, calls refused by a layer inside the stats layer and
//! calls the client gives up on are `other` and leave nothing in the
//! handler. Against tonic's health service over 127.0.0.1, read back
//! from the SDK's in-memory exporter.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use support::otel::{Counts, Sdk, attrs_of};
use support::wait_until;
use tonic::transport::Channel;
use tonic::{Code, Request, Status};
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::health_server::SERVICE_NAME;
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};
use tonic_hotpath::otel::OtelMetrics;
use tonic_hotpath::stats::{CombinedLayer, RpcEvent, StatsHandler};
use tonic_hotpath::tenant::RequireOrgIdLayer;
use tower::layer::util::Identity;

const HEALTH_CHECK: &str = "grpc.health.v1.Health/Check";

/// Counts the RPCs a server layer began: a second handler beside the
/// metrics, which count an unproven RPC as started only later.
#[derive(Debug, Default)]
struct Begun(AtomicUsize);

impl StatsHandler for Begun {
    type RpcState = ();
    type ConnState = ();
    const PAYLOAD_TIMES: bool = false;

    fn handle_rpc(&self, _: &mut (), event: &RpcEvent<'_>) {
        if let RpcEvent::Begin { .. } = event {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Serves the health service (`SERVICE_NAME` registered with
/// `with_service`) behind the stats layer (`$metrics`, and `$begun`: a
/// [`Begun`] counter), stacked over the `$inner` layer; evaluates to a
/// plain channel to it. (A macro: the stats layer's bounds on the layers
/// inside it would take a screen to spell out.)
macro_rules! serve_health {
    ($metrics:expr, $begun:expr, $inner:expr) => {{
        let stats = CombinedLayer::server()
            .with(Arc::clone($metrics))
            .with(Arc::clone($begun));
        let (addr, incoming) = support::bind().await;
        let (_reporter, health) = tonic_health::server::health_reporter();
        tokio::spawn(
            tonic::transport::Server::builder()
                .layer(
                    tower::ServiceBuilder::new()
                        .layer(stats)
                        .layer($inner)
                        .into_inner(),
                )
                .add_service(health)
                .serve_with_incoming(incoming),
        );
        support::connect(addr).await
    }};
}

fn health_metrics(sdk: &Sdk) -> Arc<OtelMetrics> {
    Arc::new(sdk.metrics().with_service(SERVICE_NAME).build().unwrap())
}

/// A unary call to any `path` with a health request, as a hostile client
/// makes one; its status.
async fn call(channel: &Channel, path: &str, request: Request<HealthCheckRequest>) -> Status {
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready().await.unwrap();
    let path = http::uri::PathAndQuery::try_from(path).unwrap();
    let codec = tonic_prost::ProstCodec::<HealthCheckRequest, HealthCheckResponse>::default();
    match grpc.unary(request, path, codec).await {
        Ok(_) => Status::ok(""),
        Err(status) => status,
    }
}

/// A health check carrying `org_id`, if any.
fn check_request(org_id: Option<&str>) -> Request<HealthCheckRequest> {
    let mut request = Request::new(HealthCheckRequest::default());
    if let Some(org_id) = org_id {
        request
            .metadata_mut()
            .insert("x-scope-orgid", org_id.parse().unwrap());
    }
    request
}

/// Waits until the server recorded `n` call durations.
async fn wait_for_server_ends(sdk: &Sdk, n: u64) {
    wait_until("every RPC ended on the server", || {
        let ends = sdk.counts("grpc.server.call.duration");
        ends.iter().map(|(_, count)| count).sum::<u64>() == n
    })
    .await;
}

/// The server's started counts and duration counts.
fn server_counts(sdk: &Sdk) -> (Counts, Counts) {
    (
        sdk.counts("grpc.server.call.started"),
        sdk.counts("grpc.server.call.duration"),
    )
}

fn assert_learned(metrics: &OtelMetrics, n: usize) {
    let debug = format!("{metrics:?}");
    assert!(
        debug.contains(&format!("learned_methods: {n},")),
        "{n} learned methods: {debug}"
    );
}

#[tokio::test]
async fn otel_made_up_methods_cannot_push_real_ones_out() {
    // Issue #18: 1 200 made-up methods under the registered service, then
    // the real one.
    let sdk = Sdk::new();
    let metrics = health_metrics(&sdk);
    let channel = serve_health!(&metrics, &Arc::<Begun>::default(), Identity::new());
    for i in 0..1_200 {
        let path = format!("/{SERVICE_NAME}/junk{i}");
        let status = call(&channel, &path, check_request(None)).await;
        assert_eq!(status.code(), Code::Unimplemented, "{path}");
    }
    assert_learned(&metrics, 0);
    HealthClient::new(channel.clone())
        .check(HealthCheckRequest::default())
        .await
        .unwrap();
    wait_for_server_ends(&sdk, 1_201).await;

    let (started, ended) = server_counts(&sdk);
    assert_eq!(
        started,
        [
            (attrs_of(&[("grpc.method", HEALTH_CHECK)]), 1),
            (attrs_of(&[("grpc.method", "other")]), 1_200),
        ]
    );
    assert_eq!(
        ended,
        [
            (
                attrs_of(&[("grpc.method", HEALTH_CHECK), ("grpc.status", "OK")]),
                1
            ),
            (
                attrs_of(&[("grpc.method", "other"), ("grpc.status", "UNIMPLEMENTED")]),
                1_200
            ),
        ]
    );
    // Only the real method was kept.
    assert_learned(&metrics, 1);
}

#[tokio::test]
async fn otel_calls_refused_inside_the_stats_layer_prove_nothing() {
    let sdk = Sdk::new();
    let metrics = health_metrics(&sdk);
    let channel = serve_health!(&metrics, &Arc::<Begun>::default(), RequireOrgIdLayer::new());
    let junk = format!("/{SERVICE_NAME}/junk");
    let check = format!("/{HEALTH_CHECK}");
    // Refused by the tenant layer: a made-up method, then the real one.
    for path in [&junk, &check] {
        let status = call(&channel, path, check_request(None)).await;
        assert_eq!(status.code(), Code::Unauthenticated, "{path}");
    }
    // Let through: the made-up method is unimplemented.
    let status = call(&channel, &junk, check_request(Some("tenant-a"))).await;
    assert_eq!(status.code(), Code::Unimplemented);
    wait_for_server_ends(&sdk, 3).await;
    assert_learned(&metrics, 0);
    // The real method, let through, proves itself.
    let status = call(&channel, &check, check_request(Some("tenant-a"))).await;
    assert_eq!(status.code(), Code::Ok);
    wait_for_server_ends(&sdk, 4).await;

    let (started, ended) = server_counts(&sdk);
    assert_eq!(
        started,
        [
            (attrs_of(&[("grpc.method", HEALTH_CHECK)]), 1),
            (attrs_of(&[("grpc.method", "other")]), 3),
        ]
    );
    assert_eq!(
        ended,
        [
            (
                attrs_of(&[("grpc.method", HEALTH_CHECK), ("grpc.status", "OK")]),
                1
            ),
            (
                attrs_of(&[("grpc.method", "other"), ("grpc.status", "UNAUTHENTICATED")]),
                2
            ),
            (
                attrs_of(&[("grpc.method", "other"), ("grpc.status", "UNIMPLEMENTED")]),
                1
            ),
        ]
    );
    assert_learned(&metrics, 1);
}

/// Answers every call with a plain HTTP 401 and an empty body, without
/// gRPC's content type or a `grpc-status` (as a non-gRPC auth layer
/// might).
#[derive(Debug, Clone)]
struct PlainHttp401;

impl<B> tower::Service<http::Request<B>> for PlainHttp401 {
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = std::future::Ready<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: http::Request<B>) -> Self::Future {
        let mut response = http::Response::new(tonic::body::Body::empty());
        *response.status_mut() = http::StatusCode::UNAUTHORIZED;
        std::future::ready(Ok(response))
    }
}

#[tokio::test]
async fn otel_plain_http_refusals_prove_nothing() {
    let sdk = Sdk::new();
    let metrics = health_metrics(&sdk);
    let refuse = tower::layer::layer_fn(|_routes| PlainHttp401);
    let channel = serve_health!(&metrics, &Arc::<Begun>::default(), refuse);
    for path in [format!("/{SERVICE_NAME}/junk"), format!("/{HEALTH_CHECK}")] {
        let status = call(&channel, &path, check_request(None)).await;
        assert_eq!(status.code(), Code::Unauthenticated, "{path}");
    }
    wait_for_server_ends(&sdk, 2).await;
    let (started, ended) = server_counts(&sdk);
    assert_eq!(started, [(attrs_of(&[("grpc.method", "other")]), 2)]);
    assert!(
        ended
            .iter()
            .all(|(attrs, _)| attrs["grpc.method"] == "other"),
        "{ended:?}"
    );
    assert_learned(&metrics, 0);
}

/// Holds every call for 10 s before its service sees it (as a queue or a
/// rate limiter inside the stats layer would), so the client gives up
/// first.
#[derive(Debug, Clone)]
struct Hold<S>(S);

impl<S, B> tower::Service<http::Request<B>> for Hold<S>
where
    S: tower::Service<http::Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        // tonic's services do nothing until their future is polled.
        let response = self.0.call(request);
        Box::pin(async move {
            tokio::time::sleep(Duration::from_secs(10)).await;
            response.await
        })
    }
}

#[tokio::test]
async fn otel_calls_the_client_gives_up_on_prove_nothing() {
    let sdk = Sdk::new();
    let metrics = health_metrics(&sdk);
    let begun = Arc::new(Begun::default());
    let channel = serve_health!(&metrics, &begun, tower::layer::layer_fn(Hold));
    let junk = format!("/{SERVICE_NAME}/junk");
    // Timed out: a made-up method, and the real one (held too).
    for path in [junk.clone(), format!("/{HEALTH_CHECK}")] {
        let mut request = check_request(None);
        request.set_timeout(Duration::from_millis(100));
        let status = call(&channel, &path, request).await;
        // tonic's client reports its own timeout as CANCELLED.
        assert!(
            [Code::Cancelled, Code::DeadlineExceeded].contains(&status.code()),
            "{path}: {status:?}"
        );
    }
    // Cancelled: the application drops the call once the server has it.
    let cancelling = channel.clone();
    let cancelled =
        tokio::spawn(async move { call(&cancelling, &junk, check_request(None)).await });
    wait_until("the server began the call", || {
        begun.0.load(Ordering::Relaxed) == 3
    })
    .await;
    cancelled.abort();
    wait_for_server_ends(&sdk, 3).await;

    let (started, ended) = server_counts(&sdk);
    assert_eq!(started, [(attrs_of(&[("grpc.method", "other")]), 3)]);
    assert_eq!(ended.iter().map(|(_, n)| n).sum::<u64>(), 3);
    for (attrs, _) in &ended {
        assert_eq!(attrs["grpc.method"], "other", "{attrs:?}");
        assert!(
            ["CANCELLED", "DEADLINE_EXCEEDED"].contains(&attrs["grpc.status"].as_str()),
            "{attrs:?}"
        );
    }
    assert_learned(&metrics, 0);
}
