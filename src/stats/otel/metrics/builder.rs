//! [`OtelMetricsBuilder`]: which methods are recorded as they are, the
//! client's target, and the meter the instruments come from.

use std::fmt;
use std::sync::Arc;

use opentelemetry::metrics::Meter;

use super::OtelMetrics;
use super::attrs::{MethodTable, NameFilter, OTHER, service_of};
use super::instruments::{ClientInstruments, ServerInstruments};

/// Methods first seen through a registered service or the method filter
/// whose attribute sets are kept, by default.
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
/// use tonic_hotpath::stats::otel::OtelMetrics;
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
/// # Ok::<(), tonic_hotpath::stats::otel::OtelMetricsError>(())
/// ```
#[must_use = "a builder does nothing until `build` is called"]
pub struct OtelMetricsBuilder {
    meter: Meter,
    methods: Vec<String>,
    services: Vec<String>,
    method_filter: Option<NameFilter>,
    target: Option<String>,
    target_filter: Option<NameFilter>,
    max_learned_methods: usize,
}

impl OtelMetricsBuilder {
    pub(super) fn new(meter: Meter) -> Self {
        Self {
            meter,
            methods: Vec::new(),
            services: Vec::new(),
            method_filter: None,
            target: None,
            target_filter: None,
            max_learned_methods: DEFAULT_MAX_LEARNED_METHODS,
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
    /// A method of a registered service is recognised by its path alone,
    /// so a client can make up method names under it (the service answers
    /// `UNIMPLEMENTED`); the attribute sets of at most
    /// [`with_max_learned_methods`](Self::with_max_learned_methods) such
    /// methods are kept, and methods first seen after that are `other`.
    /// Register full method paths with [`with_method`](Self::with_method)
    /// where they are known.
    pub fn with_service(mut self, service: impl Into<String>) -> Self {
        self.services.push(service.into());
        self
    }

    /// Records a method that is not registered as it is when `filter`
    /// returns `true` for its full path (`/pkg.Service/Method`), A66's
    /// override for generic methods. Called once per RPC to a method that
    /// is not registered; methods it accepts count toward
    /// [`with_max_learned_methods`](Self::with_max_learned_methods).
    pub fn with_method_filter<F>(mut self, filter: F) -> Self
    where
        F: Fn(&str) -> bool + Send + Sync + 'static,
    {
        self.method_filter = Some(Arc::new(filter));
        self
    }

    /// How many methods first seen through [`with_service`](Self::with_service)
    /// or [`with_method_filter`](Self::with_method_filter) keep their own
    /// attribute sets (default 1000); methods first seen after that are
    /// recorded as `other`, which bounds the number of time series a
    /// client can create.
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

    /// Creates the instruments and the registered methods' attribute sets.
    ///
    /// # Errors
    ///
    /// [`OtelMetricsError`] when a registered method is not a full method
    /// path (`/pkg.Service/Method`) or a service name is empty or
    /// contains `/`.
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
            server: ServerInstruments::new(&self.meter),
            client: ClientInstruments::new(&self.meter),
            methods: table,
        })
    }
}

impl fmt::Debug for OtelMetricsBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OtelMetricsBuilder")
            .field("methods", &self.methods)
            .field("services", &self.services)
            .field("method_filter", &self.method_filter.is_some())
            .field("target", &self.target)
            .field("target_filter", &self.target_filter.is_some())
            .field("max_learned_methods", &self.max_learned_methods)
            .finish_non_exhaustive()
    }
}

/// A method or service name given to [`OtelMetricsBuilder`] that names no
/// method or service.
///
/// ```
/// use opentelemetry::metrics::NoopMeterProvider;
/// use tonic_hotpath::stats::otel::{OtelMetrics, OtelMetricsError};
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
        }
    }
}

impl std::error::Error for OtelMetricsError {}
