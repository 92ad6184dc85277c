//! gRFC A72 tracing (`stats::otel::OtelTracing`) over real tonic servers
//! and clients on 127.0.0.1, recorded with the SDK's in-memory exporter:
//! span names, kinds, parent links across processes (both propagators),
//! message events, statuses (OK, error, cancel, deadline), and a server
//! that calls another server continuing the trace.
mod support;

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry::context::FutureExt as _;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceContextExt, Tracer, TracerProvider,
};
use opentelemetry::{Context, KeyValue, Value};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use support::{
    Echo, EchoClient, EchoRequest, EchoResponse, EchoServer, EchoService, ResponseStream,
};
use tokio_stream::StreamExt;
use tonic::{Code, Request, Response, Status as GrpcStatus, Streaming};
use tonic_hotpath::metadata::{OutgoingMetadata, OutgoingMetadataLayer};
use tonic_hotpath::stats::otel::{GRPC_TRACE_BIN, GrpcTraceBinPropagator, OtelTracing};
use tonic_hotpath::stats::{CombinedLayer, RpcEvent, StatsHandler};

const UNARY: &str = "hotpath.echo.Echo.UnaryEcho";
const BIDI: &str = "hotpath.echo.Echo.BidirectionalStreamingEcho";

/// Which propagator both sides use.
#[derive(Debug, Clone, Copy)]
enum Propagation {
    W3c,
    GrpcTraceBin,
}

impl Propagation {
    const BOTH: [Propagation; 2] = [Propagation::W3c, Propagation::GrpcTraceBin];

    fn handler(self, provider: &SdkTracerProvider) -> OtelTracing {
        match self {
            Propagation::W3c => OtelTracing::new(provider, TraceContextPropagator::new()),
            Propagation::GrpcTraceBin => OtelTracing::new(provider, GrpcTraceBinPropagator::new()),
        }
    }

    fn header(self) -> &'static str {
        match self {
            Propagation::W3c => "traceparent",
            Propagation::GrpcTraceBin => GRPC_TRACE_BIN,
        }
    }
}

/// A tracer provider exporting to memory.
fn provider() -> (SdkTracerProvider, InMemorySpanExporter) {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    (provider, exporter)
}

/// A call made from inside a server handler (type-erased client).
type Hop = Arc<
    dyn Fn(String) -> Pin<Box<dyn Future<Output = Result<String, GrpcStatus>> + Send>>
        + Send
        + Sync,
>;

/// What a [`Traced`] server saw of each call.
#[derive(Debug, Default)]
struct Seen {
    /// The span context current inside the handler.
    contexts: Vec<SpanContext>,
    /// The request headers' names.
    headers: Vec<Vec<String>>,
}

/// The echo service with behaviours picked by the message:
/// `fail` answers `InvalidArgument`, `sleep` sleeps 5 s, `hop` calls the
/// downstream server inside an `OutgoingMetadata` scope; anything else is
/// echoed. Bidi echoes each message.
#[derive(Clone)]
struct Traced {
    seen: Arc<Mutex<Seen>>,
    hop: Option<Hop>,
}

#[tonic::async_trait]
impl Echo for Traced {
    async fn unary_echo(
        &self,
        request: Request<EchoRequest>,
    ) -> Result<Response<EchoResponse>, GrpcStatus> {
        {
            let mut seen = self.seen.lock().unwrap();
            seen.contexts
                .push(Context::current().span().span_context().clone());
            seen.headers.push(
                request
                    .metadata()
                    .keys()
                    .map(|key| match key {
                        tonic::metadata::KeyRef::Ascii(key) => key.as_str().to_owned(),
                        tonic::metadata::KeyRef::Binary(key) => key.as_str().to_owned(),
                    })
                    .collect(),
            );
        }
        let message = request.into_inner().message;
        let reply = match message.as_str() {
            "fail" => return Err(GrpcStatus::invalid_argument("bad request")),
            "sleep" => {
                tokio::time::sleep(Duration::from_secs(5)).await;
                message
            }
            "hop" => {
                let hop = self.hop.clone().expect("a downstream server");
                OutgoingMetadata::new()
                    .append_static("x-hop", "1")
                    .unwrap()
                    .scope(hop("downstream".to_owned()))
                    .await?
            }
            _ => message,
        };
        Ok(Response::new(EchoResponse { message: reply }))
    }

