//! gRFC A66's metrics as a [`StatsHandler`].

mod attrs;
mod builder;
mod instruments;

use std::fmt;
use std::sync::Arc;

use opentelemetry::InstrumentationScope;
use opentelemetry::metrics::MeterProvider;

use crate::stats::{RpcEvent, RpcInfo, Side, StatsHandler};
use attrs::{MethodAttrs, MethodTable};
pub use builder::{OtelMetricsBuilder, OtelMetricsError};
use instruments::{ClientInstruments, ServerInstruments};

/// gRPC's OpenTelemetry metrics (gRFC A66) for tonic servers and clients.
///
/// On a server layer it records, per RPC:
///
/// | instrument | kind, unit | attributes |
/// |---|---|---|
/// | `grpc.server.call.started` | counter, `{call}` | `grpc.method` |
/// | `grpc.server.call.duration` | histogram, `s` | `grpc.method`, `grpc.status` |
/// | `grpc.server.call.sent_total_compressed_message_size` | histogram, `By` | `grpc.method`, `grpc.status` |
/// | `grpc.server.call.rcvd_total_compressed_message_size` | histogram, `By` | `grpc.method`, `grpc.status` |
///
/// and on a client layer:
///
/// | instrument | kind, unit | attributes |
/// |---|---|---|
/// | `grpc.client.attempt.started` | counter, `{attempt}` | `grpc.method`, `grpc.target` |
/// | `grpc.client.attempt.duration` | histogram, `s` | `grpc.method`, `grpc.target`, `grpc.status` |
/// | `grpc.client.attempt.sent_total_compressed_message_size` | histogram, `By` | `grpc.method`, `grpc.target`, `grpc.status` |
/// | `grpc.client.attempt.rcvd_total_compressed_message_size` | histogram, `By` | `grpc.method`, `grpc.target`, `grpc.status` |
/// | `grpc.client.call.duration` | histogram, `s` | `grpc.method`, `grpc.target`, `grpc.status` |
///
/// - Histograms carry A66's bucket boundaries as advice (latency 0 to
///   100 s, sizes 0 to 4 GiB); an SDK view can replace them.
/// - `grpc.method` is the method without its leading `/`
///   (`pkg.Service/Method`) for registered methods and `other` for the
///   rest (see [`OtelMetricsBuilder`]); `grpc.status` is the code the
///   application saw ([`End::code`](crate::stats::End::code)) by its
///   gRPC name (`OK`, `CANCELLED`, `DEADLINE_EXCEEDED`, ...);
///   `grpc.target` is [`OtelMetricsBuilder::with_target`].
/// - Sizes add up the messages' lengths as sent (compressed when
///   compressed), without gRPC's 5-byte prefixes or any metadata.
/// - tonic has no retries or hedging: a client call is exactly one
///   attempt, so `grpc.client.attempt.*` and `grpc.client.call.duration`
///   measure the same span, from the client layer's `Begin` to its `End`.
/// - The meter is `tonic-hotpath` with the crate's version, from the
///   provider given to [`builder`](Self::builder); there is no fallback on
///   a global provider (A66).
///
/// The handler works on either side (it reads [`RpcInfo::side`]), so one
/// instance may be shared by a server and a client layer. It asks for no
/// payload times. Per RPC it looks its method up once and keeps the
/// method's attribute sets, built in advance, in its [`MetricsRpcState`]:
/// recording allocates nothing in this crate.
///
/// A server and a client over 127.0.0.1, their metrics read back from the
/// SDK's in-memory exporter:
///
/// ```
/// use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
/// use tonic_health::pb::health_client::HealthClient;
/// use tonic_health::pb::{HealthCheckRequest, health_server::SERVICE_NAME};
/// use tonic_hotpath::stats::CombinedLayer;
/// use tonic_hotpath::stats::otel::OtelMetrics;
///
/// #[tokio::main(flavor = "current_thread")]
/// async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
///     let exporter = InMemoryMetricExporter::default();
///     let provider = SdkMeterProvider::builder()
///         .with_reader(PeriodicReader::builder(exporter.clone()).build())
///         .build();
///
///     // Server: the health service's methods are recorded by name.
///     let metrics = OtelMetrics::builder(&provider).with_service(SERVICE_NAME).build()?;
///     let layer = CombinedLayer::server().with(metrics);
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
///     // Client: the same registration, and the target it dials.
///     let target = format!("http://{addr}");
///     let metrics = OtelMetrics::builder(&provider)
///         .with_service(SERVICE_NAME)
///         .with_target(target.as_str())
///         .build()?;
///     let channel = tonic::transport::Endpoint::from_shared(target)?.connect().await?;
///     let layered = tower::ServiceBuilder::new()
///         .layer(CombinedLayer::client().with(metrics))
///         .service(channel);
///     HealthClient::new(layered).check(HealthCheckRequest::default()).await?;
///
///     provider.force_flush()?;
///     let names: Vec<String> = exporter
///         .get_finished_metrics()?
///         .iter()
///         .flat_map(|resource| resource.scope_metrics())
///         .flat_map(|scope| scope.metrics())
///         .map(|metric| metric.name().to_owned())
///         .collect();
///     assert!(names.iter().any(|name| name == "grpc.server.call.duration"));
///     assert!(names.iter().any(|name| name == "grpc.client.call.duration"));
///     Ok(())
/// }
/// ```
pub struct OtelMetrics {
    server: ServerInstruments,
    client: ClientInstruments,
    methods: MethodTable,
}

