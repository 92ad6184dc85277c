//! gRFC A66's metrics as a [`StatsHandler`].

mod append_only;
mod attrs;
mod bound;
mod builder;
mod call;
mod evidence;
mod instruments;
mod methods;
mod names;
mod state;
// The tenant attribute reads org ids: it needs the `tenant` feature beside
// `otel` (every item of this module is built with `otel` already).
#[cfg(feature = "tenant")]
mod tenant_attribute;
#[cfg(feature = "tenant")]
mod tenants;
mod unproven;

use std::fmt;

use opentelemetry::InstrumentationScope;
use opentelemetry::metrics::{Counter, MeterProvider};

use crate::stats::{End, RpcEvent, RpcInfo, Side, StatsHandler};
use attrs::Series;
use bound::Handle;
pub use builder::{OtelMetricsBuilder, OtelMetricsError};
use call::CallRecord;
use evidence::Evidence;
use instruments::{ClientInstruments, EndedHandles, ServerInstruments};
use methods::{MethodTable, RecordedMethod};
pub use state::MetricsRpcState;
use state::RpcMethod;
#[cfg(feature = "tenant")]
use state::RpcTenant;
#[cfg(feature = "tenant")]
pub use tenant_attribute::TenantAttribute;
#[cfg(feature = "tenant")]
use tenants::{RecordedTenant, TenantOf, TenantTable};
use unproven::UnprovenPath;

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
///   rest (see below and [`OtelMetricsBuilder`]); `grpc.status` is the code the
///   application saw ([`End::code`](crate::stats::End::code)) by its
///   gRPC name (`OK`, `CANCELLED`, `DEADLINE_EXCEEDED`, ...);
///   `grpc.target` is [`OtelMetricsBuilder::with_target`].
/// - Sizes add up the messages' lengths as sent (compressed when
///   compressed), without gRPC's 5-byte prefixes or any metadata.
/// - Attempts: tonic has no retries of its own, so without a retrying
///   layer a client call is one attempt, and `grpc.client.attempt.*` and
///   `grpc.client.call.duration` measure the same span, from the client
///   layer's `Begin` to its `End`. Below a
///   `retry::RetryLayer`, each attempt is an RPC of
///   the layer: `grpc.client.attempt.*` are recorded per attempt, and
///   `grpc.client.call.duration` once per call, from the call's start to
///   the end of its last attempt, with that attempt's status.
/// - The meter is `tonic-hotpath` with the crate's version, from the
///   provider given to [`builder`](Self::builder); there is no fallback on
///   a global provider (A66).
#[cfg_attr(
    feature = "tenant",
    doc = "- With the tenant attribute on (feature `tenant`,
  [`with_tenant_attribute`](OtelMetricsBuilder::with_tenant_attribute)),
  every instrument also carries `grpc.tenant` (see [`TenantAttribute`])."
)]
///
/// # Which methods have their own name
///
/// - Methods registered by full path
///   ([`with_method`](OtelMetricsBuilder::with_method)): always, on both
///   sides; their RPCs are counted as started at `Begin`.
/// - Methods of a registered service
///   ([`with_service`](OtelMetricsBuilder::with_service)) or accepted by
///   the filter ([`with_method_filter`](OtelMetricsBuilder::with_method_filter))
///   once learned, within
///   [`with_max_learned_methods`](OtelMetricsBuilder::with_max_learned_methods).
///   A client learns a method on its first RPC. A server learns it only
///   once an RPC proves that the server serves it: the inner service read
///   a request message (`InPayload`) or answered with gRPC response
///   headers (`content-type: application/grpc...`) that are not
///   trailers-only (`OutHeader`), which neither tonic's generated answer
///   to an unknown method (`UNIMPLEMENTED`, trailers-only, body unread)
///   nor a layer refusing the call (trailers-only, or a plain HTTP error)
///   does, nor a call the client cancels before either.
///   Until then, an RPC's `grpc.server.call.started` is deferred: counted
///   under the method's name when the RPC proves it, or at `End` as
///   `other` (under the method's name if another RPC proved it
///   meanwhile); its other measurements, recorded at `End`, follow. So
///   the first calls of such a method are counted as started when they
///   prove it, not when they begin; later calls at `Begin`. Made-up
///   method names cost a client nothing to send and the handler nothing
///   to keep: an unproven path lives only in its RPC's state.
/// - Everything else: `other`.
///
/// # Cost
///
/// The handler works on either side (it reads [`RpcInfo::side`]), so one
/// instance may be shared by a server and a client layer (they share the
/// learned methods and their bound). It asks for no payload times. Per
/// RPC it looks its method up once (one hash of the path, then atomic
/// loads: no lock, and no write to memory other RPCs use) and keeps a
/// handle to the method's attribute sets, built in advance, in its
/// [`MetricsRpcState`]: recording allocates nothing in this crate (an
/// unproven server RPC's path longer than 94 bytes is copied to the heap).
#[cfg_attr(
    feature = "tenant",
    doc = "The tenant attribute adds a scan of the request headers and one hash