    type ServerStreamingEchoStream = ResponseStream;

    async fn server_streaming_echo(
        &self,
        request: Request<EchoRequest>,
    ) -> Result<Response<ResponseStream>, GrpcStatus> {
        EchoService.server_streaming_echo(request).await
    }

    async fn client_streaming_echo(
        &self,
        request: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<EchoResponse>, GrpcStatus> {
        EchoService.client_streaming_echo(request).await
    }

    type BidirectionalStreamingEchoStream = ResponseStream;

    async fn bidirectional_streaming_echo(
        &self,
        request: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<ResponseStream>, GrpcStatus> {
        EchoService.bidirectional_streaming_echo(request).await
    }
}

/// Counts `End` events: a second handler on the same layer as
/// `OtelTracing`.
#[derive(Debug, Default)]
struct Ends(Mutex<u32>);

impl StatsHandler for Ends {
    type RpcState = ();
    type ConnState = ();

    fn handle_rpc(&self, _: &mut (), event: &RpcEvent<'_>) {
        if let RpcEvent::End(_) = event {
            *self.0.lock().unwrap() += 1;
        }
    }
}

/// Serves `service` with `OtelTracing` behind another handler (so the
/// trace context has to come through `Combined`).
async fn serve(
    provider: &SdkTracerProvider,
    propagation: Propagation,
    service: Traced,
) -> SocketAddr {
    let layer = CombinedLayer::server()
        .with(Ends::default())
        .with(propagation.handler(provider));
    let (addr, incoming) = support::bind().await;
    tokio::spawn(
        tonic::transport::Server::builder()
            .layer(layer)
            .add_service(EchoServer::new(service))
            .serve_with_incoming(incoming),
    );
    addr
}

fn traced(hop: Option<Hop>) -> Traced {
    Traced {
        seen: Arc::default(),
        hop,
    }
}

/// A traced client of `addr`: `OtelTracing` on the `Channel`, the
/// metadata layer above it.
async fn client(
    provider: &SdkTracerProvider,
    propagation: Propagation,
    addr: SocketAddr,
) -> EchoClient<
    tonic_hotpath::metadata::OutgoingMetadataService<
        tonic_hotpath::stats::ClientStats<tonic::transport::Channel, OtelTracing>,
    >,
> {
    let layer = CombinedLayer::client().with(propagation.handler(provider));
    let channel = support::endpoint(addr)
        .connect_with_connector(layer.connector())
        .await
        .unwrap();
    EchoClient::new(
        tower::ServiceBuilder::new()
            .layer(OutgoingMetadataLayer::new())
            .layer(layer)
            .service(channel),
    )
}

fn req(message: &str) -> EchoRequest {
    EchoRequest {
        message: message.to_owned(),
    }
}

/// A root span of the test's own, as the caller's current context.
fn root(provider: &SdkTracerProvider) -> Context {
    Context::current_with_span(provider.tracer("test").start("root"))
}

async fn wait_for_spans(exporter: &InMemorySpanExporter, names: &[String]) -> Vec<SpanData> {
    support::wait_until("spans", || {
        let spans = exporter.get_finished_spans().unwrap();
        names
            .iter()
            .all(|name| spans.iter().any(|span| span.name == *name))
    })
    .await;
    exporter.get_finished_spans().unwrap()
}

fn span<'a>(spans: &'a [SpanData], name: &str) -> &'a SpanData {
    let mut found = spans.iter().filter(|span| span.name == name);
    let span = found.next().unwrap_or_else(|| panic!("no span {name}"));
    assert!(found.next().is_none(), "two spans {name}");
    span
}

