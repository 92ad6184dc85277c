//! [`OtelTracing`]: gRFC A72's OpenTelemetry tracing as a ready-made
//! [`StatsHandler`], with the spans, events and statuses grpc-go's
//! `stats/opentelemetry` records.

use std::fmt;
use std::sync::{Mutex, PoisonError};

use http::HeaderMap;
use opentelemetry::global::BoxedTracer;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer, TracerProvider};
use opentelemetry::{Context, InstrumentationScope, KeyValue};
use tonic::Code;

use super::propagation::{HeaderExtractor, HeaderInjector};
use crate::stats::{
    CallAttempt, CallValue, End, Payload, RpcEvent, RpcInfo, ServiceContext, Side, StatsHandler,
};

/// Moved to [`OtelTracing::TRACER_NAME`].
#[deprecated(note = "use `OtelTracing::TRACER_NAME`")]
pub const TRACER_NAME: &str = OtelTracing::TRACER_NAME;

/// gRPC's OpenTelemetry tracing (gRFC A72), as grpc-go's
/// `stats/opentelemetry` records it, for a [`CombinedLayer`] on a tonic
/// server or client.
///
/// - Client: a `Sent.<service>.<method>` span (kind client), child of the
///   caller's [`Context::current`] when the call is made, and under it an
///   `Attempt.<service>.<method>` span (kind internal) per attempt: one,
///   as tonic does not retry, or one per attempt of a call a
///   `retry::RetryLayer` above the layer makes (the call span then ends
///   with the call, with its last attempt's status). The attempt's context
///   is injected into the request headers with the propagator.
/// - Server: a `Recv.<service>.<method>` span (kind server), child of the
///   context the propagator extracts from the request headers (a new root
///   when there is none). The inner service runs with this span's context
///   current, so spans the service starts and calls it makes through a
///   client layer with `OtelTracing` continue the trace (see
///   [`StatsHandler::service_context`]).
/// - The attempt span (client) and the server span carry grpc-go's `Begin`
///   attributes (`Client`, `FailFast`, `previous-rpc-attempts`,
///   `transparent-retry`) and one event per message: `Outbound message` /
///   `Inbound message` with `sequence-number` (counted from 0 per
///   direction), `message-size` (uncompressed) and, for a compressed
///   message, `message-size-compressed` (on the wire).
/// - Every span ends with the RPC: status `Ok` for `OK`, otherwise `Error`
///   with the status message (or, when there is none, what ended the RPC,
///   e.g. the cancellation), as grpc-go does.
///
/// Spans come from the [`TracerProvider`](opentelemetry::trace::TracerProvider)
/// you pass, never from the global one; the propagator is yours too:
/// [`GrpcTraceBinPropagator`](super::GrpcTraceBinPropagator) for A72's
/// `grpc-trace-bin`, the SDK's `TraceContextPropagator` for W3C
/// `traceparent`, or a composite of several.
///
/// On the client, register it on the layer that wraps the `Channel`
/// directly (no `Buffer` or spawning layer above it: the caller's context
/// is read when the layered service is called).
///
/// ```
/// use opentelemetry::trace::{TraceContextExt, Tracer, TracerProvider};
/// use opentelemetry::context::FutureExt;
/// use opentelemetry_sdk::propagation::TraceContextPropagator;
/// use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
/// use tonic_hotpath::stats::CombinedLayer;
/// use tonic_hotpath::otel::OtelTracing;
///
/// #[tokio::main(flavor = "current_thread")]
/// async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
///     let exporter = InMemorySpanExporter::default();
///     let provider = SdkTracerProvider::builder()
///         .with_simple_exporter(exporter.clone())
///         .build();
///
///     // Server: spans continue the caller's trace from `traceparent`.
///     let layer = CombinedLayer::server()
///         .with(OtelTracing::new(&provider, TraceContextPropagator::new()));
///     let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
///     let addr = listener.local_addr()?;
///     let (_reporter, health) = tonic_health::server::health_reporter();
///     tokio::spawn(
///         tonic::transport::Server::builder()
///             .layer(layer.clone())
///             .add_service(health)
///             .serve_with_incoming(layer.incoming_tcp(listener)),
///     );
///
///     // Client: the call's spans are children of the caller's span.
///     let layer = CombinedLayer::client()
///         .with(OtelTracing::new(&provider, TraceContextPropagator::new()));
///     let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))?
///         .connect_with_connector(layer.connector())
///         .await?;
///     let channel = tower::ServiceBuilder::new().layer(layer).service(channel);
///     let mut client = tonic_health::pb::health_client::HealthClient::new(channel);
///
///     let root = provider.tracer("app").start("handle-request");
///     let cx = opentelemetry::Context::current_with_span(root);
///     client
///         .check(tonic_health::pb::HealthCheckRequest::default())
///         .with_context(cx.clone())
///         .await?;
///     cx.span().end();
///
///     // (Server spans end once the response is sent: wait for all four.)
///     while exporter.get_finished_spans()?.len() < 4 {
///         tokio::time::sleep(std::time::Duration::from_millis(5)).await;
///     }
///     let spans = exporter.get_finished_spans()?;
///     let names: Vec<&str> = spans.iter().map(|span| &*span.name).collect();
///     for name in [
///         "Sent.grpc.health.v1.Health.Check",
///         "Attempt.grpc.health.v1.Health.Check",
///         "Recv.grpc.health.v1.Health.Check",
///     ] {
///         assert!(names.contains(&name), "{names:?}");
///     }
///     let trace = cx.span().span_context().trace_id();
///     assert!(spans.iter().all(|span| span.span_context.trace_id() == trace));
///     Ok(())
/// }
/// ```
///
/// [`CombinedLayer`]: crate::stats::CombinedLayer
///
/// The handler is generic over the provider's tracer `T` (the SDK's
/// `SdkTracer`, or [`BoxedTracer`] for the global provider), so a span is
/// boxed once, by the API's `Context`, not twice.
pub struct OtelTracing<T = BoxedTracer> {
    tracer: T,
    propagator: Box<dyn TextMapPropagator + Send + Sync>,
}

