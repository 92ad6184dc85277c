//! What the tests of `main.rs` share: building and running the Go
//! programs (`interop/channelz-go`, grpcurl), the Rust server and channel
//! they look at, the workload, and reading `channelz-go`'s JSON lines.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use base64::Engine;
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::Value;
use support::channelz::*;
use tokio::net::TcpListener;
use tokio_stream::StreamExt;
use tonic::Code;
use tonic::service::Routes;
use tonic::transport::{Channel, Server, Uri};
use tonic_hotpath::channelz::proto::channelz_client::ChannelzClient;
use tonic_hotpath::channelz::{ChannelEntry, ListenSocket, ServerEntry, proto};
use tonic_hotpath::stats::{CombinedLayer, CombinedService};
use tower::BoxError;
use tower::ServiceExt;

use support::go_interop::{go_available, go_build, go_program};
use support::{EchoClient, EchoServer};

/// The tests take turns: each walks the whole registry (see the module
/// docs).
pub static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The `channelz-go` program, built once; `None` without `go`.
pub fn channelz_go() -> Option<&'static Path> {
    static BINARY: OnceLock<Option<PathBuf>> = OnceLock::new();
    BINARY.get_or_init(|| go_program("channelz-go")).as_deref()
}

/// grpcurl v1.9.4 (`interop/grpcurl` pins it), built once; `None` without
/// `go`.
pub fn grpcurl() -> Option<&'static Path> {
    static BINARY: OnceLock<Option<PathBuf>> = OnceLock::new();
    BINARY
        .get_or_init(|| {
            go_available().then(|| {
                go_build(
                    "grpcurl",
                    "grpcurl",
                    &[
                        "-ldflags",
                        "-X main.version=v1.9.4",
                        "github.com/fullstorydev/grpcurl/cmd/grpcurl",
                    ],
                )
            })
        })
        .as_deref()
}

/// Runs `binary args..`: (exit status, stdout, stderr).
pub async fn run(binary: &Path, args: &[&str]) -> (std::process::ExitStatus, String, String) {
    let output = tokio::process::Command::new(binary)
        .args(args)
        .kill_on_drop(true)
        .output()
        .await
        .unwrap_or_else(|error| panic!("run {}: {error}", binary.display()));
    (
        output.status,
        String::from_utf8(output.stdout).expect("UTF-8 stdout"),
        String::from_utf8(output.stderr).expect("UTF-8 stderr"),
    )
}

/// Runs `channelz-go args..`, asserting it exits 0; returns its stdout.
pub async fn channelz_go_ok(binary: &Path, args: &[&str]) -> String {
    let (status, stdout, stderr) = run(binary, args).await;
    assert!(
        status.success(),
        "channelz-go {args:?} exited with {status}\nstderr:\n{stderr}\nstdout:\n{stdout}"
    );
    stdout
}

/// A Rust server under test: the scripted echo service (and, if asked,
/// `grpc.health.v1.Health`, SERVING for `""`) behind a stats layer with a
/// [`ServerEntry`], connections from the layer's incoming stream, and
/// its listening socket registered.
pub struct RustServer {
    pub addr: SocketAddr,
    pub id: i64,
    pub listen: ListenSocket,
    pub task: tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
}

pub async fn rust_server(health: bool) -> RustServer {
    let handler = ServerEntry::new();
    let id = handler.id();
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    let listen = handler.listen_socket(addr);
    let layer = CombinedLayer::server().with(handler);
    let mut routes = Routes::new(EchoServer::new(ScriptedEcho));
    if health {
        // `health_reporter()` reports `""` (the whole server) SERVING.
        let (_reporter, service) = tonic_health::server::health_reporter();
        routes = routes.add_service(service);
    }
    let task = tokio::spawn(
        Server::builder()
            .layer(layer.clone())
            .add_routes(routes)
            .serve_with_incoming(layer.incoming_tcp(listener)),
    );
    RustServer {
        addr,
        id,
        listen,
        task,
    }
}

/// A Rust client channel to a [`RustServer`]: a stats layer with a
/// [`ChannelEntry`] over a tonic `Channel` whose connections the layer's
/// connector makes, each connection's local address recorded (from the
/// socket itself, not from channelz).
pub struct RustChannel {
    pub service: CombinedService<Channel, ChannelEntry, tonic_hotpath::stats::ClientSide>,
    pub id: i64,
    pub subchannel_id: i64,
    pub local_addrs: Arc<Mutex<Vec<SocketAddr>>>,
}

impl RustChannel {
    pub async fn connect(addr: SocketAddr) -> Self {
        let endpoint = support::endpoint(addr);
        let handler = ChannelEntry::new(endpoint.uri().to_string());
        let (id, subchannel_id) = (handler.id(), handler.subchannel_id());
        let layer = CombinedLayer::client().with(handler);
        let local_addrs = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&local_addrs);
        // `CombinedLayer::connector()`'s connector, recording each
        // connection's local address.
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        let recording = tower::service_fn(move |uri: Uri| {
            let http = http.clone();
            let recorded = Arc::clone(&recorded);
            async move {
                let io = http.oneshot(uri).await?;
                let local = io.inner().local_addr()?;
                recorded.lock().unwrap().push(local);
                Ok::<_, BoxError>(io)
            }
        });
        let channel = endpoint
            .connect_with_connector(layer.connector_with(recording))
            .await
            .expect("connect");
        let service = tower::ServiceBuilder::new().layer(layer).service(channel);
        Self {
            service,
            id,
            subchannel_id,
            local_addrs,
        }
    }

    pub fn echo(
        &self,
    ) -> EchoClient<CombinedService<Channel, ChannelEntry, tonic_hotpath::stats::ClientSide>> {
        EchoClient::new(self.service.clone())
    }

    /// The local address of the channel's only connection.
    pub fn local_addr(&self) -> SocketAddr {
        let addrs = self.local_addrs.lock().unwrap();
        assert_eq!(addrs.len(), 1, "one connection: {addrs:?}");
        addrs[0]
    }
}

