//! The server layer that requires a valid org id: [`RequireOrgIdLayer`],
//! its service [`RequireOrgId`], and the service's [`ResponseFuture`] and
//! [`ResponseBody`].

use std::sync::Arc;
use std::task::{Context, Poll};

use tower::{Layer, Service};

use super::extract::{extract_owned_from_headers, extract_tenant_ids_from_headers};
use super::paths::{PathSet, names};
use super::refusal::Refusal;
use super::tenant_ids::TenantIds;
use crate::wire::org_id_error::OrgIdError;

mod body;
mod future;

pub use body::ResponseBody;
pub use future::ResponseFuture;

/// Requires a valid `x-scope-orgid` on every request
/// (`Server::builder().layer(RequireOrgIdLayer::new())`).
///
/// - missing → `UNAUTHENTICATED`; several headers, an invalid id, or several
///   tenants while multi-tenant ids are refused → `INVALID_ARGUMENT`. Each is
///   a trailers-only gRPC response ([`Status::into_http`](tonic::Status::into_http)) and the inner
///   service is not called. (A plain HTTP request gets a `401` instead: see
///   [Plain HTTP beside gRPC](#plain-http-beside-grpc).)
/// - valid → the request's [`TenantIds`] go into its extensions; handlers
///   read them with [`OrgIdRequestExt`](super::OrgIdRequestExt).
///
/// Responses carry a [`ResponseBody`] (the inner body, or the
/// refusal's), so the layer stacks above or below any other layer, whatever
/// body type that layer answers with.
///
/// Multi-tenant (federated `a|b`) ids are refused unless
/// [`allow_multi_tenant`](Self::allow_multi_tenant) is set. Services that
/// must answer without an org id (health checks, reflection) can be
/// [exempted](Self::exempt_services).
///
/// ```
/// use tonic_hotpath::tenant::RequireOrgIdLayer;
///
/// let builder = tonic::transport::Server::builder().layer(
///     RequireOrgIdLayer::new()
///         .allow_multi_tenant(true)
///         .exempt_services(["grpc.health.v1.Health"]),
/// );
/// # drop(builder);
/// ```
///
/// The exempt list can come from configuration at run time:
///
/// ```
/// use tonic_hotpath::tenant::RequireOrgIdLayer;
///
/// let from_config: Vec<String> = "grpc.health.v1.Health,grpc.reflection.v1.ServerReflection"
///     .split(',')
///     .map(String::from)
///     .collect();
/// let layer = RequireOrgIdLayer::new().exempt_services(&from_config);
/// # drop(layer);
/// ```
///
/// # Plain HTTP beside gRPC
///
/// A tonic server may serve plain HTTP routes too (axum routes with
/// `accept_http1(true)` and `Routes::from(axum_router)`). Such a request —
/// one whose `content-type` is neither gRPC (`application/grpc`,
/// `application/grpc+...`, `application/grpc;...`) nor grpc-web
/// (`application/grpc-web...`), or that has none, like a `GET` — is
/// checked by the same rules, and refused as dskit's HTTP middleware
/// `AuthenticateUser` refuses it: `401 Unauthorized`, whatever the
/// rule broken, with the error's text and a newline as a
/// `text/plain; charset=utf-8` body, and the inner service is not called.
/// A valid id puts its [`TenantIds`] into the extensions as for gRPC.
/// gRPC and grpc-web calls keep their gRPC status answer. The content type
/// is only read to answer a refusal, so accepted requests pay nothing for
/// it.
///
/// Paths that must answer without an org id (probes, a metrics scrape)
/// are [exempted](Self::exempt_paths) by exact path:
///
/// ```
/// use axum::routing::get;
/// use tonic::service::Routes;
/// use tonic_hotpath::tenant::RequireOrgIdLayer;
///
/// let routes = Routes::from(
///     axum::Router::new()
///         .route("/healthz", get(|| async { "ok" }))
///         .route("/api/v1/push", get(|| async { "pushed" })),
/// );
/// // routes.add_service(EchoServer::new(..)) serves gRPC beside them.
/// let router = tonic::transport::Server::builder()
///     .accept_http1(true)
///     .layer(RequireOrgIdLayer::new().exempt_paths(["/healthz", "/metrics"]))
///     .add_routes(routes);
/// // router.serve(addr)
/// # drop(router);
/// ```
#[derive(Debug, Clone, Default)]
#[must_use = "a layer does nothing until it wraps a service"]
pub struct RequireOrgIdLayer {
    allow_multi_tenant: bool,
    /// Exempt services and paths; `None` when there are none, so cloning
    /// the layer (and its services) stays free and the check is one branch.
    exemptions: Option<Arc<PathSet>>,
}

