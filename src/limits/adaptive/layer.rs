//! [`AdaptiveLimitLayer`]: a concurrency limit learned from latency, fair
//! by tenant, as a tower layer.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use arc_swap::ArcSwap;
use tower::{Layer, Service};

use super::admission::{Admission, Hook, Settings};
use super::body::ResponseBody;
use super::controller::Gradient;
use super::future::ResponseFuture;
use super::shares::Shares;
use super::status::{AdaptiveHandle, AdaptiveStatus};
use crate::limits::LimitObserver;
use crate::limits::overload::Refusal;
use crate::tenant::OrgId;
use crate::tenant::paths::{PathSet, names};

/// The gRPC health service: never shed by default.
const HEALTH: &str = "grpc.health.v1.Health";

/// Adaptive admission: a server-wide concurrency limit learned from the
/// latency of admitted calls (never told the capacity), shared fairly
/// among tenants (`Server::builder().layer(AdaptiveLimitLayer::new())`).
///
/// A call past the limit is refused at once, never queued: `UNAVAILABLE`
/// with a `grpc-retry-pushback-ms` (retryable on another replica), as a
/// trailers-only response, the inner service not called; plain HTTP gets
/// `503` with `Retry-After` (see [`OverloadError`](crate::limits::OverloadError)).
/// At the limit, a tenant within its fair share (the limit split among the
/// tenants with calls in flight, by weight) is still admitted: only
/// tenants holding their share or more are refused. A call whose deadline
/// (`grpc-timeout`) is shorter than calls' current latency is refused at
/// once. Health checks are never shed; [shed-first](Self::shed_first_methods)
/// methods are refused first. See the [module docs](super) for the
/// controller.
///
/// Clones of the layer, its services and its [`AdaptiveHandle`] share one
/// limit and one set of tenants; the builder methods below start a fresh
/// one (call them before serving: services made earlier keep the old).
///
/// ```
/// use tonic_hotpath::limits::{AdaptiveLimitLayer, Gradient};
/// use tonic_hotpath::tenant::OrgId;
///
/// let adaptive = AdaptiveLimitLayer::new()
///     .gradient(Gradient::default().initial_limit(32))
///     .tenant_weight(OrgId::new("big-tenant")?, 4)
///     .shed_first_methods(["/cortex.Ingester/Flush"]);
/// let handle = adaptive.handle(); // the limit, calls in flight, latency
/// let server = tonic::transport::Server::builder().layer(adaptive);
/// assert_eq!(handle.status().limit, 32);
/// # drop(server);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
#[must_use = "a layer does nothing until it wraps a service"]
pub struct AdaptiveLimitLayer {
    config: Config,
    /// The shared state, made afresh by each builder method; handles read
    /// it through this cell, services hold the state in it when made.
    admission: Arc<ArcSwap<Admission>>,
}

/// What the builder methods set; the shared state is rebuilt from it.
#[derive(Clone)]
struct Config {
    gradient: Gradient,
    never_shed: Option<Arc<PathSet>>,
    shed_first: Option<Arc<PathSet>>,
    shed_first_fraction: f64,
    weights: HashMap<Box<str>, u32>,
    default_weight: u32,
    max_tenants: usize,
    idle_timeout: Duration,
    hooks: Vec<Hook>,
    observer: Option<Arc<dyn LimitObserver>>,
}

impl Config {
    fn build(&self) -> Arc<Admission> {
        let settings = Settings {
            gradient: self.gradient,
            never_shed: self.never_shed.clone(),
            shed_first: self.shed_first.clone(),
            shed_first_fraction: self.shed_first_fraction,
            idle_timeout: self.idle_timeout,
            observer: self.observer.clone(),
        };
        let shares = Shares::new(self.weights.clone(), self.default_weight, self.max_tenants);
        Arc::new(Admission::new(settings, shares, self.hooks.clone()))
    }
}

impl fmt::Debug for AdaptiveLimitLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptiveLimitLayer")
            .field("gradient", &self.config.gradient)
            .field("status", &self.handle().status())
            .finish_non_exhaustive()
    }
}

impl Default for AdaptiveLimitLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl AdaptiveLimitLayer {
    /// A layer with the default [`Gradient`], every tenant weighing 1, and
    /// the gRPC health service never shed.
    pub fn new() -> Self {
        let config = Config {
            gradient: Gradient::default(),
            never_shed: PathSet::with_services(None, names([HEALTH])),
            shed_first: None,
            shed_first_fraction: 0.8,
            weights: HashMap::new(),
            default_weight: 1,
            max_tenants: 10_000,
            idle_timeout: Duration::from_secs(60),
            hooks: Vec::new(),
            observer: None,
        };
        let admission = Arc::new(ArcSwap::new(config.build()));
        Self { config, admission }
    }

    fn with(mut self, change: impl FnOnce(&mut Config)) -> Self {
        change(&mut self.config);
        self.admission.store(self.config.build());
        self
    }

    /// The controller's parameters.
    pub fn gradient(self, gradient: Gradient) -> Self {
        self.with(|config| config.gradient = gradient)
    }

    /// `tenant` weighs `weight` (default 1; at least 1): at the limit its
    /// fair share is `limit × weight ÷` the summed weight of the tenants
    /// with calls in flight.
    pub fn tenant_weight(self, tenant: OrgId, weight: u32) -> Self {
        self.with(|config| {
            config
                .weights
                .insert(Box::from(tenant.as_str()), weight.max(1));
        })
    }

