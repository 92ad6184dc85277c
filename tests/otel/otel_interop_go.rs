//! Cross-language trace propagation with grpc-go's own OpenTelemetry
//! tracing (`google.golang.org/grpc/stats/opentelemetry`, gRFC A72): the Go
//! program in `interop/otel-go` is built with `go build` and run as a
//! client of a tonic server and as a server for a tonic client, with the
//! `grpc-trace-bin` propagator and with W3C `traceparent`. In each case the
//! spans of both sides must form one trace, with the server span a child of
//! the client's attempt span.
//!
//! Needs `go` on PATH (and the Go module proxy, or a warm module cache, for
//! the first build); without `go` the test is skipped with a notice (`support::skip`), or fails when `CI` is set.

use support::go_interop;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use opentelemetry::context::FutureExt as _;
use opentelemetry::trace::{SpanKind, TraceContextExt, Tracer, TracerProvider};
use opentelemetry::{Context, SpanId, TraceId};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracer, SdkTracerProvider, SpanData};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;
use tonic_hotpath::otel::{GrpcTraceBinPropagator, OtelTracing};
use tonic_hotpath::stats::CombinedLayer;

const METHOD: &str = "grpc.health.v1.Health.Check";
/// How long any one step of the Go side may take.
const STEP: Duration = Duration::from_secs(60);

/// The propagators, by the name the Go program takes.
const PROPAGATORS: [&str; 2] = ["grpc-trace-bin", "w3c"];

fn handler(provider: &SdkTracerProvider, propagator: &str) -> OtelTracing<SdkTracer> {
    match propagator {
        "w3c" => OtelTracing::new(provider, TraceContextPropagator::new()),
        _ => OtelTracing::new(provider, GrpcTraceBinPropagator::new()),
    }
}

/// One span the Go program printed.
#[derive(Debug, Clone)]
struct GoSpan {
    name: String,
    kind: String,
    trace_id: String,
    span_id: String,
    parent_span_id: String,
    status: String,
}

/// The string value of `key` in one of the Go program's JSON lines (its
/// values are hex ids, names and kinds: no escapes).
fn field(line: &str, key: &str) -> String {
    let pattern = format!("\"{key}\":\"");
    let start = line
        .find(&pattern)
        .unwrap_or_else(|| panic!("no {key} in {line}"))
        + pattern.len();
    let len = line[start..]
        .find('"')
        .unwrap_or_else(|| panic!("unterminated {key} in {line}"));
    line[start..start + len].to_owned()
}

fn go_spans(stdout: &str) -> Vec<GoSpan> {
    stdout
        .lines()
        .filter(|line| line.starts_with('{'))
        .map(|line| GoSpan {
            name: field(line, "name"),
            kind: field(line, "kind"),
            trace_id: field(line, "trace_id"),
            span_id: field(line, "span_id"),
            parent_span_id: field(line, "parent_span_id"),
            status: field(line, "status"),
        })
        .collect()
}

fn go_span<'a>(spans: &'a [GoSpan], name: &str) -> &'a GoSpan {
    spans
        .iter()
        .find(|span| span.name == name)
        .unwrap_or_else(|| panic!("Go printed no span {name}: {spans:#?}"))
}

fn hex_trace(id: TraceId) -> String {
    format!("{id}")
}

fn hex_span(id: SpanId) -> String {
    format!("{id}")
}

fn provider() -> (SdkTracerProvider, InMemorySpanExporter) {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    (provider, exporter)
}

fn rust_span(spans: &[SpanData], name: &str) -> SpanData {
    spans
        .iter()
        .find(|span| span.name == name)
        .unwrap_or_else(|| panic!("no Rust span {name}: {spans:#?}"))
        .clone()
}

