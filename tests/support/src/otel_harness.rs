//! Shared by the `otel_tracing*` tests: both propagators, an in-memory
//! exporter, a traced echo service (with a handler that fails, sleeps or
//! calls another server), traced servers and clients, span lookups.

pub use std::future::Future;
pub use std::net::SocketAddr;
pub use std::pin::Pin;
pub use std::sync::{Arc, Mutex};
pub use std::time::Duration;

pub use crate::{
    Echo, EchoClient, EchoOverride, EchoRequest, EchoResponse, EchoServer, EchoService,
    ResponseStream,
};
pub use opentelemetry::context::FutureExt as _;
pub use opentelemetry::propagation::TextMapPropagator;
pub use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceContextExt, Tracer, TracerProvider,
};
pub use opentelemetry::{Context, KeyValue, Value};
pub use opentelemetry_sdk::propagation::TraceContextPropagator;
pub use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracer, SdkTracerProvider, SpanData};
pub use tokio_stream::StreamExt;
pub use tonic::{Code, Request, Response, Status as GrpcStatus, Streaming};
pub use tonic_hotpath::metadata::{OutgoingMetadata, OutgoingMetadataLayer};
pub use tonic_hotpath::otel::{GrpcTraceBinPropagator, OtelTracing};
pub use tonic_hotpath::stats::{CombinedLayer, RpcEvent, ServerSide, StatsHandler};

pub const UNARY: &str = "hotpath.echo.Echo.UnaryEcho";
pub const BIDI: &str = "hotpath.echo.Echo.BidirectionalStreamingEcho";

/// Which propagator both sides use.
#[derive(Debug, Clone, Copy)]
pub enum Propagation {
    W3c,
    GrpcTraceBin,
}

impl Propagation {
    pub const BOTH: [Propagation; 2] = [Propagation::W3c, Propagation::GrpcTraceBin];

    pub fn handler(self, provider: &SdkTracerProvider) -> OtelTracing<SdkTracer> {
        match self {
            Propagation::W3c => OtelTracing::new(provider, TraceContextPropagator::new()),
            Propagation::GrpcTraceBin => OtelTracing::new(provider, GrpcTraceBinPropagator::new()),
        }
    }

    pub fn header(self) -> &'static str {
        match self {
            Propagation::W3c => "traceparent",
            Propagation::GrpcTraceBin => GrpcTraceBinPropagator::HEADER,
        }
    }
}

/// A tracer provider exporting to memory.
pub fn provider() -> (SdkTracerProvider, InMemorySpanExporter) {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    (provider, exporter)
}

/// A call made from inside a server handler (type-erased client).
pub type Hop = Arc<
    dyn Fn(String) -> Pin<Box<dyn Future<Output = Result<String, GrpcStatus>> + Send>>
        + Send
        + Sync,
>;

/// What a [`Traced`] server saw of each call.
#[derive(Debug, Default)]
pub struct Seen {
    /// The span context current inside the handler.
    pub contexts: Vec<SpanContext>,
    /// The request headers' names.
    pub headers: Vec<Vec<String>>,
}

/// The echo service with behaviours picked by the message:
/// `fail` answers `InvalidArgument`, `sleep` sleeps 5 s, `hop` calls the
/// downstream server inside an `OutgoingMetadata` scope; anything else is
/// echoed. Bidi echoes each message.
#[derive(Clone)]
pub struct Traced {
    pub seen: Arc<Mutex<Seen>>,
    pub hop: Option<Hop>,
}

#[tonic::async_trait]
impl EchoOverride for Traced {
    async fn unary(
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

    /// One reply per word, each produced when tonic polls the stream (after
    /// the handler returned), recording the span context current then.
    async fn server_streaming(
        &self,
        request: Request<EchoRequest>,
    ) -> Result<Response<ResponseStream>, GrpcStatus> {
        let words: Vec<String> = request
            .into_inner()
            .message
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        let seen = Arc::clone(&self.seen);
        let replies = tokio_stream::StreamExt::map(tokio_stream::iter(words), move |word| {
            let current = Context::current().span().span_context().clone();
            seen.lock().unwrap().contexts.push(current);
            Ok(EchoResponse { message: word })
        });
        Ok(Response::new(Box::pin(replies)))
    }
}

/// Counts `End` events: a second handler on the same layer as
/// `OtelTracing`.
#[derive(Debug, Default)]
pub struct Ends(pub Mutex<u32>);

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
pub async fn serve(
    provider: &SdkTracerProvider,
    propagation: Propagation,
    service: Traced,
) -> SocketAddr {
    let layer = CombinedLayer::server()
        .with(Ends::default())
        .with(propagation.handler(provider));
    serve_layer(layer, service).await
}

/// Serves `service` behind `layer` on 127.0.0.1.
pub async fn serve_layer<H: StatsHandler>(
    layer: CombinedLayer<H, ServerSide>,
    service: Traced,
) -> SocketAddr {
    let (addr, incoming) = crate::bind().await;
    tokio::spawn(
        tonic::transport::Server::builder()
            .layer(layer)
            .add_service(EchoServer::new(service))
            .serve_with_incoming(incoming),
    );
    addr
}

pub fn traced(hop: Option<Hop>) -> Traced {
    Traced {
        seen: Arc::default(),
        hop,
    }
}

/// A traced client of `addr`: `OtelTracing` on the `Channel`, the
/// metadata layer above it.
pub async fn client(
    provider: &SdkTracerProvider,
    propagation: Propagation,
    addr: SocketAddr,
) -> EchoClient<
    tonic_hotpath::metadata::OutgoingMetadataService<
        tonic_hotpath::stats::CombinedService<
            tonic::transport::Channel,
            OtelTracing<SdkTracer>,
            tonic_hotpath::stats::ClientSide,
        >,
    >,
> {
    let layer = CombinedLayer::client().with(propagation.handler(provider));
    let channel = crate::endpoint(addr)
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

pub fn req(message: &str) -> EchoRequest {
    EchoRequest {
        message: message.to_owned(),
    }
}

/// A root span of the test's own, as the caller's current context.
pub fn root(provider: &SdkTracerProvider) -> Context {
    Context::current_with_span(provider.tracer("test").start("root"))
}

pub async fn wait_for_spans(exporter: &InMemorySpanExporter, names: &[String]) -> Vec<SpanData> {
    crate::wait_until("spans", || {
        let spans = exporter.get_finished_spans().unwrap();
        names
            .iter()
            .all(|name| spans.iter().any(|span| span.name == *name))
    })
    .await;
    exporter.get_finished_spans().unwrap()
}

pub fn span<'a>(spans: &'a [SpanData], name: &str) -> &'a SpanData {
    let mut found = spans.iter().filter(|span| span.name == name);
    let span = found.next().unwrap_or_else(|| panic!("no span {name}"));
    assert!(found.next().is_none(), "two spans {name}");
    span
}

pub fn names(prefixes: &[&str], method: &str) -> Vec<String> {
    prefixes.iter().map(|p| format!("{p}.{method}")).collect()
}

pub fn attribute(attributes: &[KeyValue], key: &str) -> Option<Value> {
    attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.clone())
}

/// The (name, sequence-number, message-size) of each message event.
pub fn messages(span: &SpanData) -> Vec<(String, i64, i64)> {
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

pub fn assert_child(child: &SpanData, parent: &SpanData) {
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

pub fn is_error(span: &SpanData) -> bool {
    matches!(span.status, Status::Error { .. })
}