impl OtelTracing {
    /// The instrumentation scope (tracer) name of the handler's spans; the
    /// scope's version is the crate's.
    ///
    /// ```
    /// use tonic_hotpath::otel::OtelTracing;
    ///
    /// assert_eq!(OtelTracing::TRACER_NAME, "tonic-hotpath");
    /// ```
    pub const TRACER_NAME: &str = env!("CARGO_PKG_NAME");
}

impl<T: Tracer> OtelTracing<T> {
    /// Tracing with a tracer from `provider` (scope
    /// [`TRACER_NAME`](OtelTracing::TRACER_NAME), this
    /// crate's version) and `propagator` for the request headers.
    #[must_use]
    pub fn new<P>(provider: &P, propagator: impl TextMapPropagator + Send + Sync + 'static) -> Self
    where
        P: TracerProvider<Tracer = T> + ?Sized,
    {
        let scope = InstrumentationScope::builder(OtelTracing::TRACER_NAME)
            .with_version(env!("CARGO_PKG_VERSION"))
            .build();
        Self {
            tracer: provider.tracer_with_scope(scope),
            propagator: Box::new(propagator),
        }
    }

    /// Starts a span of `kind` under `parent` and returns its context.
    fn start(&self, name: String, kind: SpanKind, parent: &Context) -> Context
    where
        T::Span: Send + Sync + 'static,
    {
        let builder = self.tracer.span_builder(name).with_kind(kind);
        parent.with_span(self.tracer.build_with_context(builder, parent))
    }
}

impl<T> fmt::Debug for OtelTracing<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OtelTracing")
            .field("propagator", &self.propagator)
            .finish_non_exhaustive()
    }
}

/// One RPC's spans: the per-RPC state of [`OtelTracing`], stored inline in
/// the layer's per-RPC record like every handler's state. You only name it
/// when writing out a combined handler's state type:
///
/// ```
/// use tonic_hotpath::otel::{OtelTracing, OtelTracingState};
/// use tonic_hotpath::stats::{Combined, StatsHandler};
///
/// #[derive(Debug)]
/// struct Metrics;
/// impl StatsHandler for Metrics {
///     type RpcState = u64;
///     type ConnState = ();
/// }
///
/// type State = <Combined<Metrics, OtelTracing> as StatsHandler>::RpcState;
/// let state: State = Default::default();
/// let _: (u64, OtelTracingState) = state;
/// ```
#[derive(Default)]
pub struct OtelTracingState(State);