impl RequireOrgIdLayer {
    /// A layer that accepts exactly one tenant per request.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `a|b|c` ids naming several tenants are accepted (default: no).
    pub fn allow_multi_tenant(mut self, allow: bool) -> Self {
        self.allow_multi_tenant = allow;
        self
    }

    /// gRPC services (full names, `package.Service`) whose calls pass
    /// unchecked: no org id is required or read, and none is put into the
    /// extensions. Matched on the request path `/package.Service/Method`.
    ///
    /// Takes any list of names: `["a.B"]`, `&["a.B"]`, a `Vec<String>`
    /// read from configuration, ... The names are copied once, here; an
    /// empty list exempts nothing. Replaces any earlier list (of services;
    /// [exempt paths](Self::exempt_paths) are kept).
    pub fn exempt_services<I>(mut self, services: I) -> Self
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        self.exemptions = PathSet::with_services(self.exemptions.as_deref(), names(services));
        self
    }

    /// Request paths that pass unchecked, as [exempt
    /// services](Self::exempt_services) do: typically plain HTTP routes
    /// served beside gRPC, such as `/healthz` or `/metrics`.
    ///
    /// Matched exactly against the request's path (the query is not part
    /// of it), whatever the request's protocol: no prefixes (`/healthz`
    /// does not exempt `/healthz/live`; list both), case-sensitive, and a
    /// trailing `/` counts (`/healthz/` is another path). An exact gRPC
    /// method path (`/package.Service/Method`) exempts that method alone.
    ///
    /// Takes any list of paths, copied once; an empty list exempts nothing.
    /// Replaces any earlier list (of paths; exempt services are kept).
    ///
    /// ```
    /// use tonic_hotpath::tenant::RequireOrgIdLayer;
    ///
    /// let layer = RequireOrgIdLayer::new()
    ///     .exempt_services(["grpc.health.v1.Health"])
    ///     .exempt_paths(["/healthz", "/metrics"]);
    /// # drop(layer);
    /// ```
    pub fn exempt_paths<I>(mut self, paths: I) -> Self
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        self.exemptions = PathSet::with_paths(self.exemptions.as_deref(), names(paths));
        self
    }

    /// Whether the request to `uri` passes unchecked. The path is only
    /// looked at when something is exempt.
    #[inline]
    fn is_exempt(&self, uri: &http::Uri) -> bool {
        match &self.exemptions {
            None => false,
            Some(exemptions) => exemptions.matches(uri.path()),
        }
    }

    #[inline]
    fn tenant_ids(&self, headers: &http::HeaderMap) -> Result<TenantIds, OrgIdError> {
        if self.allow_multi_tenant {
            extract_tenant_ids_from_headers(headers)
        } else {
            extract_owned_from_headers(headers).map(TenantIds::from)
        }
    }
}

impl<S> Layer<S> for RequireOrgIdLayer {
    type Service = RequireOrgId<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequireOrgId {
            inner,
            config: self.clone(),
        }
    }
}

/// The service made by [`RequireOrgIdLayer`].
#[derive(Debug, Clone)]
pub struct RequireOrgId<S> {
    inner: S,
    config: RequireOrgIdLayer,
}

