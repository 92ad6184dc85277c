//! [`OtelMetricsBuilder`]: which methods are recorded as they are, the
//! client's target, the tenant attribute, and the meter the instruments
//! come from.

use std::fmt;
use std::sync::Arc;

use opentelemetry::metrics::Meter;

use super::OtelMetrics;
use super::attrs::OTHER;
use super::instruments::{ClientInstruments, ServerInstruments};
use super::methods::{MethodTable, NameFilter, service_of};
#[cfg(feature = "tenant")]
use super::tenant_attribute::TenantAttribute;
#[cfg(feature = "tenant")]
use super::tenants::TenantTable;

/// The bound on learned methods, by default.
const DEFAULT_MAX_LEARNED_METHODS: usize = 1000;

/// Configures an [`OtelMetrics`] handler; made by [`OtelMetrics::builder`].
///
/// A66 records methods that were not registered as `other`, so that
/// clients sending arbitrary method names cannot blow up the number of
/// time series. Register the methods to record by name with
/// [`with_method`](Self::with_method) (full paths) or
/// [`with_service`](Self::with_service) (every method of a service, e.g.
/// the generated `SERVICE_NAME` constant), or let a closure decide with
/// [`with_method_filter`](Self::with_method_filter).
///
/// ```
/// use opentelemetry::metrics::NoopMeterProvider;
/// use tonic_hotpath::otel::OtelMetrics;
///
/// let metrics = OtelMetrics::builder(&NoopMeterProvider::new())
///     // Every method of a generated service...
///     .with_service(tonic_health::pb::health_server::SERVICE_NAME)
///     // ... or single methods,
///     .with_method("/pkg.Greeter/Hello")
///     // ... or whatever a closure accepts.
///     .with_method_filter(|path: &str| path.starts_with("/internal."))
///     // The client's `grpc.target`.
///     .with_target("http://greeter.internal:50051")
///     .build()?;
/// # let _ = metrics;
/// # Ok::<(), tonic_hotpath::otel::OtelMetricsError>(())
/// ```
#[must_use = "a builder does nothing until `build` is called"]
pub struct OtelMetricsBuilder {
    meter: Meter,
    /// Whether the meter's provider is known to bind (`bound`).
    binds: bool,
    methods: Vec<String>,
    services: Vec<String>,
    method_filter: Option<NameFilter>,
    target: Option<String>,
    target_filter: Option<NameFilter>,
    max_learned_methods: usize,
    #[cfg(feature = "tenant")]
    tenant: Option<TenantAttribute>,
}

impl OtelMetricsBuilder {
    pub(super) fn new(meter: Meter, binds: bool) -> Self {
        Self {
            meter,
            binds,
            methods: Vec::new(),
            services: Vec::new(),
            method_filter: None,
            target: None,
            target_filter: None,
            max_learned_methods: DEFAULT_MAX_LEARNED_METHODS,
            #[cfg(feature = "tenant")]
            tenant: None,
        }
    }

    /// Records `method` as it is: a full method path, `/pkg.Service/Method`
    /// (the leading `/` may be left out). Its attribute sets are built
    /// now, so its RPCs cost a map look-up and nothing more.
    pub fn with_method(mut self, method: impl Into<String>) -> Self {
        self.methods.push(method.into());
        self
    }

    /// Records each of `methods` as it is (see
    /// [`with_method`](Self::with_method)).
    pub fn with_methods<I>(mut self, methods: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        self.methods.extend(methods.into_iter().map(Into::into));
        self
    }

    /// Records every method of `service` as it is: `pkg.Service`, as in a
    /// generated server's `SERVICE_NAME` or its `NamedService::NAME`.
    ///
    /// The handler sees paths, not the methods a generated server
    /// implements, so such a method is learned (gets its own attribute
    /// sets) on the first RPC that shows it is real:
    ///
    /// - on a client, its first RPC (the application chooses what it
    ///   calls);
    /// - on a server, the first RPC whose service read a request message
    ///   or answered with gRPC response headers that are not
    ///   trailers-only.
    ///   A made-up method under the service (answered `UNIMPLEMENTED`
    ///   trailers-only by tonic's generated code), a call refused by a
    ///   layer inside the stats layer, and a call the client cancels
    ///   before either happens prove nothing: they are recorded as
    ///   `other` and leave nothing in the handler, whatever a client
    ///   sends first. See [`OtelMetrics`] for when such RPCs are counted
    ///   as started.
    ///
    /// Register full method paths with [`with_method`](Self::with_method)
    /// where they are known: they need no proof.
    pub fn with_service(mut self, service: impl Into<String>) -> Self {
        self.services.push(service.into());
        self
    }

