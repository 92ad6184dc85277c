//! The echo service of `echo.proto` (generated code checked in:
//! regenerate it with `cargo run` in `tools/regen-echo`, which uses a
//! vendored protoc, so neither users nor CI need protoc), the plain
//! [`EchoService`], and [`EchoOverride`]: the one way a test serves an
//! echo that differs in some methods, the others forwarding to
//! [`EchoService`].
//!
//! The quickstart example keeps its own copy of the generated unary part
//! (`examples/quickstart/echo_pb.rs`), so a user can copy it alone.

use std::pin::Pin;
use std::sync::Arc;

use tokio_stream::{Stream, StreamExt};
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

/// An echo service that differs from [`EchoService`] in some methods:
/// implement the ones a test changes (a script keyed on the message, a
/// record of what arrived, a wait); every other method answers as
/// [`EchoService`] does. Every implementor is an [`Echo`], served as it is
/// (`EchoServer::new(MyEcho)`); an overriding method may call
/// [`EchoService`]'s own after doing its part.
///
/// A test whose service answers every method its own way (the metadata
/// echo, the tenant echo) implements [`Echo`] directly.
#[tonic::async_trait]
pub trait EchoOverride: Send + Sync + 'static {
    /// The unary method; [`EchoService`]'s by default.
    async fn unary(&self, request: Request<EchoRequest>) -> Result<Response<EchoResponse>, Status> {
        EchoService.unary_echo(request).await
    }

    /// The server-streaming method; [`EchoService`]'s by default.
    async fn server_streaming(
        &self,
        request: Request<EchoRequest>,
    ) -> Result<Response<ResponseStream>, Status> {
        EchoService.server_streaming_echo(request).await
    }

    /// The client-streaming method; [`EchoService`]'s by default.
    async fn client_streaming(
        &self,
        request: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<EchoResponse>, Status> {
        EchoService.client_streaming_echo(request).await
    }

    /// The bidirectional method; [`EchoService`]'s by default.
    async fn bidi(
        &self,
        request: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<ResponseStream>, Status> {
        EchoService.bidirectional_streaming_echo(request).await
    }
}

/// A shared override (a test keeps a handle on its state).
#[tonic::async_trait]
impl<E: EchoOverride> EchoOverride for Arc<E> {
    async fn unary(&self, request: Request<EchoRequest>) -> Result<Response<EchoResponse>, Status> {
        (**self).unary(request).await
    }

    async fn server_streaming(
        &self,
        request: Request<EchoRequest>,
    ) -> Result<Response<ResponseStream>, Status> {
        (**self).server_streaming(request).await
    }

    async fn client_streaming(
        &self,
        request: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<EchoResponse>, Status> {
        (**self).client_streaming(request).await
    }

    async fn bidi(
        &self,
        request: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<ResponseStream>, Status> {
        (**self).bidi(request).await
    }
}

#[tonic::async_trait]
impl<E: EchoOverride> Echo for E {
    async fn unary_echo(
        &self,
        request: Request<EchoRequest>,
    ) -> Result<Response<EchoResponse>, Status> {
        self.unary(request).await
    }

    type ServerStreamingEchoStream = ResponseStream;

    async fn server_streaming_echo(
        &self,
        request: Request<EchoRequest>,
    ) -> Result<Response<ResponseStream>, Status> {
        self.server_streaming(request).await
    }

    async fn client_streaming_echo(
        &self,
        request: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<EchoResponse>, Status> {
        self.client_streaming(request).await
    }

    type BidirectionalStreamingEchoStream = ResponseStream;

    async fn bidirectional_streaming_echo(
        &self,
        request: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<ResponseStream>, Status> {
        self.bidi(request).await
    }
}
