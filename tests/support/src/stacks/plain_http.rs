//! axum routes beside gRPC on one tonic server (HTTP/1.1 and HTTP/2), and
//! plain HTTP/1.1 and HTTP/2 (prior knowledge) clients on hyper's
//! connection API.

use std::net::SocketAddr;

use axum::routing::{get, post};
use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode, Version, header};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tonic::service::Routes;
use tonic::transport::Server;

use super::{Incoming, ServerLayer, ServerTask, serve};
use crate::{Echo, EchoServer};

/// The axum routes served beside gRPC:
/// - `GET /healthz` → `200`, text `ok`;
/// - `POST /json` → `200` with the request body and `content-type:
///   application/json` when the request's content type is
///   `application/json`, `415` otherwise.
pub fn axum_routes() -> axum::Router {
    axum::Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/json", post(echo_json))
}

async fn echo_json(headers: HeaderMap, body: Bytes) -> axum::response::Response {
    use axum::response::IntoResponse;
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !is_json {
        return StatusCode::UNSUPPORTED_MEDIA_TYPE.into_response();
    }
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// One tonic server (`accept_http1(true)`) with [`axum_routes`] and the
/// echo service `echo` in one `Routes` (`Routes::from(axum::Router)
/// .add_service(..)`), behind `layer`, on `incoming`.
pub fn spawn_grpc_and_axum<L, E, I>(layer: L, echo: E, incoming: I) -> ServerTask
where
    L: ServerLayer<Routes>,
    E: Echo,
    I: Incoming,
{
    let routes = Routes::from(axum_routes()).add_service(EchoServer::new(echo));
    serve(
        Server::builder().accept_http1(true),
        layer,
        routes,
        incoming,
    )
}

/// A response, read to its end.
#[derive(Debug, Clone)]
pub struct HttpReply {
    /// The HTTP version it came in.
    pub version: Version,
    /// The status.
    pub status: StatusCode,
    /// The headers.
    pub headers: HeaderMap,
    /// The whole body.
    pub body: Bytes,
    /// The trailers (HTTP/2, or chunked HTTP/1.1), if any.
    pub trailers: Option<HeaderMap>,
}

impl HttpReply {
    /// The body as UTF-8 text; panics if it is not.
    pub fn text(&self) -> &str {
        std::str::from_utf8(&self.body).expect("a UTF-8 body")
    }

    /// A header's value as text, if present and visible ASCII.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// A request for `path` with `method`, `content_type` (if any) and `body`;
/// the authority is `127.0.0.1` (add `host` or change the URI as needed).
pub fn request(
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: Bytes,
) -> Request<Bytes> {
    let mut builder = Request::builder()
        .method(method)
        .uri(format!("http://127.0.0.1{path}"));
    if let Some(content_type) = content_type {
        builder = builder.header(header::CONTENT_TYPE, content_type);
    }
    builder.body(body).expect("a valid request")
}

/// `GET path`, no body.
pub fn get_request(path: &str) -> Request<Bytes> {
    request("GET", path, None, Bytes::new())
}

/// `POST path` with an `application/json` body.
pub fn post_json(path: &str, json: &str) -> Request<Bytes> {
    request(
        "POST",
        path,
        Some("application/json"),
        Bytes::copy_from_slice(json.as_bytes()),
    )
}

/// Sends `request` over a new HTTP/1.1 connection to `addr`.
pub async fn http1(addr: SocketAddr, request: Request<Bytes>) -> HttpReply {
    http1_on(tcp(addr).await, request).await
}

/// Sends `request` over a new HTTP/2 connection (prior knowledge, no
/// upgrade) to `addr`.
pub async fn http2(addr: SocketAddr, request: Request<Bytes>) -> HttpReply {
    http2_on(tcp(addr).await, request).await
}

/// Sends `request` as HTTP/1.1 over `io` (any connected stream: TCP, a
/// Unix socket, a TLS stream). The URI's authority becomes the `host`
/// header; the request line carries the path only.
pub async fn http1_on<IO>(io: IO, request: Request<Bytes>) -> HttpReply
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .expect("HTTP/1.1 handshake");
    tokio::spawn(conn);
    let (mut parts, body) = request.into_parts();
    if let Some(authority) = parts.uri.authority().cloned() {
        let host = http::HeaderValue::from_str(authority.as_str()).expect("a valid host");
        parts.headers.entry(header::HOST).or_insert(host);
    }
    parts.uri = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .parse()
        .expect("a valid path");
    let response = send
        .send_request(Request::from_parts(parts, Full::new(body)))
        .await
        .expect("HTTP/1.1 response");
    read_reply(response).await
}

/// Sends `request` as HTTP/2 (prior knowledge) over `io`.
pub async fn http2_on<IO>(io: IO, request: Request<Bytes>) -> HttpReply
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut send, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(io))
            .await
            .expect("HTTP/2 handshake");
    tokio::spawn(conn);
    let response = send
        .send_request(request.map(Full::new))
        .await
        .expect("HTTP/2 response");
    read_reply(response).await
}

async fn read_reply(response: http::Response<hyper::body::Incoming>) -> HttpReply {
    let (parts, body) = response.into_parts();
    let collected = body.collect().await.expect("response body");
    let trailers = collected.trailers().cloned();
    HttpReply {
        version: parts.version,
        status: parts.status,
        headers: parts.headers,
        body: collected.to_bytes(),
        trailers,
    }
}

async fn tcp(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).expect("TCP_NODELAY");
    stream
}
