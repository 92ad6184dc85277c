//! Client side: a tower layer that stamps an org id on every outgoing call.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::HeaderValue;
use pin_project_lite::pin_project;
use tower::{BoxError, Layer, Service};

use super::error::InjectError;
use super::future::InnerOrRejected;
use super::inject::inject_into_request;
use super::tenant_ids::TenantIds;

/// Stamps a fixed org id on every outgoing request, over a `Channel`:
///
/// ```no_run
/// use tonic_hotpath::tenant::{OrgId, SetOrgIdLayer};
/// use tower::ServiceBuilder;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let channel = tonic::transport::Endpoint::from_static("http://127.0.0.1:50051")
///     .connect()
///     .await?;
/// let channel = ServiceBuilder::new()
///     .layer(SetOrgIdLayer::new(OrgId::new("team-a")?))
///     .service(channel);
/// // hand `channel` to a generated client: `EchoClient::new(channel)`
/// # drop(channel);
/// # Ok(())
/// # }
/// ```
///
/// The header value is built once; each request clones it (a reference
/// count). A request that already carries the same id passes unchanged; one
/// carrying a different id (or several) fails with `INVALID_ARGUMENT`
/// ([`InjectError`] as the status's source) and is not sent.
///
/// # With [`OutgoingMetadataLayer`](crate::metadata::OutgoingMetadataLayer)
///
/// The ids a request carries are those in its headers *and* those of the
/// outgoing-metadata chain that will be sent with it, counted once each,
/// as dskit's `InjectIntoGRPCRequest` counts pairs appended to the outgoing
/// context. So "the same id passes once, a different one is refused and
/// not sent" holds in either layer order, for a chain attached to the
/// request or in the task's scope:
///
/// - `SetOrgIdLayer` outside (above) `OutgoingMetadataLayer`, the order the
///   README shows: the chain is still pending (in the request's extensions
///   or the task-local scope) when this layer runs; it reads the chain's
///   `x-scope-orgid` values in place (a single-key walk of the chain, no
///   map built) and adds its id to the headers only if neither carries one.
/// - `SetOrgIdLayer` inside (below) `OutgoingMetadataLayer`: the chain is
///   already in the headers, and that layer has taken it out of the
///   extensions and hidden the scope for the call, so this layer sees each
///   id once, in the headers.
///
/// ```
/// use tonic_hotpath::metadata::OutgoingMetadataLayer;
/// use tonic_hotpath::tenant::{OrgId, SetOrgIdLayer};
/// use tower::ServiceBuilder;
///
/// # fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let channel = tonic::transport::Endpoint::from_static("http://127.0.0.1:50051").connect_lazy();
/// let channel = ServiceBuilder::new()
///     .layer(SetOrgIdLayer::new(OrgId::new("team-a")?)) // either order is fine
///     .layer(OutgoingMetadataLayer::new())
///     .service(channel);
/// # drop(channel);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a layer does nothing until it wraps a service"]
pub struct SetOrgIdLayer {
    value: HeaderValue,
}

impl SetOrgIdLayer {
    /// A layer stamping `ids` (an [`OrgId`](super::OrgId) or [`TenantIds`]).
    pub fn new(ids: impl Into<TenantIds>) -> Self {
        Self {
            value: ids.into().to_header_value(),
        }
    }
}

impl<S> Layer<S> for SetOrgIdLayer {
    type Service = SetOrgId<S>;

    fn layer(&self, inner: S) -> Self::Service {
        SetOrgId {
            inner,
            value: self.value.clone(),
        }
    }
}

/// The service made by [`SetOrgIdLayer`].
#[derive(Debug, Clone)]
pub struct SetOrgId<S> {
    inner: S,
    value: HeaderValue,
}

impl<S> SetOrgId<S> {
    /// Wraps `inner`, stamping `ids` on every request.
    pub fn new(inner: S, ids: impl Into<TenantIds>) -> Self {
        SetOrgIdLayer::new(ids).layer(inner)
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

impl<S, ReqBody> Service<http::Request<ReqBody>> for SetOrgId<S>
where
    S: Service<http::Request<ReqBody>>,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = SetOrgIdFuture<S::Future>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    #[inline]
    fn call(&mut self, mut request: http::Request<ReqBody>) -> Self::Future {
        let kind = match inject_into_request(&mut request, &self.value) {
            Ok(()) => InnerOrRejected::inner(self.inner.call(request)),
            Err(error) => InnerOrRejected::rejected(error),
        };
        SetOrgIdFuture { kind }
    }
}

pin_project! {
    /// The response future of [`SetOrgId`]: the inner service's, or the
    /// injection error.
    #[derive(Debug)]
    pub struct SetOrgIdFuture<F> {
        #[pin]
        kind: InnerOrRejected<F, InjectError>,
    }
}

impl<F, T, E> Future for SetOrgIdFuture<F>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
{
    type Output = Result<T, BoxError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let kind = self.project().kind;
        kind.poll_with(
            cx,
            |output| output.map_err(Into::into),
            |status| Err(BoxError::from(status)),
        )
    }
}
