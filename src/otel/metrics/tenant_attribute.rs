//! [`TenantAttribute`]: the opt-in tenant attribute of
//! [`OtelMetrics`](super::OtelMetrics): which tenants are recorded by
//! name (the cardinality guard), under which key.

use std::fmt;

use opentelemetry::Key;

/// Adds the tenant of each RPC, from its `x-scope-orgid`, to
/// [`OtelMetrics`](super::OtelMetrics)' measurements, under a cardinality
/// guard. Given to
/// [`OtelMetricsBuilder::with_tenant_attribute`](super::OtelMetricsBuilder::with_tenant_attribute);
/// without it the handler records no tenant (off by default). Needs the
/// `tenant` feature beside `otel`.
///
/// The guard decides which tenants are recorded by name; every other
/// valid tenant is recorded as `other`:
///
/// - [`allow_list`](Self::allow_list): a fixed list.
/// - [`first_seen`](Self::first_seen): the first `max` distinct tenants
///   seen, learned as they come (on a server, once an RPC of the tenant
///   was served; see [`OtelMetrics`](super::OtelMetrics)).
///
/// The attribute's key is [`DEFAULT_KEY`](Self::DEFAULT_KEY),
/// `grpc.tenant`, unless [`with_key`](Self::with_key) names another
/// (Cortex and Mimir call the label `user`, Loki and Tempo `tenant`).
///
/// ```
/// use tonic_hotpath::otel::TenantAttribute;
///
/// // The tenants on a dashboard, by name; everyone else is `other`.
/// let known = TenantAttribute::allow_list(["team-a", "team-b"]);
/// // The first 50 tenants the handler sees, under Cortex's label name.
/// let first = TenantAttribute::first_seen(50).with_key("user");
/// # let _ = (known, first);
/// ```
///
/// # Values
///
/// With the attribute on, every measurement carries the RPC's tenant
/// under `grpc.tenant` ([`DEFAULT_KEY`](Self::DEFAULT_KEY), or the key
/// given), read from the request's `x-scope-orgid` in place with the
/// crate's zero-copy extraction ([`tenant::extract_from_headers`](crate::tenant::extract_from_headers)):
///
/// | `x-scope-orgid` | value |
/// |---|---|
/// | a valid tenant recorded by name: allow-listed, or among the first K seen | the id |
/// | any other valid tenant | `other` |
/// | several tenants, `a\|b` (federated), each valid | `other` |
/// | none, several headers, or an id that breaks the tenant rules | `""` (empty) |
///
/// - No tenant is the empty string, as gRPC's own optional labels have
///   it when they have no value (gRFC A78 `grpc.lb.locality`, A89
///   `grpc.lb.backend_service`): an empty org id is never valid, so it is
///   never a tenant's name, and Prometheus reads an empty label as no
///   label. An invalid id is not recorded as sent (anyone can send one);
///   `grpc.status` shows how the server answered it
///   (`UNAUTHENTICATED` / `INVALID_ARGUMENT` behind
///   [`RequireOrgIdLayer`](crate::tenant::RequireOrgIdLayer)).
/// - A federated RPC is no single tenant's: recording each member would
///   count it once per member, and recording the list would multiply the
///   time series past any guard. So it is `other`, with the tenants not
///   recorded by name (as is a tenant actually named `other`).
/// - Server: the tenant comes from `InHeader`, which comes before `Begin`,
///   so `grpc.server.call.started` carries it. With
///   [`first_seen`](Self::first_seen), a tenant is learned once an RPC of
///   it is served, the proof a method needs (see "Which methods have
///   their own name" on [`OtelMetrics`](super::OtelMetrics)): until then
///   its RPCs are counted as started when they prove it (under its name)
///   or at `End` (as `other`, unless another RPC proved it meanwhile). A
///   tenant whose calls a layer inside the stats layer refuses
///   (trailers-only) takes no place.
/// - Client: the tenant comes from `OutHeader`, the request headers as
///   sent (after every handler's
///   [`edit_request_headers`](crate::stats::StatsHandler::edit_request_headers)),
///   which follows `Begin` (grpc-go's order). So
///   `grpc.client.attempt.started` is counted at `OutHeader`, which the
///   layer delivers in the same call, right after `Begin`. A client learns
///   a first-seen tenant on its first RPC. Stamp the id outside the stats
///   layer ([`SetOrgIdLayer`](crate::tenant::SetOrgIdLayer) before
///   [`CombinedLayer::client`](crate::stats::CombinedLayer::client)) for
///   the layer to see it.
/// - Each (method, tenant) pair recorded has its own attribute sets,
///   built on its first RPC (each status code's on the first RPC ending
///   with it) and reused: no `KeyValue` is cloned and nothing allocated
///   per RPC after that. A tenant that is not recorded by name is kept
///   nowhere, so memory is bounded by the named tenants (at most
///   [`MAX_TENANTS`](Self::MAX_TENANTS)) times the methods recorded.
/// - Each named tenant multiplies the time series of every method and
///   status. The OpenTelemetry SDK folds the attribute sets past its
///   cardinality limit (2 000 per instrument by default; a view changes
///   it) into one `otel.metric.overflow` series: size K or the
///   allow-list with that in mind.
///
/// A server and clients for two tenants, one of them allow-listed:
///
/// ```
/// use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
/// use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
/// use tonic_health::pb::health_client::HealthClient;
/// use tonic_health::pb::{HealthCheckRequest, health_server::SERVICE_NAME};
/// use tonic_hotpath::stats::CombinedLayer;
/// use tonic_hotpath::otel::{OtelMetrics, TenantAttribute};
/// use tonic_hotpath::tenant::{OrgId, SetOrgIdLayer};
///
/// #[tokio::main(flavor = "current_thread")]
/// async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
///     let exporter = InMemoryMetricExporter::default();
///     let provider = SdkMeterProvider::builder()
///         .with_reader(PeriodicReader::builder(exporter.clone()).build())
///         .build();
///
///     let metrics = OtelMetrics::builder(&provider)
///         .with_service(SERVICE_NAME)
///         .with_tenant_attribute(TenantAttribute::allow_list(["team-a"]))
///         .build()?;
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
///     let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))?
///         .connect()
///         .await?;
///     for tenant in ["team-a", "team-b"] {
///         let layered = tower::ServiceBuilder::new()
///             .layer(SetOrgIdLayer::new(OrgId::new(tenant)?))
///             .service(channel.clone());
///         HealthClient::new(layered).check(HealthCheckRequest::default()).await?;
///     }
///
///     provider.force_flush()?;
///     let mut tenants = Vec::new();
///     for resource in exporter.get_finished_metrics()? {
///         for metric in resource.scope_metrics().flat_map(|scope| scope.metrics()) {
///             if let AggregatedMetrics::U64(MetricData::Sum(started)) = metric.data() {
///                 for point in started.data_points() {
///                     let tenant = point.attributes().find(|kv| kv.key.as_str() == "grpc.tenant");
///                     tenants.push((tenant.map(|kv| kv.value.to_string()), point.value()));
///                 }
///             }
///         }
///     }
///     tenants.sort();
///     assert_eq!(
///         tenants,
///         [(Some("other".to_owned()), 1), (Some("team-a".to_owned()), 1)]
///     );
///     Ok(())
/// }
/// ```
///
/// # Cost
///
/// The attribute adds a scan of the request headers for `x-scope-orgid`
/// and one hash of the id per RPC, then atomic loads; a server copies a
/// valid id it has not learned yet into the RPC's state while the RPC
/// proves it (to the heap past 38 bytes), only while
/// [`first_seen`](Self::first_seen) has room.
#[derive(Clone)]
#[cfg_attr(docsrs, doc(cfg(all(feature = "otel", feature = "tenant"))))]
#[must_use = "a tenant attribute does nothing until given to `OtelMetricsBuilder::with_tenant_attribute`"]
pub struct TenantAttribute {
    pub(super) key: Key,
    pub(super) guard: Guard,
}