    /// Records a method that is not registered as it is when `filter`
    /// returns `true` for its full path (`/pkg.Service/Method`), A66's
    /// override for generic methods. Such methods are learned as those of
    /// a registered service are ([`with_service`](Self::with_service):
    /// on a server, once an RPC proves the method is served). Called for
    /// RPCs to methods that are neither registered nor learned, at most
    /// once per RPC.
    pub fn with_method_filter<F>(mut self, filter: F) -> Self
    where
        F: Fn(&str) -> bool + Send + Sync + 'static,
    {
        self.method_filter = Some(Arc::new(filter));
        self
    }

    /// How many methods learned through [`with_service`](Self::with_service)
    /// or [`with_method_filter`](Self::with_method_filter) keep their own
    /// attribute sets (default 1000); once that many are learned, further
    /// methods are recorded as `other`. A safety bound on the handler's memory and on
    /// the number of time series: a server learns only methods it was
    /// seen to serve, so a client cannot fill it with made-up names, but
    /// a server that answers any path (a proxy, a generic handler
    /// accepted by the filter) or a client calling many methods can.
    pub fn with_max_learned_methods(mut self, max: usize) -> Self {
        self.max_learned_methods = max;
        self
    }

    /// The client's `grpc.target`: the URI the channel was made for, e.g.
    /// `http://greeter.internal:50051` (A66: the canonical target URI). The
    /// handler cannot see the channel, so without this the client records
    /// `other`. The server records no target.
    pub fn with_target(mut self, target: impl Into<String>) -> Self {
        self.target = Some(target.into());
        self
    }

    /// Records the target as `other` unless `filter` returns `true` for it
    /// (A66's target filter, against targets such as raw IP addresses that
    /// would multiply the time series). Called once, by
    /// [`build`](Self::build).
    pub fn with_target_filter<F>(mut self, filter: F) -> Self
    where
        F: Fn(&str) -> bool + Send + Sync + 'static,
    {
        self.target_filter = Some(Arc::new(filter));
        self
    }

    /// Adds each RPC's tenant (its `x-scope-orgid`) to every measurement,
    /// the tenants recorded by name chosen by `tenant`'s guard (an
    /// allow-list or the first tenants seen) and every other valid tenant
    /// recorded as `other`. Off by default: without it the handler records
    /// no tenant and reads no header. See [`TenantAttribute`] for the
    /// values and when `*.started` is counted.
    ///
    /// Needs the `tenant` feature beside `otel` (it reads org ids as the
    /// [`tenant`](crate::tenant) module does); `otel` alone does not
    /// enable it.
    ///
    /// ```
    /// use opentelemetry::metrics::NoopMeterProvider;
    /// use tonic_hotpath::otel::{OtelMetrics, TenantAttribute};
    ///
    /// let metrics = OtelMetrics::builder(&NoopMeterProvider::new())
    ///     .with_service("pkg.Greeter")
    ///     .with_tenant_attribute(TenantAttribute::allow_list(["team-a", "team-b"]))
    ///     .build()?;
    /// # let _ = metrics;
    /// # Ok::<(), tonic_hotpath::otel::OtelMetricsError>(())
    /// ```
    #[cfg(feature = "tenant")]
    #[cfg_attr(docsrs, doc(cfg(all(feature = "otel", feature = "tenant"))))]
    pub fn with_tenant_attribute(mut self, tenant: TenantAttribute) -> Self {
        self.tenant = Some(tenant);
        self
    }