/// grpc-go client → tonic server.
async fn go_client_to_tonic_server(binary: &Path, propagator: &str) {
    let (provider, exporter) = provider();
    let layer = CombinedLayer::server().with(handler(&provider, propagator));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (_reporter, health) = tonic_health::server::health_reporter();
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .layer(layer.clone())
            .add_service(health)
            .serve_with_incoming(layer.incoming_tcp(listener)),
    );

    let output = tokio::time::timeout(
        STEP,
        Command::new(binary)
            .args(["client", &addr.to_string(), propagator])
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("Go client finished in time")
    .expect("run the Go client");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{propagator}: Go client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let go = go_spans(&stdout);
    let sent = go_span(&go, &format!("Sent.{METHOD}"));
    let attempt = go_span(&go, &format!("Attempt.{METHOD}"));
    assert_eq!(sent.kind, "client");
    assert_eq!(attempt.parent_span_id, sent.span_id);
    assert_eq!(attempt.status, "Ok");

    let name = format!("Recv.{METHOD}");
    support_wait(|| {
        exporter
            .get_finished_spans()
            .unwrap()
            .iter()
            .any(|span| span.name == name)
    })
    .await;
    let recv = rust_span(&exporter.get_finished_spans().unwrap(), &name);
    assert_eq!(recv.span_kind, SpanKind::Server);
    assert_eq!(
        hex_trace(recv.span_context.trace_id()),
        attempt.trace_id,
        "{propagator}: tonic's server span is in grpc-go's trace"
    );
    assert_eq!(
        hex_span(recv.parent_span_id),
        attempt.span_id,
        "{propagator}: tonic's server span is a child of grpc-go's attempt span"
    );
    assert!(recv.parent_span_is_remote);
    server.abort();
}

/// tonic client → grpc-go server.
async fn tonic_client_to_go_server(binary: &Path, propagator: &str) {
    let (provider, exporter) = provider();
    let mut child = Command::new(binary)
        .args(["server", propagator])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the Go server");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let listen = tokio::time::timeout(STEP, lines.next_line())
        .await
        .expect("Go server started in time")
        .unwrap()
        .expect("Go server printed its address");
    let addr = listen
        .strip_prefix("LISTEN ")
        .unwrap_or_else(|| panic!("unexpected first line {listen:?}"))
        .to_owned();

    let layer = CombinedLayer::client().with(handler(&provider, propagator));
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_with_connector(layer.connector())
        .await
        .unwrap();
    let mut client = HealthClient::new(tower::ServiceBuilder::new().layer(layer).service(channel));
    let cx = Context::current_with_span(provider.tracer("test").start("root"));
    client
        .check(HealthCheckRequest::default())
        .with_context(cx.clone())
        .await
        .expect("Check on the Go server");
    cx.span().end();

    // Closing stdin stops the Go server; it has printed its spans by then.
    drop(child.stdin.take());
    let mut stdout = String::new();
    while let Some(line) = tokio::time::timeout(STEP, lines.next_line())
        .await
        .expect("Go server stopped in time")
        .unwrap()
    {
        stdout.push_str(&line);
        stdout.push('\n');
    }
    let status = child.wait().await.unwrap();
    assert!(status.success(), "{propagator}: Go server failed: {stdout}");

    let spans = exporter.get_finished_spans().unwrap();
    let sent = rust_span(&spans, &format!("Sent.{METHOD}"));
    let attempt = rust_span(&spans, &format!("Attempt.{METHOD}"));
    assert_eq!(sent.parent_span_id, cx.span().span_context().span_id());
    let go = go_spans(&stdout);
    let recv = go_span(&go, &format!("Recv.{METHOD}"));
    assert_eq!(recv.kind, "server");
    assert_eq!(recv.status, "Ok");
    assert_eq!(
        recv.trace_id,
        hex_trace(attempt.span_context.trace_id()),
        "{propagator}: grpc-go's server span is in tonic's trace"
    );
    assert_eq!(
        recv.parent_span_id,
        hex_span(attempt.span_context.span_id()),
        "{propagator}: grpc-go's server span is a child of tonic's attempt span"
    );
}

/// Waits (up to [`support::PATIENCE`]) for `done`.
async fn support_wait(done: impl Fn() -> bool) {
    support::wait_until("the server span", done).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn otel_traces_cross_into_and_out_of_grpc_go() {
    // Asked here first: a skip's notice names the test by its thread.
    if !go_interop::go_available() {
        return;
    }
    let Some(binary) = tokio::task::spawn_blocking(|| go_interop::go_program("otel-go"))
        .await
        .unwrap()
    else {
        return;
    };
    for propagator in PROPAGATORS {
        go_client_to_tonic_server(&binary, propagator).await;
        tonic_client_to_go_server(&binary, propagator).await;
    }
}