    /// These request paths (`/package.Service/Method`) are never refused
    /// (their calls still count in flight); replaces an earlier list of
    /// paths. The gRPC health service (`grpc.health.v1.Health`) is never
    /// shed unless [`never_shed_services`](Self::never_shed_services)
    /// replaces it.
    pub fn never_shed_methods<I>(self, paths: I) -> Self
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let paths = names(paths);
        self.with(|config| {
            config.never_shed = PathSet::with_paths(config.never_shed.as_deref(), paths);
        })
    }

    /// These gRPC services (`package.Service`) are never refused;
    /// replaces an earlier list of services (the default: the health
    /// service).
    pub fn never_shed_services<I>(self, services: I) -> Self
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let services = names(services);
        self.with(|config| {
            config.never_shed = PathSet::with_services(config.never_shed.as_deref(), services);
        })
    }

    /// Calls to these request paths (batch work) are refused first: once
    /// the calls in flight reach [a fraction](Self::shed_first_below) of
    /// the limit, whatever their tenant's share. Replaces an earlier list
    /// of paths.
    pub fn shed_first_methods<I>(self, paths: I) -> Self
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let paths = names(paths);
        self.with(|config| {
            config.shed_first = PathSet::with_paths(config.shed_first.as_deref(), paths);
        })
    }

    /// Calls to these gRPC services are refused first (see
    /// [`shed_first_methods`](Self::shed_first_methods)).
    pub fn shed_first_services<I>(self, services: I) -> Self
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let services = names(services);
        self.with(|config| {
            config.shed_first = PathSet::with_services(config.shed_first.as_deref(), services);
        })
    }

    /// The fraction of the limit from which shed-first calls are refused
    /// (default 0.8; clamped to 0–1).
    pub fn shed_first_below(self, fraction: f64) -> Self {
        let fraction = if fraction.is_finite() {
            fraction.clamp(0.0, 1.0)
        } else {
            0.8
        };
        self.with(|config| config.shed_first_fraction = fraction)
    }

    /// Tracks at most `max` tenants without a weight of their own
    /// (default 10 000); beyond, new tenants share one place in the fair
    /// split until idle ones are evicted.
    pub fn max_tenants(self, max: usize) -> Self {
        self.with(|config| config.max_tenants = max)
    }

    /// How long a tenant without calls stays tracked (default 60 s): it
    /// leaves after one to two idle timeouts.
    pub fn idle_timeout(self, timeout: Duration) -> Self {
        self.with(|config| config.idle_timeout = timeout)
    }

    /// Calls `hook` with the status after each window (about every
    /// 100 ms while calls end), on the thread of the call that closed
    /// it: keep it short. Hooks add up.
    pub fn on_window(self, hook: impl Fn(&AdaptiveStatus) + Send + Sync + 'static) -> Self {
        let hook = Arc::new(hook);
        self.with(|config| config.hooks.push(hook))
    }

    /// Reports every refusal to `observer`
    /// ([`LimitObserver::on_overloaded`]; replacing any earlier one), e.g.
    /// `LimitMetrics` (feature `otel`), which counts them by tenant and
    /// reason.
    pub fn observer(self, observer: impl LimitObserver) -> Self {
        let observer: Arc<dyn LimitObserver> = Arc::new(observer);
        self.with(|config| config.observer = Some(observer))
    }

    /// Publishes the utilization (calls in flight ÷ the limit, after each
    /// window) as the ORCA `application_utilization` of `recorder`
    /// (feature `orca`), so that weighted round robin steers calls away
    /// from this replica before it sheds them.
    #[cfg(feature = "orca")]
    pub fn report_utilization(self, recorder: crate::orca::ServerMetricsRecorder) -> Self {
        self.on_window(move |status| recorder.set_application_utilization(status.utilization()))
    }

    /// The cell holding the shared state.
    #[cfg(feature = "otel")]
    pub(crate) fn cell(&self) -> &Arc<ArcSwap<Admission>> {
        &self.admission
    }

    /// The handle to read the limit, calls in flight and latency.
    pub fn handle(&self) -> AdaptiveHandle {
        AdaptiveHandle::new(Arc::clone(&self.admission))
    }
}

impl<S> Layer<S> for AdaptiveLimitLayer {
    type Service = AdaptiveLimit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        AdaptiveLimit {
            inner,
            admission: self.admission.load_full(),
        }
    }
}

/// The service made by [`AdaptiveLimitLayer`].
#[derive(Clone)]
pub struct AdaptiveLimit<S> {
    inner: S,
    admission: Arc<Admission>,
}

impl<S: fmt::Debug> fmt::Debug for AdaptiveLimit<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptiveLimit")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S> AdaptiveLimit<S> {
    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// Unwraps the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, ReqBody, ResBody> Service<http::Request<ReqBody>> for AdaptiveLimit<S>
where
    S: Service<http::Request<ReqBody>, Response = http::Response<ResBody>>,
{
    type Response = http::Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    #[inline]
    fn call(&mut self, request: http::Request<ReqBody>) -> Self::Future {
        match self.admission.admit(&request) {
            Ok(place) => ResponseFuture::inner(self.inner.call(request), Some(place)),
            Err(refused) => {
                self.admission.observe(&refused);
                ResponseFuture::refused(Refusal::of(request.headers(), refused))
            }
        }
    }
}
