//! A tonic echo server scripted as grpc-go's `TestRetryStreaming` scripts
//! its stub server: one list of operations that successive calls work
//! through, each call running operations until one ends it.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;

use support::{EchoOverride, EchoRequest, EchoResponse, EchoServer, ResponseStream};
use tokio::sync::{Mutex, mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataValue;
use tonic::{Code, Request, Response, Status, Streaming};

/// One server operation (grpc-go's `sReq`, `sAttempts`, ...).
#[derive(Debug, Clone)]
pub enum ServerOp {
    /// Receive a message; it must be this one.
    Req(String),
    /// The call's `grpc-previous-rpc-attempts` must be this.
    Attempts(u32),
    /// Send response headers.
    Hdr,
    /// Send a message.
    Res(String),
    /// Set a `grpc-retry-pushback-ms` trailer value (one more value).
    Pushback(&'static str),
    /// The client half-closed: the next receive is the end.
    CloseSend,
    /// End the call with this code.
    Err(Code),
}

/// The script and the calls' record.
#[derive(Debug, Default)]
pub struct Script {
    ops: Mutex<VecDeque<ServerOp>>,
    /// Every call's `grpc-previous-rpc-attempts` (`None`: absent), in order.
    pub attempts_seen: std::sync::Mutex<Vec<Option<String>>>,
}

impl Script {
    /// Replaces the operations left.
    pub async fn set(&self, ops: Vec<ServerOp>) {
        *self.ops.lock().await = ops.into();
    }

    /// The operations not run yet.
    pub async fn left(&self) -> usize {
        self.ops.lock().await.len()
    }
}

/// Serves `script` on 127.0.0.1 (the bidi echo method).
pub async fn serve(script: Arc<Script>) -> SocketAddr {
    let (addr, incoming) = support::bind().await;
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(EchoServer::new(Scripted(script)))
            .serve_with_incoming(incoming),
    );
    addr
}

struct Scripted(Arc<Script>);

/// How a call's start ends: an error before any header (trailers-only),
/// or response headers and a stream.
enum Start {
    Error(Status),
    Headers,
}

#[tonic::async_trait]
impl EchoOverride for Scripted {
    async fn bidi(
        &self,
        request: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<ResponseStream>, Status> {
        let previous = request
            .metadata()
            .get("grpc-previous-rpc-attempts")
            .map(|value| value.to_str().unwrap_or("?").to_owned());
        self.0.attempts_seen.lock().unwrap().push(previous.clone());
        let mut incoming = request.into_inner();
        let (start_tx, start_rx) = oneshot::channel();
        let (out_tx, out_rx) = mpsc::channel::<Result<EchoResponse, Status>>(16);
        let script = Arc::clone(&self.0);
        tokio::spawn(async move {
            let mut ops = script.ops.lock().await;
            let mut start = Some(start_tx);
            let mut pushback = Vec::new();
            let fail =
                |status: Status, start: &mut Option<oneshot::Sender<Start>>| match start.take() {
                    Some(start) => {
                        let _ = start.send(Start::Error(status));
                        None
                    }
                    None => Some(status),
                };
            while let Some(op) = ops.pop_front() {
                let failure = match op {
                    ServerOp::Req(want) => match incoming.message().await {
                        Ok(Some(got)) if got.message == want => None,
                        other => Some(Status::internal(format!(
                            "server: got {other:?}, want {want}"
                        ))),
                    },
                    ServerOp::Attempts(want) => (previous.as_deref() != Some(&*want.to_string()))
                        .then(|| {
                            Status::internal(format!("server: attempts {previous:?}, want {want}"))
                        }),
                    ServerOp::CloseSend => match incoming.message().await {
                        Ok(None) => None,
                        other => Some(Status::internal(format!(
                            "server: got {other:?}, want the end"
                        ))),
                    },
                    ServerOp::Hdr | ServerOp::Res(_) => {
                        if let Some(start) = start.take() {
                            let _ = start.send(Start::Headers);
                        }
                        if let ServerOp::Res(message) = op {
                            let _ = out_tx.send(Ok(EchoResponse { message })).await;
                        }
                        None
                    }
                    ServerOp::Pushback(value) => {
                        pushback.push(value);
                        None
                    }
                    ServerOp::Err(code) => {
                        let mut status = Status::new(code, "this is a test error");
                        for value in &pushback {
                            status.metadata_mut().append(
                                "grpc-retry-pushback-ms",
                                MetadataValue::from_static(value),
                            );
                        }
                        Some(status)
                    }
                };
                if let Some(status) = failure {
                    if let Some(status) = fail(status, &mut start) {
                        let _ = out_tx.send(Err(status)).await;
                    }
                    return;
                }
            }
            // The script ran out: the call ends OK.
            if let Some(start) = start.take() {
                let _ = start.send(Start::Headers);
            }
        });
        match start_rx.await {
            Ok(Start::Error(status)) => Err(status),
            Ok(Start::Headers) | Err(_) => Ok(Response::new(Box::pin(ReceiverStream::new(out_rx)))),
        }
    }
}
