//! [`TenantLimitLayer`]: per-tenant admission control as a tower layer.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tower::{Layer, Service};

use super::config::Limits;
use super::future::{ResponseFuture, call_admitted};
use super::handle::LimitsHandle;
use super::keeper::{AnswerDue, Keeper};
use super::limiter::{Limiter, NotYet};
use super::map::Clock;
use super::observer::LimitObserver;
use super::refusal::Refusal;
use super::snapshot::Snapshot;
use crate::tenant::OrgId;
use crate::tenant::paths::{PathSet, names};

/// Per-tenant admission control: an in-flight limit and a rate limit per
/// tenant (`Server::builder().layer(TenantLimitLayer::new(limits))`).
///
/// A call over one of its tenant's limits is refused with
/// `RESOURCE_EXHAUSTED` naming the tenant and the limit (see
/// [`LimitError`](super::LimitError) for the exact text), as a
/// trailers-only response, without calling the inner service; plain HTTP
/// gets `429 Too Many Requests` with the same text. A rate refusal says
/// when the call would pass (`grpc-retry-pushback-ms`, `Retry-After`).
/// Other tenants are not affected. An admitted call of a tenant with a
/// [work rate](Limits::with_work_rate) carries a
/// [`TenantBudget`](super::TenantBudget) in its extensions, for the
/// service to charge. An admitted call holds an in-flight place until its
/// response body ends or is dropped: OK, error, cancel, deadline or reset.
///
/// The tenant is the one [`RequireOrgIdLayer`](crate::tenant::RequireOrgIdLayer)
/// validated when that layer is outside this one; otherwise this layer
/// reads `x-scope-orgid` itself, by the same rules and without copying it.
/// A call without a valid org id passes unlimited (refusing it is
/// `RequireOrgIdLayer`'s job, in either order). Federated `a|b` calls are
/// charged to every tenant named, and refused if any is over its limits
/// (see the [module docs](super)).
///
/// Clones of the layer, its services and its [`LimitsHandle`] share one
/// set of limits and tenant states; the builder methods below change that
/// shared configuration.
///
/// ```
/// use tonic_hotpath::limits::{Limits, Rate, TenantLimitLayer};
/// use tonic_hotpath::tenant::{OrgId, RequireOrgIdLayer};
///
/// let limits = TenantLimitLayer::new(
///     Limits::unlimited()
///         .with_max_in_flight(64)
///         .with_rate(Rate::new(100.0, 200)?),
/// )
/// .with_override(OrgId::new("big-tenant")?, Limits::unlimited().with_max_in_flight(256))
/// .only_methods(["/cortex.Ingester/Push"]);
/// let handle = limits.handle(); // change the limits at run time
/// let server = tonic::transport::Server::builder()
///     .layer(RequireOrgIdLayer::new())
///     .layer(limits);
/// # drop((server, handle));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
#[must_use = "a layer does nothing until it wraps a service"]
pub struct TenantLimitLayer {
    limiter: Arc<Limiter>,
}

impl fmt::Debug for TenantLimitLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TenantLimitLayer")
            .field("config", &self.limiter.config.load())
            .finish_non_exhaustive()
    }
}

impl TenantLimitLayer {
    /// A layer giving every tenant `defaults`.
    pub fn new(defaults: Limits) -> Self {
        Self {
            limiter: Arc::new(Limiter::new(Snapshot::new(defaults))),
        }
    }

    /// Gives `tenant` its own limits instead of the defaults (as
    /// [`LimitsHandle::set_override`] does at run time).
    pub fn with_override(self, tenant: OrgId, limits: Limits) -> Self {
        self.handle().set_override(tenant, limits);
        self
    }

