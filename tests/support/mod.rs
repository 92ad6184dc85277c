//! Shared test and bench support: a small gRPC echo service.
//!
//! The generated code in `echo_pb.rs` is checked in (regenerate it with
//! `cargo run` in `tools/regen-echo`, which uses a vendored protoc), so
//! neither users nor CI need protoc, and the library gains no build script.
//!
//! Include it from a part's test binary with
//! `#[path = "../support/mod.rs"] mod support;`, and from a bench with
//! `#[path = "../tests/support/mod.rs"] mod support;`. The quickstart
//! example keeps its own copy of the generated unary part
//! (`examples/quickstart/echo_pb.rs`), so a user can copy it alone.
#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::pin::Pin;

use tokio_stream::{Stream, StreamExt};
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Response, Status, Streaming};

/// The generated messages, client and server of `echo.proto`.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod pb {
    include!("echo_pb.rs");
}

pub use pb::echo_client::EchoClient;
pub use pb::echo_server::{Echo, EchoServer};
pub use pb::{EchoRequest, EchoResponse};

/// A boxed response stream, as the server-streaming and bidi methods return.
pub type ResponseStream = Pin<Box<dyn Stream<Item = Result<EchoResponse, Status>> + Send>>;

/// Binds `127.0.0.1:0` and returns the bound address and the incoming
/// connection stream to hand to `Server::serve_with_incoming`.
///
/// Accepted connections get `TCP_NODELAY`: `serve_with_incoming` ignores the
/// builder's `tcp_nodelay`, and without it Nagle's algorithm plus delayed
/// ACKs stall small HTTP/2 writes by about 40 ms.
pub async fn bind() -> (SocketAddr, TcpIncoming) {
    let incoming = TcpIncoming::bind("127.0.0.1:0".parse().expect("loopback address"))
        .expect("bind 127.0.0.1:0")
        .with_nodelay(Some(true));
    let addr = incoming.local_addr().expect("local addr");
    (addr, incoming)
}

/// An endpoint for `addr` (plain HTTP/2 over TCP).
pub fn endpoint(addr: SocketAddr) -> Endpoint {
    Endpoint::from_shared(format!("http://{addr}")).expect("valid endpoint uri")
}

/// Connects a `Channel` to `addr`.
pub async fn connect(addr: SocketAddr) -> Channel {
    endpoint(addr)
        .connect()
        .await
        .expect("connect to test server")
}

/// How long a test waits for what the protocol promises before it fails.
/// Generous on purpose: a busy 2-core machine can stall a task for
/// seconds, and a wait whose condition is met returns at once, so only a
/// real failure pays it.
pub const PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// The instant [`PATIENCE`] from now: polling loops run
/// `while Instant::now() < deadline`.
pub fn deadline() -> std::time::Instant {
    std::time::Instant::now() + PATIENCE
}

/// Waits (up to [`PATIENCE`]) for `done`, checking every 5 ms; panics
/// naming `what` on timeout.
pub async fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = deadline();
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out after {PATIENCE:?} waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

/// Starts the plain [`EchoService`] with no layers and returns its address.
pub async fn spawn_echo() -> SocketAddr {
    let (addr, incoming) = bind().await;
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(EchoServer::new(EchoService))
            .serve_with_incoming(incoming),
    );
    addr
}

/// The plain echo service:
/// - unary: returns the request's message;
/// - server streaming: one response per whitespace-separated word;
/// - client streaming: the messages joined with a single space;
/// - bidi: one response per request, same message.
#[derive(Debug, Clone, Copy, Default)]
pub struct EchoService;

#[tonic::async_trait]
impl Echo for EchoService {
    async fn unary_echo(
        &self,
        request: Request<EchoRequest>,
    ) -> Result<Response<EchoResponse>, Status> {
        Ok(Response::new(EchoResponse {
            message: request.into_inner().message,
        }))
    }

    type ServerStreamingEchoStream = ResponseStream;

    async fn server_streaming_echo(
        &self,
        request: Request<EchoRequest>,
    ) -> Result<Response<Self::ServerStreamingEchoStream>, Status> {
        let words: Vec<Result<EchoResponse, Status>> = request
            .into_inner()
            .message
            .split_whitespace()
            .map(|word| {
                Ok(EchoResponse {
                    message: word.to_owned(),
                })
            })
            .collect();
        Ok(Response::new(Box::pin(tokio_stream::iter(words))))
    }

    async fn client_streaming_echo(
        &self,
        request: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<EchoResponse>, Status> {
        let mut stream = request.into_inner();
        let mut words = Vec::new();
        while let Some(message) = stream.next().await {
            words.push(message?.message);
        }
        Ok(Response::new(EchoResponse {
            message: words.join(" "),
        }))
    }

    type BidirectionalStreamingEchoStream = ResponseStream;

    async fn bidirectional_streaming_echo(
        &self,
        request: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<Self::BidirectionalStreamingEchoStream>, Status> {
        let stream = request
            .into_inner()
            .map(|message| message.map(|m| EchoResponse { message: m.message }));
        Ok(Response::new(Box::pin(stream)))
    }
}

/// A unary-only echo handler: implement this and serve
/// `EchoServer::new(UnaryOnly(handler))`; the streaming methods answer
/// `UNIMPLEMENTED`.
#[tonic::async_trait]
pub trait UnaryHandler: Send + Sync + 'static {
    /// Handles one unary call.
    async fn unary(&self, request: Request<EchoRequest>) -> Result<Response<EchoResponse>, Status>;
}

#[tonic::async_trait]
impl<H: UnaryHandler> UnaryHandler for std::sync::Arc<H> {
    async fn unary(&self, request: Request<EchoRequest>) -> Result<Response<EchoResponse>, Status> {
        (**self).unary(request).await
    }
}

/// Serves a [`UnaryHandler`] as the whole [`Echo`] service.
#[derive(Debug, Clone, Copy, Default)]
pub struct UnaryOnly<H>(pub H);

#[tonic::async_trait]
impl<H: UnaryHandler> Echo for UnaryOnly<H> {
    async fn unary_echo(
        &self,
        request: Request<EchoRequest>,
    ) -> Result<Response<EchoResponse>, Status> {
        self.0.unary(request).await
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
