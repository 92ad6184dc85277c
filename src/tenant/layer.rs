//! Server side: a tower layer that requires a valid org id on every request.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tower::{Layer, Service};

use super::body::RequireOrgIdBody;
use super::error::OrgIdError;
use super::extract::{extract_owned_from_headers, extract_tenant_ids_from_headers};
use super::future::InnerOrRejected;
use super::tenant_ids::TenantIds;

/// Requires a valid `x-scope-orgid` on every request
/// (`Server::builder().layer(RequireOrgIdLayer::new())`).
///
/// - missing → `UNAUTHENTICATED`; several headers, an invalid id, or several
///   tenants while multi-tenant ids are refused → `INVALID_ARGUMENT`. Each is
///   a trailers-only gRPC response ([`Status::into_http`](tonic::Status::into_http)) and the inner
///   service is not called.
/// - valid → the request's [`TenantIds`] go into its extensions; handlers
///   read them with [`OrgIdRequestExt`](super::OrgIdRequestExt).
///
/// Responses carry a [`RequireOrgIdBody`] (the inner body, or none for a
/// refusal), so the layer stacks above or below any other layer, whatever
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
#[derive(Debug, Clone, Default)]
#[must_use = "a layer does nothing until it wraps a service"]
pub struct RequireOrgIdLayer {
    allow_multi_tenant: bool,
    /// Full names of the exempt services; `None` when there are none, so
    /// cloning the layer (and its services) stays free.
    exempt_services: Option<Arc<[Box<str>]>>,
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
    /// empty list exempts nothing. Replaces any earlier list.
    pub fn exempt_services<I>(mut self, services: I) -> Self
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let services: Arc<[Box<str>]> = services
            .into_iter()
            .map(|service| Box::from(service.as_ref()))
            .collect();
        self.exempt_services = (!services.is_empty()).then_some(services);
        self
    }

    /// Whether the request to `uri` passes unchecked. The path is only
    /// looked at when some service is exempt.
    #[inline]
    fn is_exempt(&self, uri: &http::Uri) -> bool {
        match &self.exempt_services {
            None => false,
            Some(services) => Self::is_exempt_path(services, uri.path()),
        }
    }

    fn is_exempt_path(services: &[Box<str>], path: &str) -> bool {
        path.strip_prefix('/')
            .and_then(|path| path.split_once('/'))
            .is_some_and(|(service, _)| services.iter().any(|exempt| **exempt == *service))
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
    type Response = http::Response<RequireOrgIdBody<ResBody>>;
    type Error = S::Error;
    type Future = RequireOrgIdFuture<S::Future>;

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
                    return RequireOrgIdFuture {
                        kind: InnerOrRejected::rejected(error),
                    };
                }
            }
        }
        RequireOrgIdFuture {
            kind: InnerOrRejected::inner(self.inner.call(request)),
        }
    }
}

pin_project! {
    /// The response future of [`RequireOrgId`]: the inner service's, or an
    /// immediate gRPC error response.
    #[derive(Debug)]
    pub struct RequireOrgIdFuture<F> {
        #[pin]
        kind: InnerOrRejected<F, OrgIdError>,
    }
}

impl<F, ResBody, E> Future for RequireOrgIdFuture<F>
where
    F: Future<Output = Result<http::Response<ResBody>, E>>,
{
    type Output = Result<http::Response<RequireOrgIdBody<ResBody>>, E>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let kind = self.project().kind;
        kind.poll_with(
            cx,
            |output| output.map(|response| response.map(RequireOrgIdBody::inner)),
            |status| Ok(status.into_http()),
        )
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
        assert!(layer.exempt_services.is_none());
        assert!(!layer.is_exempt(&"http://h/grpc.health.v1.Health/Check".parse().unwrap()));
        let layer = RequireOrgIdLayer::new().exempt_services(&["grpc.health.v1.Health"]);
        assert!(exempt_path(&layer, "/grpc.health.v1.Health/Check"));
        assert!(exempt_path(&layer, "/grpc.health.v1.Health/Watch"));
        assert!(!exempt_path(&layer, "/grpc.health.v1.HealthX/Check"));
        assert!(!exempt_path(&layer, "/grpc.health.v1/Health/Check"));
        assert!(!exempt_path(&layer, "/grpc.health.v1.Health"));
        let services: [Box<str>; 1] = ["grpc.health.v1.Health".into()];
        assert!(!RequireOrgIdLayer::is_exempt_path(
            &services,
            "grpc.health.v1.Health/Check"
        ));
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
}