fn names(prefixes: &[&str], method: &str) -> Vec<String> {
    prefixes.iter().map(|p| format!("{p}.{method}")).collect()
}

fn attribute(attributes: &[KeyValue], key: &str) -> Option<Value> {
    attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.clone())
}

/// The (name, sequence-number, message-size) of each message event.
fn messages(span: &SpanData) -> Vec<(String, i64, i64)> {
    span.events
        .iter()
        .map(|event| {
            let number = |key| match attribute(&event.attributes, key) {
                Some(Value::I64(n)) => n,
                other => panic!("{key}: {other:?} in {event:?}"),
            };
            (
                event.name.to_string(),
                number("sequence-number"),
                number("message-size"),
            )
        })
        .collect()
}

fn assert_child(child: &SpanData, parent: &SpanData) {
    assert_eq!(
        child.span_context.trace_id(),
        parent.span_context.trace_id(),
        "{} and {} are in one trace",
        child.name,
        parent.name
    );
    assert_eq!(
        child.parent_span_id,
        parent.span_context.span_id(),
        "{} is a child of {}",
        child.name,
        parent.name
    );
}

fn is_error(span: &SpanData) -> bool {
    matches!(span.status, Status::Error { .. })
}

#[tokio::test]
async fn otel_unary_spans_link_client_attempt_and_server_with_either_propagator() {
    for propagation in Propagation::BOTH {
        let (provider, exporter) = provider();
        let service = traced(None);
        let seen = Arc::clone(&service.seen);
        let addr = serve(&provider, propagation, service).await;
        let mut client = client(&provider, propagation, addr).await;

        let cx = root(&provider);
        let reply = client
            .unary_echo(req("hello"))
            .with_context(cx.clone())
            .await
            .unwrap();
        assert_eq!(reply.into_inner().message, "hello");
        cx.span().end();

        let spans = wait_for_spans(&exporter, &names(&["Sent", "Attempt", "Recv"], UNARY)).await;
        let root = span(&spans, "root");
        let sent = span(&spans, &format!("Sent.{UNARY}"));
        let attempt = span(&spans, &format!("Attempt.{UNARY}"));
        let recv = span(&spans, &format!("Recv.{UNARY}"));
        assert_eq!(spans.len(), 4, "{propagation:?}: {spans:#?}");

        assert_eq!(sent.span_kind, SpanKind::Client);
        assert_eq!(attempt.span_kind, SpanKind::Internal);
        assert_eq!(recv.span_kind, SpanKind::Server);
        assert_child(sent, root);
        assert_child(attempt, sent);
        assert_child(recv, attempt);
        assert!(!attempt.parent_span_is_remote);
        assert!(recv.parent_span_is_remote, "{propagation:?}");
        for span in [sent, attempt, recv] {
            assert_eq!(span.status, Status::Ok, "{}", span.name);
            assert_eq!(span.instrumentation_scope.name(), "tonic-hotpath");
            assert_eq!(
                span.instrumentation_scope.version(),
                Some(env!("CARGO_PKG_VERSION"))
            );
        }

        // One message each way; "hello" is 7 bytes as a message.
        assert!(sent.events.is_empty());
        assert_eq!(
            messages(attempt),
            [
                ("Outbound message".to_owned(), 0, 7),
                ("Inbound message".to_owned(), 0, 7)
            ]
        );
        assert_eq!(
            messages(recv),
            [
                ("Inbound message".to_owned(), 0, 7),
                ("Outbound message".to_owned(), 0, 7)
            ]
        );
        assert_eq!(
            attribute(&attempt.attributes, "Client"),
            Some(Value::Bool(true))
        );
        assert_eq!(
            attribute(&recv.attributes, "Client"),
            Some(Value::Bool(false))
        );
        assert_eq!(
            attribute(&attempt.attributes, "previous-rpc-attempts"),
            Some(Value::I64(0))
        );

        // The handler ran with the server span current, and the header
        // was the chosen propagator's.
        let seen = seen.lock().unwrap();
        assert_eq!(seen.contexts.len(), 1);
        assert_eq!(seen.contexts[0].span_id(), recv.span_context.span_id());
        assert!(
            seen.headers[0].iter().any(|h| h == propagation.header()),
            "{propagation:?}: {:?}",
            seen.headers[0]
        );
    }
}