#[derive(Default)]
enum State {
    /// Not tagged yet, or ended.
    #[default]
    Idle,
    /// Server: tagged, waiting for the request headers to learn the parent.
    Tagged { name: String },
    /// The span(s) of a running RPC.
    Running(Spans),
}

struct Spans {
    /// Client: the call span (`Sent.`), parent of `span`.
    call: Option<Context>,
    /// Client, an attempt of a retried call: the call's span, ended with
    /// the call; `call` is its context.
    retried: Option<(CallValue<CallSpan>, i64, bool)>,
    /// The attempt span (client) or the server span (`Recv.`).
    span: Context,
    /// The next outbound and inbound message sequence numbers.
    sent: i64,
    received: i64,
}

impl fmt::Debug for OtelTracingState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("OtelTracingState");
        match &self.0 {
            State::Idle => debug.field("state", &"idle"),
            State::Tagged { name } => debug.field("tagged", name),
            State::Running(spans) => debug
                .field("span", spans.span.span().span_context())
                .field("sent", &spans.sent)
                .field("received", &spans.received),
        };
        debug.finish()
    }
}

impl<T> StatsHandler for OtelTracing<T>
where
    T: Tracer + Send + Sync + 'static,
    T::Span: Send + Sync + 'static,
{
    type RpcState = OtelTracingState;
    type ConnState = ();
    const PAYLOAD_TIMES: bool = false;
    // A72's `message-size` is the uncompressed size.
    const UNCOMPRESSED_SIZES: bool = true;
    const SERVICE_CONTEXT: bool = true;

    fn tag_rpc(&self, info: &RpcInfo<'_>, _conn: Option<&()>) -> OtelTracingState {
        OtelTracingState(match info.side {
            Side::Client => {
                let start_call = || {
                    self.start(
                        span_name("Sent.", info.method),
                        SpanKind::Client,
                        &Context::current(),
                    )
                };
                let (call, retried) = match info.attempt {
                    Some(attempt) => {
                        let call_span = CallSpan::of(attempt, start_call);
                        let previous = i64::from(attempt.previous_attempts());
                        (
                            call_span.context.clone(),
                            Some((call_span, previous, attempt.is_transparent())),
                        )
                    }
                    None => (start_call(), None),
                };
                let span = self.start(
                    span_name("Attempt.", info.method),
                    SpanKind::Internal,
                    &call,
                );
                State::Running(Spans {
                    call: Some(call),
                    retried,
                    span,
                    sent: 0,
                    received: 0,
                })
            }
            Side::Server => State::Tagged {
                name: span_name("Recv.", info.method),
            },
        })
    }

    fn edit_request_headers(&self, state: &mut OtelTracingState, headers: &mut HeaderMap) {
        if let State::Running(spans) = &state.0 {
            self.propagator
                .inject_context(&spans.span, &mut HeaderInjector(headers));
        }
    }

    fn service_context(&self, state: &OtelTracingState) -> Option<ServiceContext> {
        match &state.0 {
            State::Running(spans) if spans.call.is_none() => {
                Some(ServiceContext::from_otel(spans.span.clone()))
            }
            _ => None,
        }
    }

    fn handle_rpc(&self, state: &mut OtelTracingState, event: &RpcEvent<'_>) {
        if let (RpcEvent::InHeader(headers), State::Tagged { name }) = (event, &mut state.0) {
            // Server: the request headers name the remote parent.
            let parent = self
                .propagator
                .extract_with_context(&Context::new(), &HeaderExtractor(headers));
            let span = self.start(std::mem::take(name), SpanKind::Server, &parent);
            state.0 = State::Running(Spans {
                call: None,
                retried: None,
                span,
                sent: 0,
                received: 0,
            });
            return;
        }
        let State::Running(spans) = &mut state.0 else {
            return;
        };
        match event {
            RpcEvent::Begin { .. } => {
                let (previous, transparent) = spans
                    .retried
                    .as_ref()
                    .map_or((0, false), |(_, previous, transparent)| {
                        (*previous, *transparent)
                    });
                spans.span.span().set_attributes([
                    KeyValue::new("Client", spans.call.is_some()),
                    // tonic fails a call whose connection cannot be made
                    // instead of waiting for it (grpc-go's default).
                    KeyValue::new("FailFast", spans.call.is_some()),
                    KeyValue::new("previous-rpc-attempts", previous),
                    KeyValue::new("transparent-retry", transparent),
                ]);
            }
            RpcEvent::OutPayload(payload) => {
                message_event(&spans.span, "Outbound message", &mut spans.sent, payload);
            }
            RpcEvent::InPayload(payload) => {
                message_event(&spans.span, "Inbound message", &mut spans.received, payload);
            }
            RpcEvent::End(end) => {
                let status = status(end);
                if let Some((call_span, ..)) = &spans.retried {
                    end_span(&spans.span, status.clone());
                    call_span.attempt_ended(status);
                } else if let Some(call) = &spans.call {
                    end_span(&spans.span, status.clone());
                    end_span(call, status);
                } else {
                    end_span(&spans.span, status);
                }
                state.0 = State::Idle;
            }
            _ => {}
        }
    }
}