of the id per RPC (see [`TenantAttribute`])."
)]
///
/// Each measurement then costs what the provider's instrument costs: the
/// SDK sorts, hashes and looks up its attribute set every time, unless it
/// records through bound instruments (below).
///
/// # Bound instruments (feature `otel-bound-instruments`)
///
/// With this feature, and when [`builder`](Self::builder) is given the
/// SDK's `SdkMeterProvider` (`opentelemetry_sdk` 0.33) itself, the handler
/// records through OpenTelemetry's bound instruments (`Counter::bind`,
/// experimental in 0.33): after an attribute set's first measurement on an
/// instrument, the handler binds the instrument to the set and records its
/// later measurements without the SDK's look-up. The feature turns the
/// SDK's bound support on (the application's `opentelemetry_sdk` 0.33 is
/// the same crate, its features unified). Any other provider, a
/// `&dyn MeterProvider` included (its type is not known), is recorded
/// with attribute sets, as without the feature: OpenTelemetry's default
/// `bind` drops every measurement, so the handler binds only where it
/// knows the provider binds. `Debug` shows which (`bound_instruments`).
///
/// The exports are the same either way, series by series: a series
/// appears on its first measurement, recorded as without binding, and is
/// bound only then (binding earlier would export zeros in cumulative
/// temporality). One difference, with delta temporality: the SDK forgets
/// an unbound series that had no measurement since the last collection,
/// freeing its slot under the cardinality limit, but keeps a bound series
/// (exporting nothing for it while idle). So near the cardinality limit a
/// new series may go to the SDK's overflow series where an unbound one
/// would have found a freed slot, and a set bound at the limit stays in
/// the overflow series. Binding allocates in the SDK, once per series;
/// the handles take about 3 KiB per method recorded by name (bound or
/// not), and with the tenant attribute about 50 bytes per method and
/// tenant plus 170 per status code seen.
///
/// A server and a client over 127.0.0.1, their metrics read back from the
/// SDK's in-memory exporter:
///
/// ```
/// use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
/// use tonic_health::pb::health_client::HealthClient;
/// use tonic_health::pb::{HealthCheckRequest, health_server::SERVICE_NAME};
/// use tonic_hotpath::stats::CombinedLayer;
/// use tonic_hotpath::otel::OtelMetrics;
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
    #[cfg(feature = "tenant")]
    tenants: Option<TenantTable>,
}

impl OtelMetrics {
    /// Starts configuring a handler whose instruments come from
    /// `provider`'s meter named `tonic-hotpath` (with the crate's version).
    ///
    /// With the feature `otel-bound-instruments`, an `SdkMeterProvider`
    /// given as itself (not as `&dyn MeterProvider`) is recorded through
    /// bound instruments (see [`OtelMetrics`], "Bound instruments").
    pub fn builder<P: MeterProvider + ?Sized>(provider: &P) -> OtelMetricsBuilder {
        let scope = InstrumentationScope::builder(env!("CARGO_PKG_NAME"))
            .with_version(env!("CARGO_PKG_VERSION"))
            .build();
        OtelMetricsBuilder::new(
            provider.meter_with_scope(scope),
            bound::provider_binds(provider),
        )
    }
}

impl fmt::Debug for OtelMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("OtelMetrics");
        debug
            .field("registered_methods", &self.methods.registered_len())
            .field("learned_methods", &self.methods.learned_len())
            .field("services", &self.methods.services().collect::<Vec<_>>())
            .field("method_filter", &self.methods.has_filter())
            .field("target", self.methods.target())
            .field("bound_instruments", &self.server.started.binds());
        #[cfg(feature = "tenant")]
        debug.field("tenant_attribute", &self.tenants);
        debug.finish_non_exhaustive()
    }
}

impl StatsHandler for OtelMetrics {
    type RpcState = MetricsRpcState;
    type ConnState = ();
    const PAYLOAD_TIMES: bool = false;

