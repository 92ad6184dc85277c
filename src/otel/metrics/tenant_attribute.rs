//! [`TenantAttribute`]: the opt-in tenant attribute of
//! [`OtelMetrics`](super::OtelMetrics): which tenants are recorded by
//! name (the cardinality guard), under which key.

use std::fmt;

use opentelemetry::Key;

/// Adds the tenant of each RPC, from its `x-scope-orgid`, to
/// [`OtelMetrics`](super::OtelMetrics)' measurements, under a cardinality
/// guard. Given to
/// [`OtelMetricsBuilder::with_tenant_attribute`](super::OtelMetricsBuilder::with_tenant_attribute);
/// without it the handler records no tenant.
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
#[derive(Clone)]
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