#[tokio::test]
async fn otel_untraced_caller_starts_a_new_trace() {
    let (provider, exporter) = provider();
    let addr = serve(&provider, Propagation::W3c, traced(None)).await;
    let mut client = client(&provider, Propagation::W3c, addr).await;
    client.unary_echo(req("x")).await.unwrap();
    let spans = wait_for_spans(&exporter, &names(&["Sent", "Attempt", "Recv"], UNARY)).await;
    let sent = span(&spans, &format!("Sent.{UNARY}"));
    assert_eq!(sent.parent_span_id, SpanId::INVALID);
    assert_child(
        span(&spans, &format!("Recv.{UNARY}")),
        span(&spans, &format!("Attempt.{UNARY}")),
    );
}

#[tokio::test]
async fn otel_error_status_is_the_grpc_message() {
    let (provider, exporter) = provider();
    let addr = serve(&provider, Propagation::GrpcTraceBin, traced(None)).await;
    let mut client = client(&provider, Propagation::GrpcTraceBin, addr).await;
    let status = client.unary_echo(req("fail")).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    let spans = wait_for_spans(&exporter, &names(&["Sent", "Attempt", "Recv"], UNARY)).await;
    for prefix in ["Sent", "Attempt", "Recv"] {
        assert_eq!(
            span(&spans, &format!("{prefix}.{UNARY}")).status,
            Status::error("bad request"),
            "{prefix}"
        );
    }
}

#[tokio::test]
async fn otel_deadline_and_cancel_end_every_span_with_an_error() {
    let (provider, exporter) = provider();
    let addr = serve(&provider, Propagation::W3c, traced(None)).await;
    let mut client = client(&provider, Propagation::W3c, addr).await;

    // Deadline: the client's 50 ms timeout passes while the server sleeps.
    let mut request = Request::new(req("sleep"));
    request.set_timeout(Duration::from_millis(50));
    let cx = root(&provider);
    let status = client
        .unary_echo(request)
        .with_context(cx.clone())
        .await
        .unwrap_err();
    assert_eq!(
        status.code(),
        Code::Cancelled,
        "tonic reports its own timeout so: {status:?}"
    );
    let spans = wait_for_spans(&exporter, &names(&["Sent", "Attempt", "Recv"], UNARY)).await;
    let trace = cx.span().span_context().trace_id();
    let in_trace: Vec<&SpanData> = spans
        .iter()
        .filter(|span| span.span_context.trace_id() == trace)
        .collect();
    assert_eq!(in_trace.len(), 3, "{in_trace:#?}");
    for span in &in_trace {
        assert!(is_error(span), "{span:#?}");
    }
    exporter.reset();

    // Cancel: the caller drops the call.
    let cx = root(&provider);
    let call = client.unary_echo(req("sleep")).with_context(cx.clone());
    assert!(
        tokio::time::timeout(Duration::from_millis(100), call)
            .await
            .is_err()
    );
    let spans = wait_for_spans(&exporter, &names(&["Sent", "Attempt", "Recv"], UNARY)).await;
    let trace = cx.span().span_context().trace_id();
    for span in spans
        .iter()
        .filter(|span| span.span_context.trace_id() == trace)
    {
        assert!(is_error(span), "{span:#?}");
    }
    let attempt = span(&spans, &format!("Attempt.{UNARY}"));
    assert_eq!(
        attempt.status,
        Status::error("rpc dropped before its status was known")
    );
}

