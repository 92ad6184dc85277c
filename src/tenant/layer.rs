//! Server side: a tower layer that requires a valid org id on every request.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tower::{Layer, Service};

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
///         .exempt_services(&["grpc.health.v1.Health"]),
/// );
/// # drop(builder);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct RequireOrgIdLayer {
    allow_multi_tenant: bool,
    exempt_services: &'static [&'static str],
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
    pub fn exempt_services(mut self, services: &'static [&'static str]) -> Self {
        self.exempt_services = services;
        self
    }

    /// Whether the request to `uri` passes unchecked. The path is only
    /// looked at when some service is exempt.
    #[inline]
    fn is_exempt(&self, uri: &http::Uri) -> bool {
        !self.exempt_services.is_empty() && self.is_exempt_path(uri.path())
    }

    fn is_exempt_path(&self, path: &str) -> bool {
        path.strip_prefix('/')
            .and_then(|path| path.split_once('/'))
            .is_some_and(|(service, _)| self.exempt_services.contains(&service))
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
            config: *self,
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
    ResBody: Default,
{
    type Response = http::Response<ResBody>;
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
    ResBody: Default,
{
    type Output = F::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let kind = self.project().kind;
        kind.poll_with(cx, |output| output, |status| Ok(status.into_http()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exemption_matches_the_whole_service_name() {
        let layer = RequireOrgIdLayer::new().exempt_services(&["grpc.health.v1.Health"]);
        assert!(layer.is_exempt(&"http://h/grpc.health.v1.Health/Check".parse().unwrap()));
        assert!(!layer.is_exempt(&"http://h/other.Service/Check".parse().unwrap()));
        let layer = layer.exempt_services(&[]);
        assert!(!layer.is_exempt(&"http://h/grpc.health.v1.Health/Check".parse().unwrap()));
        let layer = RequireOrgIdLayer::new().exempt_services(&["grpc.health.v1.Health"]);
        assert!(layer.is_exempt_path("/grpc.health.v1.Health/Check"));
        assert!(layer.is_exempt_path("/grpc.health.v1.Health/Watch"));
        assert!(!layer.is_exempt_path("/grpc.health.v1.HealthX/Check"));
        assert!(!layer.is_exempt_path("/grpc.health.v1/Health/Check"));
        assert!(!layer.is_exempt_path("/grpc.health.v1.Health"));
        assert!(!layer.is_exempt_path("grpc.health.v1.Health/Check"));
        assert!(!RequireOrgIdLayer::new().is_exempt_path("/grpc.health.v1.Health/Check"));
    }
}