/// Which tenants are recorded by name.
#[derive(Debug, Clone)]
pub(super) enum Guard {
    AllowList(Vec<String>),
    FirstSeen(usize),
}

impl TenantAttribute {
    /// The attribute's key unless [`with_key`](Self::with_key) names
    /// another: `grpc.tenant`, beside A66's `grpc.method`, `grpc.status`
    /// and `grpc.target` (exported to Prometheus as `grpc_tenant`).
    /// Neither gRPC nor OpenTelemetry's semantic conventions define a
    /// tenant attribute.
    pub const DEFAULT_KEY: &'static str = "grpc.tenant";

    /// The most tenants one handler records by name (an allow-list's
    /// length, or [`first_seen`](Self::first_seen)'s `max`). Each one is a
    /// time series per method and status code on every instrument: beyond
    /// this many, per-tenant series belong in a backend's own per-tenant
    /// accounting, not in request metrics.
    pub const MAX_TENANTS: usize = 10_000;

    /// Records the `tenants` listed by name, and every other valid tenant
    /// as `other`. Each must be a valid single org id (Cortex's tenant
    /// rules, no `|`);
    /// [`build`](super::OtelMetricsBuilder::build) says which is not.
    pub fn allow_list<I>(tenants: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        Self {
            key: Key::from_static_str(Self::DEFAULT_KEY),
            guard: Guard::AllowList(tenants.into_iter().map(Into::into).collect()),
        }
    }

    /// Records the first `max` distinct valid tenants by name as they are
    /// seen, and every later one as `other`. Nothing of a tenant past the
    /// bound is kept. A client learns a tenant on its first RPC (the
    /// application chooses the tenants it sends); a server once an RPC of
    /// the tenant is served, as it learns a method (see
    /// [`OtelMetrics`](super::OtelMetrics)), so a tenant whose calls a
    /// layer inside the stats layer refuses takes no place. Still, any
    /// client that reaches the service can take a place with a made-up id:
    /// where clients are not trusted with `x-scope-orgid`, prefer
    /// [`allow_list`](Self::allow_list).
    pub fn first_seen(max: usize) -> Self {
        Self {
            key: Key::from_static_str(Self::DEFAULT_KEY),
            guard: Guard::FirstSeen(max),
        }
    }

    /// Records the tenant under `key` instead of
    /// [`DEFAULT_KEY`](Self::DEFAULT_KEY). It must not be one of A66's
    /// attributes (`grpc.method`, `grpc.status`, `grpc.target`).
    pub fn with_key(mut self, key: impl Into<Key>) -> Self {
        self.key = key.into();
        self
    }
}

impl fmt::Debug for TenantAttribute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TenantAttribute")
            .field("key", &self.key.as_str())
            .field("guard", &self.guard)
            .finish()
    }
}