impl OtelMetrics {
    /// Starts configuring a handler whose instruments come from
    /// `provider`'s meter named `tonic-hotpath` (with the crate's version).
    pub fn builder<P: MeterProvider + ?Sized>(provider: &P) -> OtelMetricsBuilder {
        let scope = InstrumentationScope::builder(env!("CARGO_PKG_NAME"))
            .with_version(env!("CARGO_PKG_VERSION"))
            .build();
        OtelMetricsBuilder::new(provider.meter_with_scope(scope))
    }
}

impl fmt::Debug for OtelMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OtelMetrics")
            .field("registered_methods", &self.methods.registered_len())
            .field("learned_methods", &self.methods.learned_len())
            .field("services", &self.methods.services().collect::<Vec<_>>())
            .field("method_filter", &self.methods.has_filter())
            .field("target", self.methods.target())
            .finish_non_exhaustive()
    }
}

/// [`OtelMetrics`]' per-RPC state: the method's attribute sets and the
/// message bytes sent and received so far. Stored inline by the layer
/// (it is the handler's [`StatsHandler::RpcState`]); nothing to build by
/// hand.
///
/// ```
/// use tonic_hotpath::stats::StatsHandler;
/// use tonic_hotpath::stats::otel::{MetricsRpcState, OtelMetrics};
///
/// fn state_of<H: StatsHandler<RpcState = MetricsRpcState>>(_: &H) {}
/// # let metrics = OtelMetrics::builder(&opentelemetry::metrics::NoopMeterProvider::new()).build().unwrap();
/// state_of(&metrics);
/// ```
#[derive(Default)]
pub struct MetricsRpcState {
    /// `None` only for a state the layer made without `tag_rpc`.
    rpc: Option<(Side, Arc<MethodAttrs>)>,
    sent: u64,
    rcvd: u64,
}

impl fmt::Debug for MetricsRpcState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetricsRpcState")
            .field("side", &self.rpc.as_ref().map(|(side, _)| side))
            .field("sent", &self.sent)
            .field("rcvd", &self.rcvd)
            .finish_non_exhaustive()
    }
}

impl StatsHandler for OtelMetrics {
    type RpcState = MetricsRpcState;
    type ConnState = ();
    const PAYLOAD_TIMES: bool = false;

    fn tag_rpc(&self, info: &RpcInfo<'_>, _conn: Option<&()>) -> MetricsRpcState {
        MetricsRpcState {
            rpc: Some((info.side, self.methods.attrs(info.method))),
            sent: 0,
            rcvd: 0,
        }
    }

    fn handle_rpc(&self, state: &mut MetricsRpcState, event: &RpcEvent<'_>) {
        let Some((side, attrs)) = &state.rpc else {
            return;
        };
        match event {
            RpcEvent::Begin { .. } => {
                let started = match side {
                    Side::Server => &self.server.started,
                    Side::Client => &self.client.attempt_started,
                };
                started.add(1, attrs.started(*side));
            }
            RpcEvent::OutPayload(payload) => {
                state.sent = state.sent.saturating_add(u64::from(payload.length));
            }
            RpcEvent::InPayload(payload) => {
                state.rcvd = state.rcvd.saturating_add(u64::from(payload.length));
            }
            RpcEvent::End(end) => {
                let seconds = end
                    .end_time
                    .saturating_duration_since(end.begin_time)
                    .as_secs_f64();
                let set = attrs.ended(*side, end.code);
                match side {
                    Side::Server => {
                        self.server.duration.record(seconds, set);
                        self.server.sent.record(state.sent, set);
                        self.server.rcvd.record(state.rcvd, set);
                    }
                    Side::Client => {
                        self.client.attempt_duration.record(seconds, set);
                        self.client.attempt_sent.record(state.sent, set);
                        self.client.attempt_rcvd.record(state.rcvd, set);
                        // One attempt per call (tonic has no retries).
                        self.client.call_duration.record(seconds, set);
                    }
                }
            }
            _ => {}
        }
    }
}