#[tokio::test]
async fn otel_trace_continues_through_a_server_that_calls_another() {
    for propagation in Propagation::BOTH {
        let (provider, exporter) = provider();
        let downstream = traced(None);
        let downstream_seen = Arc::clone(&downstream.seen);
        let downstream_addr = serve(&provider, propagation, downstream).await;
        let downstream_client = client(&provider, propagation, downstream_addr).await;
        let hop: Hop = Arc::new(move |message| {
            let mut client = downstream_client.clone();
            Box::pin(async move {
                let reply = client.unary_echo(req(&message)).await?;
                Ok(reply.into_inner().message)
            })
        });
        let addr = serve(&provider, propagation, traced(Some(hop))).await;
        let mut client = client(&provider, propagation, addr).await;

        let cx = root(&provider);
        let reply = client
            .unary_echo(req("hop"))
            .with_context(cx.clone())
            .await
            .unwrap();
        assert_eq!(reply.into_inner().message, "downstream");
        cx.span().end();

        // root, and Sent, Attempt, Recv for each of the two calls.
        support::wait_until("seven spans", || {
            exporter.get_finished_spans().unwrap().len() == 7
        })
        .await;
        let spans_now = exporter.get_finished_spans().unwrap();
        let by_kind = |kind: SpanKind, prefix: &str| -> Vec<&SpanData> {
            spans_now
                .iter()
                .filter(|span| span.span_kind == kind && span.name.starts_with(prefix))
                .collect()
        };
        let root = span(&spans_now, "root");
        let sents = by_kind(SpanKind::Client, "Sent.");
        let attempts = by_kind(SpanKind::Internal, "Attempt.");
        let recvs = by_kind(SpanKind::Server, "Recv.");
        assert_eq!((sents.len(), attempts.len(), recvs.len()), (2, 2, 2));
        // root -> Sent -> Attempt -> Recv (first server) -> Sent -> Attempt -> Recv.
        let child_of = |list: &[&'_ SpanData], parent: &SpanData| -> SpanData {
            (*list
                .iter()
                .find(|span| span.parent_span_id == parent.span_context.span_id())
                .unwrap_or_else(|| panic!("{propagation:?}: no child of {}", parent.name)))
            .clone()
        };
        let sent1 = child_of(&sents, root);
        let attempt1 = child_of(&attempts, &sent1);
        let recv1 = child_of(&recvs, &attempt1);
        let sent2 = child_of(&sents, &recv1);
        let attempt2 = child_of(&attempts, &sent2);
        let recv2 = child_of(&recvs, &attempt2);
        for span in [&sent1, &attempt1, &recv1, &sent2, &attempt2, &recv2] {
            assert_eq!(span.span_context.trace_id(), root.span_context.trace_id());
            assert_eq!(span.status, Status::Ok);
        }
        // The downstream call also carried the metadata scope's entry.
        let seen = downstream_seen.lock().unwrap();
        assert!(
            seen.headers[0].iter().any(|h| h == "x-hop"),
            "{:?}",
            seen.headers
        );
        assert_eq!(seen.contexts[0].span_id(), recv2.span_context.span_id());
    }
}

#[tokio::test]
async fn otel_streaming_messages_are_numbered_per_direction() {
    let (provider, exporter) = provider();
    let addr = serve(&provider, Propagation::GrpcTraceBin, traced(None)).await;
    let mut client = client(&provider, Propagation::GrpcTraceBin, addr).await;
    let requests = tokio_stream::iter(["a", "bb", "ccc"].map(req));
    let mut replies = client
        .bidirectional_streaming_echo(requests)
        .await
        .unwrap()
        .into_inner();
    let mut got = Vec::new();
    while let Some(reply) = replies.next().await {
        got.push(reply.unwrap().message);
    }
    assert_eq!(got, ["a", "bb", "ccc"]);
    drop(replies);

    let spans = wait_for_spans(&exporter, &names(&["Sent", "Attempt", "Recv"], BIDI)).await;
    for (name, out_name, in_name) in [
        (
            format!("Attempt.{BIDI}"),
            "Outbound message",
            "Inbound message",
        ),
        (
            format!("Recv.{BIDI}"),
            "Outbound message",
            "Inbound message",
        ),
    ] {
        let events = messages(span(&spans, &name));
        for direction in [out_name, in_name] {
            let numbered: Vec<(i64, i64)> = events
                .iter()
                .filter(|(event, ..)| event == direction)
                .map(|(_, number, size)| (*number, *size))
                .collect();
            // Sizes: a string field of n bytes is n + 2 bytes.
            assert_eq!(numbered, [(0, 3), (1, 4), (2, 5)], "{name} {direction}");
        }
    }
}

