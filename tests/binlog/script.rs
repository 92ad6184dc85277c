//! The script of calls of `interop/binlog-go` (its README), between a
//! tonic server and a tonic client, each behind a `CombinedLayer` with
//! the crate's `BinaryLog`: the same calls, metadata, messages and
//! statuses as grpc-go's run, so the two logs can be compared entry by
//! entry.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use tokio_stream::{Stream, StreamExt};
use tonic::codec::CompressionEncoding;
use tonic::metadata::MetadataValue;
use tonic::transport::{Channel, Server};
use tonic::{Code, Request, Response, Status, Streaming};
use tower::ServiceBuilder;

use support::{EchoClient, EchoOverride, EchoRequest, EchoResponse, EchoServer};
use tonic_hotpath::binlog::BinaryLog;
use tonic_hotpath::stats::{Combined, CombinedLayer, CombinedService, RpcEvent, StatsHandler};

/// Call 2's `grpc-status-details-bin`: a `google.rpc.Status` (code 3, "bad
/// request", one `Any` holding `EchoResponse{"detail"}`), 74 bytes.
pub const DETAILS_HEX: &str = "0803120b62616420726571756573741a390a2d747970652e676f6f676c65617069732e636f6d2f686f74706174682e6563686f2e4563686f526573706f6e736512080a0664657461696c";

/// Call 7's text: "compressed" 50 times.
pub fn compressed_text() -> String {
    "compressed".repeat(50)
}

pub fn details() -> Bytes {
    (0..DETAILS_HEX.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&DETAILS_HEX[i..i + 2], 16).unwrap())
        .collect::<Vec<u8>>()
        .into()
}

/// Counts the RPCs that ended on a layer, to wait for a call's last entry.
#[derive(Debug, Default)]
pub struct Ends(AtomicU64);

impl StatsHandler for Ends {
    type RpcState = ();
    type ConnState = ();
    const PAYLOAD_TIMES: bool = false;