    /// Creates the instruments and the registered methods' attribute sets.
    ///
    /// # Errors
    ///
    /// [`OtelMetricsError`] when a registered method is not a full method
    /// path (`/pkg.Service/Method`), a service name is empty or contains
    /// `/`, or (feature `tenant`) the tenant attribute is refused (an
    /// allow-listed id that is not a valid single org id, more tenants
    /// than `TenantAttribute::MAX_TENANTS`, or a key that A66 uses).
    pub fn build(self) -> Result<OtelMetrics, OtelMetricsError> {
        let methods = self
            .methods
            .into_iter()
            .map(|method| {
                let path = if method.starts_with('/') {
                    method
                } else {
                    format!("/{method}")
                };
                match service_of(&path) {
                    Some(_) => Ok(path),
                    None => Err(OtelMetricsError::InvalidMethod(path)),
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(bad) = self
            .services
            .iter()
            .find(|service| service.is_empty() || service.contains('/'))
        {
            return Err(OtelMetricsError::InvalidService(bad.clone()));
        }
        let target = match (&self.target, &self.target_filter) {
            (Some(target), Some(filter)) if filter(target) => target.as_str(),
            (Some(target), None) => target.as_str(),
            _ => OTHER,
        };
        let table = MethodTable::new(
            methods,
            self.services,
            self.method_filter,
            self.max_learned_methods,
            target,
        );
        Ok(OtelMetrics {
            server: ServerInstruments::new(&self.meter, self.binds),
            client: ClientInstruments::new(&self.meter, self.binds),
            methods: table,
            #[cfg(feature = "tenant")]
            tenants: self.tenant.map(TenantTable::new).transpose()?,
        })
    }
}

impl fmt::Debug for OtelMetricsBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("OtelMetricsBuilder");
        debug
            .field("methods", &self.methods)
            .field("services", &self.services)
            .field("method_filter", &self.method_filter.is_some())
            .field("target", &self.target)
            .field("target_filter", &self.target_filter.is_some())
            .field("max_learned_methods", &self.max_learned_methods)
            .field("bound_instruments", &self.binds);
        #[cfg(feature = "tenant")]
        debug.field("tenant", &self.tenant);
        debug.finish_non_exhaustive()
    }
}

/// A method or service name given to [`OtelMetricsBuilder`] that names no
/// method or service, or a tenant attribute it cannot record.
///
/// ```
/// use opentelemetry::metrics::NoopMeterProvider;
/// use tonic_hotpath::otel::{OtelMetrics, OtelMetricsError};
///
/// let error = OtelMetrics::builder(&NoopMeterProvider::new())
///     .with_method("Hello")
///     .build()
///     .unwrap_err();
/// assert_eq!(error, OtelMetricsError::InvalidMethod("/Hello".to_owned()));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OtelMetricsError {
    /// Not a full method path `/pkg.Service/Method` (the path as given,
    /// with its leading `/`).
    InvalidMethod(String),
    /// An empty service name, or one containing `/`.
    InvalidService(String),
    /// An allow-listed tenant that is not a valid single org id (Cortex's
    /// tenant rules, no `|`), as given.
    #[cfg(feature = "tenant")]
    #[cfg_attr(docsrs, doc(cfg(all(feature = "otel", feature = "tenant"))))]
    InvalidTenant(String),
    /// More tenants to record by name than
    /// [`TenantAttribute::MAX_TENANTS`].
    #[cfg(feature = "tenant")]
    #[cfg_attr(docsrs, doc(cfg(all(feature = "otel", feature = "tenant"))))]
    TooManyTenants {
        /// How many were asked for.
        count: usize,
        /// The most allowed.
        max: usize,
    },
    /// A tenant attribute key that A66 already uses (`grpc.method`,
    /// `grpc.status`, `grpc.target`).
    #[cfg(feature = "tenant")]
    #[cfg_attr(docsrs, doc(cfg(all(feature = "otel", feature = "tenant"))))]
    TenantKeyTaken(String),
}

impl fmt::Display for OtelMetricsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OtelMetricsError::InvalidMethod(path) => write!(
                f,
                "`{path}` is not a full gRPC method path (`/pkg.Service/Method`)"
            ),
            OtelMetricsError::InvalidService(name) => write!(
                f,
                "`{name}` is not a gRPC service name (`pkg.Service`, no `/`)"
            ),
            #[cfg(feature = "tenant")]
            OtelMetricsError::InvalidTenant(id) => {
                write!(f, "`{id}` is not a valid single tenant (org id)")
            }
            #[cfg(feature = "tenant")]
            OtelMetricsError::TooManyTenants { count, max } => write!(
                f,
                "{count} tenants to record by name; at most {max} are allowed"
            ),
            #[cfg(feature = "tenant")]
            OtelMetricsError::TenantKeyTaken(key) => write!(
                f,
                "`{key}` is one of A66's attributes: choose another tenant attribute key"
            ),
        }
    }
}

impl std::error::Error for OtelMetricsError {}