#[tokio::test]
async fn otel_malformed_propagation_headers_give_a_root_server_span() {
    for propagation in Propagation::BOTH {
        let (provider, exporter) = provider();
        let addr = serve(&provider, propagation, traced(None)).await;
        // An untraced client sending garbage in both headers.
        let mut client = EchoClient::new(support::connect(addr).await);
        let mut request = Request::new(req("x"));
        request.metadata_mut().insert_bin(
            "grpc-trace-bin",
            tonic::metadata::MetadataValue::from_bytes(&[0, 0, 1, 2, 3]),
        );
        request
            .metadata_mut()
            .insert("traceparent", "00-zz-not-a-trace-01".parse().unwrap());
        client.unary_echo(request).await.unwrap();
        let spans = wait_for_spans(&exporter, &names(&["Recv"], UNARY)).await;
        let recv = span(&spans, &format!("Recv.{UNARY}"));
        assert_eq!(recv.parent_span_id, SpanId::INVALID, "{propagation:?}");
        assert_eq!(recv.status, Status::Ok);
    }
}

/// `OtelTracing` first or last among a layer's handlers, and the metadata
/// layer below the client stats layer instead of above it.
#[tokio::test]
async fn otel_composes_in_either_order() {
    let (provider, exporter) = provider();
    let layer = CombinedLayer::server()
        .with(Propagation::W3c.handler(&provider))
        .with(Ends::default());
    let service = traced(None);
    let seen = Arc::clone(&service.seen);
    let (addr, incoming) = support::bind().await;
    tokio::spawn(
        tonic::transport::Server::builder()
            .layer(layer)
            .add_service(EchoServer::new(service))
            .serve_with_incoming(incoming),
    );
    let layer = CombinedLayer::client().with(Propagation::W3c.handler(&provider));
    let channel = support::connect(addr).await;
    let mut client = EchoClient::new(
        tower::ServiceBuilder::new()
            .layer(layer)
            .layer(OutgoingMetadataLayer::new())
            .service(channel),
    );
    let cx = root(&provider);
    OutgoingMetadata::new()
        .append_static("x-scope", "1")
        .unwrap()
        .scope(client.unary_echo(req("x")).with_context(cx.clone()))
        .await
        .unwrap();
    cx.span().end();
    let mut expected = names(&["Sent", "Attempt", "Recv"], UNARY);
    expected.push("root".to_owned());
    let spans = wait_for_spans(&exporter, &expected).await;
    let attempt = span(&spans, &format!("Attempt.{UNARY}"));
    let recv = span(&spans, &format!("Recv.{UNARY}"));
    assert_child(span(&spans, &format!("Sent.{UNARY}")), span(&spans, "root"));
    assert_child(recv, attempt);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.contexts[0].span_id(), recv.span_context.span_id());
    assert!(seen.headers[0].iter().any(|h| h == "x-scope"));
    assert!(seen.headers[0].iter().any(|h| h == "traceparent"));
}

/// A propagator must be usable on its own too: `OtelTracing` takes any
/// `TextMapPropagator`, and the in-crate one matches what it injects.
#[test]
fn otel_grpc_trace_bin_round_trips_through_a_map() {
    let (provider, _exporter) = provider();
    let cx = root(&provider);
    let mut carrier = std::collections::HashMap::new();
    GrpcTraceBinPropagator::new().inject_context(&cx, &mut carrier);
    let back = GrpcTraceBinPropagator::new().extract(&carrier);
    assert_eq!(
        back.span().span_context().span_id(),
        cx.span().span_context().span_id()
    );
}