    fn tag_rpc(&self, info: &RpcInfo<'_>, _conn: Option<&()>) -> MetricsRpcState {
        MetricsRpcState {
            method: self.tag_method(info.side, info.method),
            #[cfg(feature = "tenant")]
            tenant: match self.tenants {
                Some(_) => RpcTenant::Awaiting,
                None => RpcTenant::Off,
            },
            start_deferred: false,
            sent: 0,
            rcvd: 0,
            call: match (info.side, info.attempt) {
                (Side::Client, Some(attempt)) => Some(CallRecord::of(attempt)),
                _ => None,
            },
        }
    }

    /// Records the RPC's measurements. On the server, the `Begin` of an
    /// RPC whose method is not yet proven (see "Which methods have their
    /// own name" on [`OtelMetrics`]) counts nothing: the RPC is counted
    /// as started when an `InPayload` or a gRPC `OutHeader` proves its
    /// method (under the method's name), or at `End` (as `other`, unless
    /// another RPC proved the method meanwhile). So the first calls of a
    /// method are counted as started when proven, not when they begin.
    /// With the tenant attribute, the same holds for a tenant a server may
    /// learn (see `TenantAttribute`), and a client counts an RPC as
    /// started at its `OutHeader`, which the layer delivers right after
    /// `Begin`.
    fn handle_rpc(&self, state: &mut MetricsRpcState, event: &RpcEvent<'_>) {
        if state.is_unsettled() && !self.settle(state, event) {
            return;
        }
        let RpcMethod::Known { side, method } = state.method else {
            return;
        };
        match event {
            RpcEvent::Begin { .. } => self.count_started(side, method, state),
            RpcEvent::OutPayload(payload) => {
                state.sent = state
                    .sent
                    .saturating_add(u64::from(payload.compressed_length));
            }
            RpcEvent::InPayload(payload) => {
                state.rcvd = state
                    .rcvd
                    .saturating_add(u64::from(payload.compressed_length));
            }
            RpcEvent::End(end) => {
                let seconds = end
                    .end_time
                    .saturating_duration_since(end.begin_time)
                    .as_secs_f64();
                let Series { attrs, handles } = self.ended_series(side, method, state, end);
                match side {
                    Side::Server => {
                        let (server, handles) = (&self.server, &handles.server);
                        server.duration.record(seconds, attrs, &handles.duration);
                        server.sent.record(state.sent, attrs, &handles.sent);
                        server.rcvd.record(state.rcvd, attrs, &handles.rcvd);
                    }
                    Side::Client => {
                        let (client, handles) = (&self.client, &handles.client);
                        client
                            .attempt_duration
                            .record(seconds, attrs, &handles.attempt_duration);
                        client
                            .attempt_sent
                            .record(state.sent, attrs, &handles.attempt_sent);
                        client
                            .attempt_rcvd
                            .record(state.rcvd, attrs, &handles.attempt_rcvd);
                        match state.call.take() {
                            // An attempt of a retried call: the call's
                            // duration is recorded once, at its end.
                            Some(call) => {
                                call.attempt_ended(client.call_duration.instrument(), attrs)
                            }
                            // A call of one attempt.
                            None => {
                                client
                                    .call_duration
                                    .record(seconds, attrs, &handles.call_duration)
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
}

impl OtelMetrics {
    /// How an RPC to `path` on `side` is recorded, from its `Begin`.
    #[inline]
    fn tag_method(&self, side: Side, path: &str) -> RpcMethod {
        let method = match self.methods.find(path) {
            Some(found) => found,
            None if self.methods.is_full() || !self.methods.accepts(path) => RecordedMethod::Other,
            // The application chooses the methods it calls.
            None if side == Side::Client => self.methods.learn(path),
            // A client chooses the paths it calls: wait for the server.
            None => return RpcMethod::Unproven(UnprovenPath::new(path)),
        };
        RpcMethod::Known { side, method }
    }

    /// Settles what `event` tells about an RPC whose method or tenant
    /// waits (see [`MetricsRpcState::is_unsettled`]), and counts its
    /// deferred `*.started` once both are settled. Returns whether `event`
    /// is then recorded as usual.
    fn settle(&self, state: &mut MetricsRpcState, event: &RpcEvent<'_>) -> bool {
        let Some(side) = state.side() else {
            return false;
        };
        match (event, side) {
            // The request headers: before `Begin` on a server, after it on
            // a client.
            #[cfg(feature = "tenant")]
            (RpcEvent::InHeader(headers), Side::Server)
            | (RpcEvent::OutHeader(headers), Side::Client) => {
                if let (RpcTenant::Awaiting, Some(tenants)) = (&state.tenant, &self.tenants) {
                    state.tenant = match tenants.tenant_of(headers, side) {
                        TenantOf::Recorded(tenant) => RpcTenant::Recorded(tenant),
                        TenantOf::Unknown(id) => RpcTenant::Unproven(id),
                    };
                }
            }
            (RpcEvent::Begin { .. }, _) => {
                #[cfg(feature = "tenant")]
                if side == Side::Server && matches!(state.tenant, RpcTenant::Awaiting) {
                    // No request headers came first (only a handler driven
                    // by hand skips them).
                    state.tenant = RpcTenant::Recorded(RecordedTenant::NoTenant);
                }
                if state.is_unsettled() {
                    state.start_deferred = true;
                    return false;
                }
                return true;
            }
            (RpcEvent::End(_), _) => self.settle_all(state, Evidence::Ended),
            (_, Side::Server) if Evidence::of(event) == Evidence::Served => {
                self.settle_all(state, Evidence::Served);
            }
            _ => {}
        }
        if state.start_deferred && !state.is_unsettled() {
            state.start_deferred = false;
            if let RpcMethod::Known { side, method } = state.method {
                self.count_started(side, method, state);
            }
        }
        true
    }

    /// Settles an unproven server method or tenant on `evidence`: under
    /// its name if it is proven, by this RPC (learning it, within its
    /// bound) or by another one; as `other` if not. A tenant still
    /// awaiting its headers at `End` names none.
    #[cold]
    fn settle_all(&self, state: &mut MetricsRpcState, evidence: Evidence) {
        if let RpcMethod::Unproven(path) = &state.method {
            let path = path.as_str();
            let method = match (self.methods.find(path), evidence) {
                (Some(found), _) => found,
                (None, Evidence::Served) => self.methods.learn(path),
                (None, _) => RecordedMethod::Other,
            };
            state.method = RpcMethod::Known {
                side: Side::Server,
                method,
            };
        }
        #[cfg(feature = "tenant")]
        self.settle_tenant(state, evidence);
    }

    /// Settles an unproven server tenant on `evidence`, as
    /// [`settle_all`](Self::settle_all) does a method.
    #[cfg(feature = "tenant")]
    #[inline]
    fn settle_tenant(&self, state: &mut MetricsRpcState, evidence: Evidence) {
        let Some(tenants) = &self.tenants else {
            return;
        };
        match &state.tenant {
            RpcTenant::Unproven(id) => {
                let tenant = match (tenants.find(id.as_str()), evidence) {
                    (Some(found), _) => found,
                    (None, Evidence::Served) => tenants.learn(id.as_str()),
                    (None, _) => RecordedTenant::Other,
                };
                state.tenant = RpcTenant::Recorded(tenant);
            }
            RpcTenant::Awaiting => state.tenant = RpcTenant::Recorded(RecordedTenant::NoTenant),
            RpcTenant::Off | RpcTenant::Recorded(_) => {}
        }
    }

    /// Counts an RPC of `method` (and of `state`'s tenant) as started on
    /// `side`.
    #[inline]
    fn count_started(&self, side: Side, method: RecordedMethod, state: &MetricsRpcState) {
        let started = match side {
            Side::Server => &self.server.started,
            Side::Client => &self.client.attempt_started,
        };
        let Series { attrs, handles } = self.started_series(side, method, state);
        started.record(1, attrs, handles);
    }

    /// The attributes of `*.started` (with `state`'s tenant) and their
    /// handle.
    #[inline]
    fn started_series(
        &self,
        side: Side,
        method: RecordedMethod,
        state: &MetricsRpcState,
    ) -> Series<'_, Handle<Counter<u64>>> {
        #[cfg(feature = "tenant")]
        if let (Some(tenants), Some(tenant)) = (&self.tenants, state.tenant.recorded()) {
            return tenants.attrs(&self.methods, method, tenant).started(side);
        }
        #[cfg(not(feature = "tenant"))]
        let _ = state;
        self.methods.attrs(method).started(side)
    }

    /// The attributes of the measurements recorded at `end` (with
    /// `state`'s tenant) and their handles.
    #[inline]
    fn ended_series(
        &self,
        side: Side,
        method: RecordedMethod,
        state: &MetricsRpcState,
        end: &End<'_>,
    ) -> Series<'_, EndedHandles> {
        #[cfg(feature = "tenant")]
        if let (Some(tenants), Some(tenant)) = (&self.tenants, state.tenant.recorded()) {
            return tenants
                .attrs(&self.methods, method, tenant)
                .ended(side, end.code);
        }
        #[cfg(not(feature = "tenant"))]
        let _ = state;
        self.methods.attrs(method).ended(side, end.code)
    }
}