impl<S> RequireOrgId<S> {
    /// Wraps `inner`, accepting exactly one tenant per request.
    pub fn new(inner: S) -> Self {
        RequireOrgIdLayer::new().layer(inner)
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// Unwraps the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, ReqBody, ResBody> Service<http::Request<ReqBody>> for RequireOrgId<S>
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
    fn call(&mut self, mut request: http::Request<ReqBody>) -> Self::Future {
        if !self.config.is_exempt(request.uri()) {
            match self.config.tenant_ids(request.headers()) {
                Ok(ids) => {
                    request.extensions_mut().insert(ids);
                }
                Err(error) => {
                    return ResponseFuture::refused(Refusal::of(request.headers(), error));
                }
            }
        }
        ResponseFuture::inner(self.inner.call(request))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exempt_path(layer: &RequireOrgIdLayer, path: &str) -> bool {
        layer.is_exempt(&format!("http://h{path}").parse().unwrap())
    }

    #[test]
    fn exemption_matches_the_whole_service_name() {
        let layer = RequireOrgIdLayer::new().exempt_services(&["grpc.health.v1.Health"]);
        assert!(layer.is_exempt(&"http://h/grpc.health.v1.Health/Check".parse().unwrap()));
        assert!(!layer.is_exempt(&"http://h/other.Service/Check".parse().unwrap()));
        let layer = layer.exempt_services::<[&str; 0]>([]);
        assert!(layer.exemptions.is_none());
        assert!(!layer.is_exempt(&"http://h/grpc.health.v1.Health/Check".parse().unwrap()));
        let layer = RequireOrgIdLayer::new().exempt_services(&["grpc.health.v1.Health"]);
        assert!(exempt_path(&layer, "/grpc.health.v1.Health/Check"));
        assert!(exempt_path(&layer, "/grpc.health.v1.Health/Watch"));
        assert!(!exempt_path(&layer, "/grpc.health.v1.HealthX/Check"));
        assert!(!exempt_path(&layer, "/grpc.health.v1/Health/Check"));
        assert!(!exempt_path(&layer, "/grpc.health.v1.Health"));
        assert!(!exempt_path(
            &RequireOrgIdLayer::new(),
            "/grpc.health.v1.Health/Check"
        ));
    }

    #[test]
    fn exempt_services_take_runtime_lists() {
        let from_config = vec![String::from("a.First"), String::from("b.Second")];
        let layer = RequireOrgIdLayer::new().exempt_services(&from_config);
        drop(from_config);
        assert!(exempt_path(&layer, "/a.First/M"));
        assert!(exempt_path(&layer, "/b.Second/M"));
        assert!(!exempt_path(&layer, "/c.Third/M"));
        let layer = layer.exempt_services(vec!["c.Third".to_owned()]);
        assert!(!exempt_path(&layer, "/a.First/M"));
        assert!(exempt_path(&layer, "/c.Third/M"));
    }

    #[test]
    fn exempt_paths_match_exactly_and_keep_the_services() {
        let layer = RequireOrgIdLayer::new()
            .exempt_services(["a.First"])
            .exempt_paths(["/healthz", "/metrics"]);
        assert!(exempt_path(&layer, "/healthz"));
        assert!(exempt_path(&layer, "/healthz?verbose=1"));
        assert!(exempt_path(&layer, "/metrics"));
        assert!(exempt_path(&layer, "/a.First/M"));
        assert!(!exempt_path(&layer, "/healthz/"));
        assert!(!exempt_path(&layer, "/healthz/live"));
        let layer = layer.exempt_services::<[&str; 0]>([]);
        assert!(exempt_path(&layer, "/healthz"));
        assert!(!exempt_path(&layer, "/a.First/M"));
        let layer = layer.exempt_paths::<[&str; 0]>([]);
        assert!(layer.exemptions.is_none());
    }
}
