//! `RequireOrgIdLayer` on a tonic server that serves axum routes beside
//! gRPC (`accept_http1(true)`, `Routes::from(axum::Router)`), over a real
//! server on 127.0.0.1: plain HTTP/1.1 requests without a valid org id get
//! dskit's `AuthenticateUser` answer (`401`, the error's text), exempt
//! paths answer without one, a valid id reaches the route with its
//! `TenantIds`, and gRPC and grpc-web calls on the same server keep their
//! gRPC status.
#![cfg(feature = "grpc")]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::routing::get;
use bytes::Bytes;
use http::{HeaderMap, StatusCode, Version};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use support::{EchoClient, EchoRequest, EchoServer, EchoService};
use tonic::service::Routes;
use tonic::transport::Server;
use tonic::{Code, Request};
use tonic_hotpath::tenant::{OrgIdRequestExt, RequireOrgIdLayer};

/// How often the `/whoami` route ran.
type Calls = Arc<AtomicUsize>;

/// Serves echo (gRPC) beside two axum routes: `/healthz` (exempt) answers
/// `ok`, `/whoami` the tenants `RequireOrgIdLayer` validated.
async fn serve() -> (SocketAddr, Calls) {
    let calls = Calls::default();
    let counted = Arc::clone(&calls);
    let whoami = move |request: axum::extract::Request| {
        counted.fetch_add(1, Ordering::SeqCst);
        let tenants = request
            .tenant_ids()
            .map_or_else(|| "<none>".to_owned(), |ids| ids.as_slice().join("|"));
        async move { tenants }
    };
    let routes = Routes::from(
        axum::Router::new()
            .route("/healthz", get(|| async { "ok" }))
            .route("/whoami", get(whoami)),
    )
    .add_service(EchoServer::new(EchoService));
    let (addr, incoming) = support::bind().await;
    tokio::spawn(
        Server::builder()
            .accept_http1(true)
            .layer(
                RequireOrgIdLayer::new()
                    .allow_multi_tenant(true)
                    .exempt_paths(["/healthz", "/metrics"]),
            )
            .add_routes(routes)
            .serve_with_incoming(incoming),
    );
    (addr, calls)
}

/// An HTTP/1.1 response as the client read it.
#[derive(Debug)]
struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

/// Sends `method path` over HTTP/1.1 with `headers` and an empty body.
async fn http1(
    addr: SocketAddr,
    method: http::Method,
    path: &str,
    headers: &[(&str, &str)],
) -> Reply {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let mut request = http::Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = client
        .request(request.body(Full::new(Bytes::new())).unwrap())
        .await
        .expect("an HTTP/1.1 response");
    assert_eq!(response.version(), Version::HTTP_11);
    let (parts, body) = response.into_parts();
    let body = body.collect().await.expect("the whole body").to_bytes();
    Reply {
        status: parts.status,
        headers: parts.headers,
        body: String::from_utf8(body.to_vec()).expect("a text body"),
    }
}

async fn get_path(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Reply {
    http1(addr, http::Method::GET, path, headers).await
}

/// A missing, invalid or doubled org id on a plain HTTP request: `401`,
/// the error's text and a newline as a `text/plain` body (Go's
/// `http.Error`), no gRPC status, and the route is not called; also for a
/// request with a non-gRPC content type.
#[tokio::test]
async fn plain_http_without_a_valid_org_id_gets_401_with_the_error_text() {
    let (addr, calls) = serve().await;
    let cases: [(&[(&str, &str)], &str); 5] = [
        (&[], "no org id: the x-scope-orgid header is missing\n"),
        (
            &[("x-scope-orgid", "team/a")],
            "org id has unsupported character '/' at byte 4\n",
        ),
        (
            &[("x-scope-orgid", "a"), ("x-scope-orgid", "b")],
            "2 x-scope-orgid headers, exactly one is allowed\n",
        ),
        (
            &[("content-type", "application/json")],
            "no org id: the x-scope-orgid header is missing\n",
        ),
        (
            &[("content-type", "application/grpcx")],
            "no org id: the x-scope-orgid header is missing\n",
        ),
    ];
    for (headers, text) in cases {
        let reply = get_path(addr, "/whoami", headers).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{headers:?}");
        assert_eq!(reply.body, text, "{headers:?}");
        assert_eq!(
            reply.headers["content-type"], "text/plain; charset=utf-8",
            "{headers:?}"
        );
        assert_eq!(reply.headers["x-content-type-options"], "nosniff");
        assert!(reply.headers.get("grpc-status").is_none(), "{headers:?}");
    }
    assert_eq!(calls.load(Ordering::SeqCst), 0, "the route was called");
}

/// A valid org id: the route runs and reads the validated tenants from the
/// request's extensions, as a gRPC handler does.
#[tokio::test]
async fn plain_http_with_a_valid_org_id_reaches_the_route_with_its_tenants() {
    let (addr, calls) = serve().await;
    let reply = get_path(addr, "/whoami", &[("x-scope-orgid", "team-a")]).await;
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (StatusCode::OK, "team-a")
    );
    let reply = get_path(addr, "/whoami", &[("x-scope-orgid", "b|a")]).await;
    assert_eq!((reply.status, reply.body.as_str()), (StatusCode::OK, "a|b"));
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

/// Exempt paths answer without an org id; only the exact path is exempt
/// (a query is not part of it), so `/healthz/` is refused before routing.
#[tokio::test]
async fn exempt_paths_answer_without_an_org_id_and_match_exactly() {
    let (addr, _) = serve().await;
    for path in ["/healthz", "/healthz?verbose=1"] {
        let reply = get_path(addr, path, &[]).await;
        assert_eq!((reply.status, reply.body.as_str()), (StatusCode::OK, "ok"));
    }
    let reply = get_path(addr, "/healthz/", &[]).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    // Exempt but not routed: the router's own answer (axum's 404), not a
    // refusal.
    let reply = get_path(addr, "/metrics", &[]).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
}

/// A grpc-web call (over HTTP/1.1) without an org id keeps the gRPC
/// answer: a trailers-only `UNAUTHENTICATED`, not a plain `401`.
#[tokio::test]
async fn grpc_web_without_an_org_id_gets_a_grpc_status() {
    let (addr, _) = serve().await;
    for content_type in ["application/grpc-web+proto", "application/grpc-web-text"] {
        let reply = http1(
            addr,
            http::Method::POST,
            "/hotpath.echo.Echo/UnaryEcho",
            &[("content-type", content_type)],
        )
        .await;
        assert_eq!(reply.status, StatusCode::OK, "{content_type}");
        assert_eq!(reply.headers["grpc-status"], "16", "{content_type}");
        assert_eq!(reply.body, "", "{content_type}");
    }
}

/// gRPC calls on the same server (HTTP/2) keep their statuses.
#[tokio::test]
async fn grpc_calls_beside_the_routes_keep_their_statuses() {
    let (addr, _) = serve().await;
    let mut client = EchoClient::new(support::connect(addr).await);
    let call = |org_id: Option<&'static str>| {
        let mut request = Request::new(EchoRequest {
            message: "hi".into(),
        });
        if let Some(org_id) = org_id {
            request
                .metadata_mut()
                .insert("x-scope-orgid", org_id.parse().unwrap());
        }
        request
    };
    let refused = client.unary_echo(call(None)).await.unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    let refused = client.unary_echo(call(Some("a/b"))).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
    let answer = client.unary_echo(call(Some("team-a"))).await.unwrap();
    assert_eq!(answer.into_inner().message, "hi");
}
