//! tonic-web: the echo service behind `tonic_web::GrpcWebLayer` with a
//! caller's layer outside or inside it, and a grpc-web client for the
//! unary echo over HTTP/1.1 (`application/grpc-web+proto` and
//! `application/grpc-web-text`, base64), which frames the request and
//! parses the response's data frames and trailer frame (flag `0x80`).

use std::net::SocketAddr;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderMap, HeaderName, HeaderValue, Request};
use tonic::service::Routes;
use tonic::transport::Server;
use tonic_web::{GrpcWebLayer, GrpcWebService};
use tower::layer::util::Stack;

use super::plain_http::{HttpReply, http1};
use super::{Incoming, ServerLayer, ServerTask, UNARY_PATH, echo_frame, serve};
use crate::{Echo, EchoResponse, EchoServer};

/// The echo service `echo` behind `layer` outside `GrpcWebLayer`
/// (`Server::builder().accept_http1(true).layer(layer).layer(GrpcWebLayer::new())`):
/// `layer` sees grpc-web requests as the client sent them.
pub fn spawn_web_layer_outside<L, E, I>(layer: L, echo: E, incoming: I) -> ServerTask
where
    L: ServerLayer<GrpcWebService<Routes>>,
    E: Echo,
    I: Incoming,
{
    // `Stack::new(inner, outer)`: tonic-web wraps the routes, `layer` wraps it.
    let stack = Stack::new(GrpcWebLayer::new(), layer);
    serve(
        web_server(),
        stack,
        Routes::new(EchoServer::new(echo)),
        incoming,
    )
}

/// The echo service `echo` behind `layer` inside `GrpcWebLayer`
/// (`Server::builder().accept_http1(true).layer(GrpcWebLayer::new()).layer(layer)`):
/// `layer` sees the gRPC requests tonic-web translated them into.
pub fn spawn_web_layer_inside<L, E, I>(layer: L, echo: E, incoming: I) -> ServerTask
where
    L: ServerLayer<Routes>,
    E: Echo,
    I: Incoming,
{
    let stack = Stack::new(layer, GrpcWebLayer::new());
    serve(
        web_server(),
        stack,
        Routes::new(EchoServer::new(echo)),
        incoming,
    )
}

fn web_server() -> Server {
    Server::builder().accept_http1(true)
}

/// A grpc-web wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebFormat {
    /// `application/grpc-web+proto`: binary frames.
    Proto,
    /// `application/grpc-web-text`: base64 frames.
    Text,
}

impl WebFormat {
    /// The request's `content-type` (and `accept`).
    pub fn content_type(self) -> &'static str {
        match self {
            WebFormat::Proto => "application/grpc-web+proto",
            WebFormat::Text => "application/grpc-web-text",
        }
    }
}

/// A grpc-web response, read to its end and unframed.
#[derive(Debug, Clone)]
pub struct WebReply {
    /// The HTTP response (status, headers, the raw body as sent).
    pub http: HttpReply,
    /// The data frames' payloads (flag bit `0x80` clear), in order.
    pub messages: Vec<Bytes>,
    /// The trailer frame's fields (empty if none came).
    pub trailers: HeaderMap,
}

impl WebReply {
    /// `grpc-status` from the trailer frame, else from the headers
    /// (trailers-only).
    pub fn grpc_status(&self) -> Option<i32> {
        self.field("grpc-status")?.parse().ok()
    }

    /// `grpc-message` from the trailer frame, else from the headers.
    pub fn grpc_message(&self) -> Option<&str> {
        self.field("grpc-message")
    }

    /// The first message decoded as an `EchoResponse`; panics if none.
    pub fn echo(&self) -> EchoResponse {
        use prost::Message;
        let first = self.messages.first().expect("a response message");
        EchoResponse::decode(first.clone()).expect("an EchoResponse")
    }

    fn field(&self, name: &str) -> Option<&str> {
        let value = self.trailers.get(name).or(self.http.headers.get(name))?;
        value.to_str().ok()
    }
}

/// A grpc-web request to `path` carrying `frames` (already gRPC-framed;
/// base64-encoded here for [`WebFormat::Text`]), with grpc-web's headers.
pub fn web_request(format: WebFormat, path: &str, frames: &[u8]) -> Request<Bytes> {
    let body = match format {
        WebFormat::Proto => Bytes::copy_from_slice(frames),
        WebFormat::Text => STANDARD.encode(frames).into(),
    };
    Request::builder()
        .method("POST")
        .uri(format!("http://127.0.0.1{path}"))
        .header(CONTENT_TYPE, format.content_type())
        .header(ACCEPT, format.content_type())
        .header("x-grpc-web", "1")
        .body(body)
        .expect("a valid request")
}

/// Splits a grpc-web response body into data frames and the trailer
/// frame's fields; a `Text` body is base64-decoded first (tonic-web
/// encodes each chunk on its own, so padding may appear mid-body). Panics
/// on a malformed body.
pub fn parse_web_body(format: WebFormat, body: &[u8]) -> (Vec<Bytes>, HeaderMap) {
    let raw = match format {
        WebFormat::Proto => body.to_vec(),
        WebFormat::Text => decode_chunked_base64(body),
    };
    let (mut messages, mut trailers) = (Vec::new(), HeaderMap::new());
    let mut rest = raw.as_slice();
    while !rest.is_empty() {
        assert!(rest.len() >= 5, "a truncated frame header: {rest:?}");
        let flag = rest[0];
        let len = u32::from_be_bytes(rest[1..5].try_into().unwrap()) as usize;
        assert!(rest.len() >= 5 + len, "a truncated frame");
        let payload = &rest[5..5 + len];
        if flag & 0x80 == 0 {
            messages.push(Bytes::copy_from_slice(payload));
        } else {
            parse_trailer_fields(payload, &mut trailers);
        }
        rest = &rest[5 + len..];
    }
    (messages, trailers)
}

/// `key: value\r\n` lines, as grpc-web's trailer frame carries them.
fn parse_trailer_fields(payload: &[u8], trailers: &mut HeaderMap) {
    let text = std::str::from_utf8(payload).expect("UTF-8 trailer fields");
    for line in text.split("\r\n").filter(|l| !l.is_empty()) {
        let (name, value) = line.split_once(':').expect("a `name: value` trailer");
        trailers.append(
            HeaderName::from_bytes(name.trim().to_ascii_lowercase().as_bytes())
                .expect("a trailer name"),
            HeaderValue::from_str(value.trim()).expect("a trailer value"),
        );
    }
}

/// Decodes base64 in 4-character groups, each on its own, so that
/// separately padded segments concatenate.
fn decode_chunked_base64(text: &[u8]) -> Vec<u8> {
    assert_eq!(text.len() % 4, 0, "base64 body length not a multiple of 4");
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    for group in text.chunks(4) {
        out.extend(STANDARD.decode(group).expect("base64 body"));
    }
    out
}

/// Sends `request` (e.g. from [`web_request`]) over HTTP/1.1 to `addr` and
/// unframes the response as `format`.
pub async fn web_call(addr: SocketAddr, format: WebFormat, request: Request<Bytes>) -> WebReply {
    let http = http1(addr, request).await;
    let (messages, trailers) = parse_web_body(format, &http.body);
    WebReply {
        http,
        messages,
        trailers,
    }
}

/// A grpc-web unary echo of `message` over HTTP/1.1 to `addr`.
pub async fn web_unary(addr: SocketAddr, format: WebFormat, message: &str) -> WebReply {
    let request = web_request(format, UNARY_PATH, &echo_frame(message));
    web_call(addr, format, request).await
}
