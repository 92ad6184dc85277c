//! The grpc-go tenant client (`interop/tenant-go`) against tonic servers
//! with a tenant limit layer: servers of the health service that record
//! every attempt they see, and the client's report of each call.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tonic_hotpath::limits::LimitError;
use tower::ServiceBuilder;

use crate::stacks::ServerLayer;

/// One attempt a server saw: when it arrived, which server, and the
/// pushback (ms) its answer carried (`None`: admitted).
#[derive(Debug, Clone, Copy)]
pub struct Attempt {
    pub arrived: Instant,
    pub server: usize,
    pub pushback_ms: Option<u64>,
}

/// The attempts every server saw, in the order their answers left (the
/// client calls one at a time, so that is the order they were made).
#[derive(Debug, Default, Clone)]
pub struct Attempts(Arc<Mutex<Vec<Attempt>>>);

impl Attempts {
    pub fn seen(&self) -> Vec<Attempt> {
        self.0.lock().expect("lock").clone()
    }
}

/// Serves the health service behind `layer` (a tenant limit layer, or an
/// adaptive one) on 127.0.0.1 as server number `server`, recording each
/// attempt into `attempts` (outside the limit layer, so refused attempts
/// too).
pub async fn serve_health<L>(layer: L, server: usize, attempts: &Attempts) -> SocketAddr
where
    L: ServerLayer<tonic::service::Routes>,
{
    let log = Arc::clone(&attempts.0);
    let stack = ServiceBuilder::new()
        .layer(tower::layer::layer_fn(move |inner| Recorded {
            inner,
            log: Arc::clone(&log),
            server,
        }))
        .layer(layer)
        .into_inner();
    // TCP_NODELAY (crate::bind): without it, Nagle's algorithm and
    // delayed ACKs hold a refusal back by about 40 ms.
    let (addr, incoming) = crate::bind().await;
    let (_reporter, health) = tonic_health::server::health_reporter();
    tokio::spawn(
        tonic::transport::Server::builder()
            .layer(stack)
            .add_service(health)
            .serve_with_incoming(incoming),
    );
    addr
}

/// Records each attempt's arrival and its answer's pushback.
#[derive(Clone)]
struct Recorded<S> {
    inner: S,
    log: Arc<Mutex<Vec<Attempt>>>,
    server: usize,
}

impl<S, B> tower::Service<http::Request<tonic::body::Body>> for Recorded<S>
where
    S: tower::Service<http::Request<tonic::body::Body>, Response = http::Response<B>>,
    S::Future: Send + 'static,
    S::Error: 'static,
    B: 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future =
        std::pin::Pin<Box<dyn std::future::Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let arrived = Instant::now();
        let log = Arc::clone(&self.log);
        let server = self.server;
        let answer = self.inner.call(request);
        Box::pin(async move {
            let response = answer.await?;
            let pushback_ms = response
                .headers()
                .get(LimitError::RETRY_PUSHBACK_MS)
                .map(|value| value.to_str().unwrap().parse().unwrap());
            log.lock().expect("lock").push(Attempt {
                arrived,
                server,
                pushback_ms,
            });
            Ok(response)
        })
    }
}

/// One call as the Go client saw it: (code, message, milliseconds).
pub fn calls(stdout: &str) -> Vec<(String, String, f64)> {
    stdout
        .lines()
        .filter(|line| line.starts_with('{'))
        .map(|line| {
            let json: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
            (
                json["code"].as_str().expect("code").to_owned(),
                json["message"].as_str().expect("message").to_owned(),
                json["ms"].as_f64().expect("ms"),
            )
        })
        .collect()
}

/// Runs the Go client: `calls` health checks for `org`, one after the
/// other, round-robin over `addrs`; with `attempts`, a retry policy of
/// that many attempts for RESOURCE_EXHAUSTED (its backoff 10 s).
pub async fn go_client(
    binary: &Path,
    addrs: &[SocketAddr],
    org: &str,
    calls: u32,
    attempts: Option<u32>,
) -> String {
    go_client_settled(binary, addrs, org, calls, attempts, None).await
}

/// [`go_client`], waiting first for the channel to be ready and then
/// `settle` more (`-settle`), so that every replica's connection is up
/// before the first call (grpc-go's round robin skips replicas still
/// connecting).
pub async fn go_client_settled(
    binary: &Path,
    addrs: &[SocketAddr],
    org: &str,
    calls: u32,
    attempts: Option<u32>,
    settle: Option<std::time::Duration>,
) -> String {
    let addrs: Vec<String> = addrs.iter().map(ToString::to_string).collect();
    let output = tokio::process::Command::new(binary)
        .arg(format!("-addr={}", addrs.join(",")))
        .arg(format!("-org={org}"))
        .arg(format!("-calls={calls}"))
        .arg(format!("-retry={}", attempts.is_some()))
        .arg(format!("-attempts={}", attempts.unwrap_or(3)))
        .arg(format!(
            "-settle={}ms",
            settle.map_or(0, |settle| settle.as_millis())
        ))
        .output()
        .await
        .expect("run the Go client");
    assert!(
        output.status.success(),
        "the Go client failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8 output")
}
