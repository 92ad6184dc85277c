//! Server side: a tower layer that requires a valid org id on every request.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

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
/// [`allow_multi_tenant`](Self::allow_multi_tenant) is set.
///
/// ```
/// use tonic_hotpath::tenant::RequireOrgIdLayer;
///
/// let builder = tonic::transport::Server::builder()
///     .layer(RequireOrgIdLayer::new().allow_multi_tenant(true));
/// # drop(builder);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct RequireOrgIdLayer {
    allow_multi_tenant: bool,
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
}

impl<S> Layer<S> for RequireOrgIdLayer {
    type Service = RequireOrgId<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequireOrgId {
            inner,
            allow_multi_tenant: self.allow_multi_tenant,
        }
    }
}

/// The service made by [`RequireOrgIdLayer`].
#[derive(Debug, Clone)]
pub struct RequireOrgId<S> {
    inner: S,
    allow_multi_tenant: bool,
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

    fn tenant_ids(&self, headers: &http::HeaderMap) -> Result<TenantIds, OrgIdError> {
        if self.allow_multi_tenant {
            extract_tenant_ids_from_headers(headers)
        } else {
            extract_owned_from_headers(headers).map(TenantIds::from)
        }
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

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<ReqBody>) -> Self::Future {
        match self.tenant_ids(request.headers()) {
            Ok(ids) => {
                request.extensions_mut().insert(ids);
                RequireOrgIdFuture {
                    kind: InnerOrRejected::inner(self.inner.call(request)),
                }
            }
            Err(error) => RequireOrgIdFuture {
                kind: InnerOrRejected::rejected(error),
            },
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

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match ready!(self.project().kind.poll_or_status(cx)) {
            Ok(output) => Poll::Ready(output),
            Err(status) => Poll::Ready(Ok(status.into_http())),
        }
    }
}