    fn handle_rpc(&self, _: &mut (), event: &RpcEvent<'_>) {
        if let RpcEvent::End(_) = event {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl Ends {
    pub fn count(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

type ResponseStream = Pin<Box<dyn Stream<Item = Result<EchoResponse, Status>> + Send>>;

/// The script's echo service (see the README of `interop/binlog-go`).
#[derive(Debug, Default, Clone, Copy)]
pub struct ScriptEcho;

fn served_by<T>(message: T) -> Response<T> {
    let mut response = Response::new(message);
    response
        .metadata_mut()
        .insert("x-served-by", MetadataValue::from_static("echo"));
    response
}

#[tonic::async_trait]
impl EchoOverride for ScriptEcho {
    async fn unary(&self, request: Request<EchoRequest>) -> Result<Response<EchoResponse>, Status> {
        let message = request.into_inner().message;
        match message.as_str() {
            "fail" => Err(Status::with_details(
                Code::InvalidArgument,
                "bad request",
                details(),
            )),
            "sleep" => std::future::pending().await,
            _ => Ok(served_by(EchoResponse { message })),
        }
    }

    async fn server_streaming(
        &self,
        request: Request<EchoRequest>,
    ) -> Result<Response<ResponseStream>, Status> {
        let stream = every_20_ms(request.into_inner().message);
        Ok(served_by(Box::pin(stream) as ResponseStream))
    }

    async fn bidi(
        &self,
        request: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<ResponseStream>, Status> {
        let stream = request
            .into_inner()
            .map(|message| message.map(|m| EchoResponse { message: m.message }));
        Ok(served_by(Box::pin(stream) as ResponseStream))
    }
}

/// "stream 0" at once, then "stream 1", ... every 20 ms, forever.
///
/// A tick missed on a loaded machine is delayed, not caught up: with
/// tokio's default (burst), a response stream first polled more than
/// 20 ms after the handler made it yields two messages at once, tonic's
/// encoder sends them in one DATA frame, and the client's layer sees the
/// second cross it although call 3's reader took only the first (grpc-go
/// logs what `RecvMsg` returns). As grpc-go's handler, it never sends two
/// messages together.
fn every_20_ms(prefix: String) -> impl Stream<Item = Result<EchoResponse, Status>> + Send {
    let mut interval = tokio::time::interval(Duration::from_millis(20));
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let ticks = tokio_stream::wrappers::IntervalStream::new(interval);
    let mut sent = 0;
    ticks.map(move |_| {
        let message = format!("{prefix} {sent}");
        sent += 1;
        Ok(EchoResponse { message })
    })
}

/// A tonic server of [`ScriptEcho`] (accepting and sending gzip) behind
/// `log` and an end counter; its address.
pub async fn serve(log: &BinaryLog, ends: &Arc<Ends>, echo: ScriptEcho) -> SocketAddr {
    let (addr, incoming) = support::bind().await;
    let layer = CombinedLayer::server()
        .with(log.clone())
        .with(Arc::clone(ends));
    let service = EchoServer::new(echo)
        .accept_compressed(CompressionEncoding::Gzip)
        .send_compressed(CompressionEncoding::Gzip);
    tokio::spawn(
        Server::builder()
            .layer(layer.clone())
            .add_service(service)
            .serve_with_incoming(layer.incoming(incoming)),
    );
    addr
}

type Layered =
    CombinedService<Channel, Combined<BinaryLog, Arc<Ends>>, tonic_hotpath::stats::ClientSide>;

/// A tonic client of `addr` behind `log` (its channel made by the layer's
/// connector, so the server's address is known) and an end counter.
pub async fn client(addr: SocketAddr, log: &BinaryLog, ends: &Arc<Ends>) -> Layered {
    let layer = CombinedLayer::client()
        .with(log.clone())
        .with(Arc::clone(ends));
    let channel = support::endpoint(addr)
        .connect_with_connector(layer.connector())
        .await
        .expect("connect");
    ServiceBuilder::new().layer(layer).service(channel)
}

fn request<T>(message: T) -> Request<T> {
    let mut request = Request::new(message);
    let metadata = request.metadata_mut();
    metadata.insert("x-user", MetadataValue::from_static("alice"));
    metadata.insert_bin("x-blob-bin", MetadataValue::from_bytes(&[0, 1, 2]));
    request
}

fn echo(message: &str) -> EchoRequest {
    EchoRequest {
        message: message.to_owned(),
    }
}

/// A server and a client of the script, both logging to one log (as
/// grpc-go's run logs both to one sink).
pub struct Script {
    pub addr: SocketAddr,
    layered: Layered,
    client: EchoClient<Layered>,
    client_ends: Arc<Ends>,
    server_ends: Arc<Ends>,
}

impl Script {
    pub async fn start(log: &BinaryLog) -> Self {
        let server_ends = Arc::new(Ends::default());
        let addr = serve(log, &server_ends, ScriptEcho).await;
        let client_ends = Arc::new(Ends::default());
        let layered = client(addr, log, &client_ends).await;
        Self {
            addr,
            client: EchoClient::new(layered.clone()),
            layered,
            client_ends,
            server_ends,
        }
    }

    /// Waits until call `n` (from 1) has ended on both sides.
    async fn ended(&self, n: u64) {
        support::wait_until("the call's end on both sides", || {
            self.client_ends.count() >= n && self.server_ends.count() >= n
        })
        .await;
    }

    /// Runs the script: eight calls, one after the other, each over once
    /// both sides' layers have ended it (so all its entries are logged).
    pub async fn run(&mut self) {
        // 1. Unary OK.
        let reply = self
            .client
            .unary_echo(request(echo("hello")))
            .await
            .unwrap();
        assert_eq!(reply.into_inner().message, "hello");
        self.ended(1).await;
        // 2. Unary error with details.
        let status = self
            .client
            .unary_echo(request(echo("fail")))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument);
        self.ended(2).await;
        // 3. Server streaming: read one message, then cancel.
        let mut stream = self
            .client
            .server_streaming_echo(request(echo("stream")))
            .await
            .unwrap()
            .into_inner();
        let first = stream.message().await.unwrap().unwrap();
        assert_eq!(first.message, "stream 0");
        drop(stream);
        self.ended(3).await;
        // 4. A 100 ms deadline passes.
        let mut sleep = request(echo("sleep"));
        sleep.set_timeout(Duration::from_millis(100));
        let status = self.client.unary_echo(sleep).await.unwrap_err();
        assert!(
            matches!(status.code(), Code::Cancelled | Code::DeadlineExceeded),
            "{status:?}"
        );
        self.ended(4).await;
        // 5. Bidi: two messages, half-close, read to the end.
        let replies: Vec<_> = self
            .client
            .bidirectional_streaming_echo(request(tokio_stream::iter([echo("a"), echo("b")])))
            .await
            .unwrap()
            .into_inner()
            .collect()
            .await;
        assert_eq!(replies.len(), 2);
        self.ended(5).await;
        // 6. A method the server does not have.
        let status = unknown_method(self.layered.clone()).await;
        assert_eq!(status.code(), Code::Unimplemented);
        self.ended(6).await;
        // 7. Compressed both ways.
        let mut compressing = self
            .client
            .clone()
            .send_compressed(CompressionEncoding::Gzip)
            .accept_compressed(CompressionEncoding::Gzip);
        let reply = compressing
            .unary_echo(request(echo(&compressed_text())))
            .await
            .unwrap();
        assert_eq!(reply.into_inner().message, compressed_text());
        self.ended(7).await;
        // 8. Server streaming until a 100 ms deadline ends the call.
        self.watch_until_the_deadline().await;
        self.ended(8).await;
    }

    /// Call 8: ServerStreamingEcho "watch" with a 100 ms deadline, read
    /// until the deadline, then dropped.
    ///
    /// tonic's client sends the deadline (`grpc-timeout`) but does not
    /// enforce it, and tonic's server bounds a handler's answer, not the
    /// response stream that follows: the application ends the call, as
    /// grpc-go's context does. Its timer is armed once the first message
    /// ("watch 0", sent at once) is read, so the drop comes after the
    /// deadline the layer read from `grpc-timeout` when the call went
    /// out, however slow the machine: the call ends `DEADLINE_EXCEEDED`,
    /// grpc-go's case of a stream its deadline ended (a drop before the
    /// deadline is a plain cancel).
    async fn watch_until_the_deadline(&mut self) {
        let mut watch = request(echo("watch"));
        watch.set_timeout(Duration::from_millis(100));
        let mut stream = self
            .client
            .server_streaming_echo(watch)
            .await
            .unwrap()
            .into_inner();
        let first = stream.message().await.unwrap().unwrap();
        assert_eq!(first.message, "watch 0");
        let deadline = tokio::time::Instant::now() + Duration::from_millis(100);
        let read = async {
            for n in 1.. {
                let message = stream.message().await.unwrap().expect("a stream");
                assert_eq!(message.message, format!("watch {n}"));
            }
        };
        let ended = tokio::time::timeout_at(deadline, read).await;
        assert!(ended.is_err(), "the stream outlives its deadline");
        drop(stream);
    }
}

/// `/hotpath.echo.Echo/Nope`, unary, request "x".
async fn unknown_method(layered: Layered) -> Status {
    let mut grpc = tonic::client::Grpc::new(layered);
    grpc.ready().await.unwrap();
    let path = http::uri::PathAndQuery::from_static("/hotpath.echo.Echo/Nope");
    let codec = tonic_prost::ProstCodec::<EchoRequest, EchoResponse>::default();
    grpc.unary(request(echo("x")), path, codec)
        .await
        .unwrap_err()
}