/// `prefix` and the method path with its leading `/` dropped and `/` made
/// `.`, as grpc-go names its spans: `/pkg.Svc/M` gives `Recv.pkg.Svc.M`.
fn span_name(prefix: &str, method: &str) -> String {
    let method = method.strip_prefix('/').unwrap_or(method);
    let mut name = String::with_capacity(prefix.len() + method.len());
    name.push_str(prefix);
    name.extend(method.chars().map(|c| if c == '/' { '.' } else { c }));
    name
}

/// Adds one message event and advances that direction's sequence number:
/// `message-size` is the uncompressed size, and `message-size-compressed`
/// is added when the size on the wire differs (grpc-go's
/// `stats/opentelemetry/trace.go`). The layer measures every message's
/// uncompressed size for this handler (`UNCOMPRESSED_SIZES`); a payload
/// without one (built by hand) gets no `message-size`.
fn message_event(span: &Context, name: &'static str, sequence: &mut i64, payload: &Payload<'_>) {
    let mut attributes = Vec::with_capacity(3);
    attributes.push(KeyValue::new("sequence-number", *sequence));
    if let Some(length) = payload.length {
        attributes.push(KeyValue::new("message-size", i64::from(length)));
    }
    if payload.length != Some(payload.compressed_length) {
        attributes.push(KeyValue::new(
            "message-size-compressed",
            i64::from(payload.compressed_length),
        ));
    }
    span.span().add_event(name, attributes);
    *sequence += 1;
}

/// The span status for how the RPC ended.
fn status(end: &End<'_>) -> Status {
    if end.code == Code::Ok {
        return Status::Ok;
    }
    let description = if !end.message.is_empty() {
        end.message.to_owned()
    } else if let Some(error) = end.error {
        error.to_string()
    } else {
        end.code.description().to_owned()
    };
    Status::error(description)
}

/// The call span of a call a retrying layer makes several attempts: made
/// by its first attempt, ended when the call is over with the last
/// attempt's status.
struct CallSpan {
    context: Context,
    last: Mutex<Option<Status>>,
}

impl CallSpan {
    fn of(attempt: &CallAttempt, start: impl FnOnce() -> Context) -> CallValue<Self> {
        attempt.call().value(|| {
            let end: Box<dyn FnOnce(&CallSpan) + Send> = Box::new(|call: &CallSpan| {
                let last = call
                    .last
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
                end_span(&call.context, last.unwrap_or(Status::Unset));
            });
            (
                CallSpan {
                    context: start(),
                    last: Mutex::new(None),
                },
                Some(end),
            )
        })
    }

    fn attempt_ended(&self, status: Status) {
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(status);
    }
}

fn end_span(cx: &Context, status: Status) {
    let span = cx.span();
    span.set_status(status);
    span.end();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn span_names_follow_grpc_go() {
        assert_eq!(
            span_name("Sent.", "/grpc.testing.TestService/UnaryCall"),
            "Sent.grpc.testing.TestService.UnaryCall"
        );
        assert_eq!(span_name("Recv.", "pkg.S/M"), "Recv.pkg.S.M");
    }
}