/// `ok` OK unary calls, `failed` failed ones (`fail`: INVALID_ARGUMENT)
/// and `streams` server-streaming calls of 3 messages.
pub async fn workload(channel: &RustChannel, ok: usize, failed: usize, streams: usize) {
    let mut echo = channel.echo();
    for _ in 0..ok {
        echo.unary_echo(request("hello")).await.expect("OK call");
    }
    for _ in 0..failed {
        let status = echo.unary_echo(request("fail")).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument);
    }
    for _ in 0..streams {
        let mut stream = echo
            .server_streaming_echo(request("a b c"))
            .await
            .expect("stream")
            .into_inner();
        let mut received = 0;
        while let Some(message) = stream.next().await {
            message.expect("message");
            received += 1;
        }
        assert_eq!(received, 3);
    }
}

/// Unary calls on `channel` one after the other until `stop`, counted in
/// `calls`.
pub fn background_load(
    channel: RustChannel,
    stop: Arc<AtomicBool>,
    calls: Arc<AtomicU64>,
) -> tokio::task::JoinHandle<RustChannel> {
    tokio::spawn(async move {
        let mut echo = channel.echo();
        while !stop.load(Ordering::Relaxed) {
            echo.unary_echo(request("background"))
                .await
                .expect("background call");
            calls.fetch_add(1, Ordering::Relaxed);
        }
        channel
    })
}

/// Stops `servers` after `channels` are dropped, and waits until all of
/// them have left channelz, so that the next test's walk does not list
/// what is going away.
pub async fn teardown(
    channelz: &mut ChannelzClient<Channel>,
    servers: Vec<RustServer>,
    channels: Vec<RustChannel>,
) {
    let channel_ids: Vec<i64> = channels.iter().map(|channel| channel.id).collect();
    drop(channels);
    let mut server_ids = Vec::new();
    for server in servers {
        server_ids.push(server.id);
        server.task.abort();
        drop(server.listen);
    }
    for id in server_ids {
        let gone = eventually(&true, || {
            let mut channelz = channelz.clone();
            async move {
                channelz
                    .get_server(proto::GetServerRequest { server_id: id })
                    .await
                    .is_err_and(|status| status.code() == Code::NotFound)
            }
        })
        .await;
        if !gone {
            let server = channelz
                .get_server(proto::GetServerRequest { server_id: id })
                .await;
            let sockets = channelz
                .get_server_sockets(proto::GetServerSocketsRequest {
                    server_id: id,
                    start_socket_id: 0,
                    max_results: 0,
                })
                .await;
            panic!("server {id} did not leave channelz: {server:?} {sockets:?}");
        }
    }
    for id in channel_ids {
        let gone = eventually(&true, || {
            let mut channelz = channelz.clone();
            async move {
                channelz
                    .get_channel(proto::GetChannelRequest { channel_id: id })
                    .await
                    .is_err_and(|status| status.code() == Code::NotFound)
            }
        })
        .await;
        assert!(gone, "channel {id} left channelz");
    }
}

/// The JSON lines of `channelz-go query`.
pub fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|error| panic!("{error}: {line}")))
        .collect()
}

/// The integer at the dotted `path` of `value`: protojson writes int64s
/// as strings, other integers as numbers, and leaves zeros out.
pub fn int(value: &Value, path: &str) -> i64 {
    let mut at = value;
    for key in path.split('.') {
        match at.get(key) {
            Some(next) => at = next,
            None => return 0,
        }
    }
    match at {
        Value::String(text) => text
            .parse()
            .unwrap_or_else(|error| panic!("{path} = {text:?}: {error}")),
        Value::Number(number) => number
            .as_i64()
            .unwrap_or_else(|| panic!("{path} = {number}")),
        other => panic!("{path} is not an integer: {other}"),
    }
}

/// The lines of `kind` whose integer at `path` is `id`.
pub fn lines_of<'a>(lines: &'a [Value], kind: &str, path: &str, id: i64) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|line| line["kind"] == kind && int(line, path) == id)
        .collect()
}

/// The only line of `kind` whose integer at `path` is `id`.
pub fn line_of<'a>(lines: &'a [Value], kind: &str, path: &str, id: i64) -> &'a Value {
    match lines_of(lines, kind, path, id).as_slice() {
        [line] => line,
        found => panic!("want one {kind} line with {path} = {id}, got {found:?}"),
    }
}

/// A protojson `Address`'s IPv4 address and port.
pub fn json_addr(address: &Value) -> SocketAddr {
    let tcp = &address["tcpip_address"];
    let ip = base64::engine::general_purpose::STANDARD
        .decode(tcp["ip_address"].as_str().expect("ip_address"))
        .expect("base64 ip_address");
    let ip = <[u8; 4]>::try_from(ip.as_slice()).expect("an IPv4 address");
    let port = u16::try_from(int(tcp, "port")).expect("a port");
    SocketAddr::from((ip, port))
}

/// A socket's (streams started, succeeded, failed, messages sent,
/// received), from its protojson.
pub fn json_socket_counts(socket: &Value) -> [i64; 5] {
    [
        "streams_started",
        "streams_succeeded",
        "streams_failed",
        "messages_sent",
        "messages_received",
    ]
    .map(|field| int(&socket["data"], field))
}

pub fn json_calls(data: &Value) -> (i64, i64, i64) {
    (
        int(data, "calls_started"),
        int(data, "calls_succeeded"),
        int(data, "calls_failed"),
    )
}