    /// Limits only these request paths, exactly (`/package.Service/Method`
    /// for gRPC, e.g. `/cortex.Ingester/Push`; any path for plain HTTP);
    /// every other request passes uncounted. Adds to
    /// [`only_services`](Self::only_services); replaces an earlier list of
    /// methods. An empty list (of both) limits every request again.
    ///
    /// The tenant's limits and state are shared by all the limited
    /// methods; for other limits on other methods, stack a second layer.
    pub fn only_methods<I>(self, paths: I) -> Self
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let paths = names(paths);
        self.limiter.update(|config| {
            config
                .with(|next| next.scope = PathSet::with_paths(next.scope.as_deref(), paths.clone()))
        });
        self
    }

    /// Limits only calls to these gRPC services (full names,
    /// `package.Service`: all their methods), besides
    /// [`only_methods`](Self::only_methods); replaces an earlier list of
    /// services.
    pub fn only_services<I>(self, services: I) -> Self
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let services = names(services);
        self.limiter.update(|config| {
            config.with(|next| {
                next.scope = PathSet::with_services(next.scope.as_deref(), services.clone())
            })
        });
        self
    }

    /// Cortex's global strategy: the configured rates are for the whole
    /// service, shared by `replicas` replicas (see
    /// [`LimitsHandle::set_replicas`], to follow the count at run time).
    pub fn replicas(self, replicas: u32) -> Self {
        self.handle().set_replicas(replicas);
        self
    }

    /// Tracks at most `max` tenants on the default limits (default
    /// 10 000); tenants with an override are tracked on top. A new tenant
    /// beyond the cap shares one state (under the defaults) with the other
    /// such tenants until idle ones are evicted.
    pub fn max_tenants(self, max: usize) -> Self {
        self.limiter
            .update(|config| config.with(|next| next.max_tenants = max));
        self
    }

    /// How long a tenant's state may stay unused before it can be evicted
    /// (default 60 s): an idle tenant (no call in flight, full rate
    /// bucket) leaves after one to two idle timeouts without calls.
    /// Eviction loses nothing: an idle state is that of a new tenant.
    pub fn idle_timeout(self, timeout: Duration) -> Self {
        self.limiter
            .update(|config| config.with(|next| next.idle_timeout = timeout));
        self
    }

    /// Makes in-flight refusals carry a pushback of `after`: the
    /// `grpc-retry-pushback-ms` trailer (rounded up to whole
    /// milliseconds), `Retry-After` for plain HTTP (whole seconds, rounded
    /// up, at least 1). By default they carry none: no one knows when a
    /// place frees, and a client without a pushback retries on its own
    /// backoff. (Rate refusals always carry one: the time until the
    /// tenant's bucket admits the call.)
    ///
    /// ```
    /// use std::time::Duration;
    /// use tonic_hotpath::limits::{Limits, TenantLimitLayer};
    ///
    /// let layer = TenantLimitLayer::new(Limits::unlimited().with_max_in_flight(16))
    ///     .in_flight_pushback(Duration::from_millis(250));
    /// # drop(layer);
    /// ```
    pub fn in_flight_pushback(self, after: Duration) -> Self {
        self.limiter
            .update(|config| config.with(|next| next.in_flight_pushback = Some(after)));
        self
    }

    /// Reports every refusal to `observer` (replacing any earlier one),
    /// e.g. `LimitMetrics` (feature `otel`).
    pub fn observer(self, observer: impl LimitObserver) -> Self {
        let observer: Arc<dyn LimitObserver> = Arc::new(observer);
        self.limiter
            .update(|config| config.with(|next| next.observer = Some(Arc::clone(&observer))));
        self
    }

    /// Keeps the tenants' rates in `keeper` from now on (chosen once,
    /// as the layer is built: `shared`, feature `limits-redis`), and tells
    /// a shared keeper where to report the fleet's replica count.
    #[allow(
        dead_code,
        reason = "the shared half of the seam: used once a shared keeper is built in"
    )]
    pub(crate) fn keep_rates(self, keeper: Keeper) -> Self {
        let limiter = Arc::downgrade(&self.limiter);
        self.limiter
            .update(|config| config.with_keeper(keeper.clone()));
        if let Keeper::Shared(shared) = &keeper {
            shared.report_replicas(Box::new(move |replicas| {
                limiter
                    .upgrade()
                    .map(|limiter| limiter.set_replicas(replicas))
                    .is_some()
            }));
        }
        self
    }

    /// The limiter's clock.
    #[allow(
        dead_code,
        reason = "the shared half of the seam: used once a shared keeper is built in"
    )]
    pub(crate) fn clock(&self) -> &Clock {
        self.limiter.tenants.clock()
    }

    /// The handle to read and change the limits at run time.
    pub fn handle(&self) -> LimitsHandle {
        LimitsHandle {
            limiter: Arc::clone(&self.limiter),
        }
    }
}

impl<S> Layer<S> for TenantLimitLayer {
    type Service = TenantLimit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        TenantLimit {
            inner,
            limiter: Arc::clone(&self.limiter),
        }
    }
}

/// The service made by [`TenantLimitLayer`].
#[derive(Clone)]
pub struct TenantLimit<S> {
    inner: S,
    limiter: Arc<Limiter>,
}

impl<S: fmt::Debug> fmt::Debug for TenantLimit<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TenantLimit")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S> TenantLimit<S> {
    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// Unwraps the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

/// `S: Clone`, as tower's middleware that may call the inner service
/// later has it: a call that waits for its tenant's lease answer (feature
/// `limits-redis`) takes the inner service, ready, with it, and leaves a
/// clone in its place.
impl<S, ReqBody, ResBody> Service<http::Request<ReqBody>> for TenantLimit<S>
where
    S: Service<http::Request<ReqBody>, Response = http::Response<ResBody>> + Clone,
{
    type Response = http::Response<super::ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S, ReqBody>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    #[inline]
    fn call(&mut self, request: http::Request<ReqBody>) -> Self::Future {
        let mut budget = None;
        match self.limiter.admit_or_wait(&request, &mut budget) {
            Ok(slot) => match budget {
                None => ResponseFuture::inner(self.inner.call(request), slot),
                Some(budget) => call_admitted(&mut self.inner, request, slot, Some(budget)),
            },
            Err(NotYet::Refused(refused)) => {
                ResponseFuture::refused(Refusal::of(request.headers(), refused))
            }
            Err(NotYet::AnswerDue(answer)) => self.wait_for_answer(answer, request),
        }
    }
}

impl<S> TenantLimit<S> {
    /// A call that waits for its tenant's answer from a shared rate
    /// keeper, with the inner service (ready) in its future and a clone
    /// left here.
    #[cold]
    #[inline(never)]
    fn wait_for_answer<ReqBody>(
        &mut self,
        answer: AnswerDue,
        request: http::Request<ReqBody>,
    ) -> ResponseFuture<S, ReqBody>
    where
        S: Service<http::Request<ReqBody>> + Clone,
    {
        let clone = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, clone);
        ResponseFuture::answer_due(answer, ready, request, Arc::clone(&self.limiter))
    }
}
