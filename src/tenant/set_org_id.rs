//! The client layer that stamps an org id on every call: [`SetOrgIdLayer`],
//! its service [`SetOrgId`], and the service's [`ResponseFuture`].

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::HeaderValue;
use pin_project_lite::pin_project;
use tonic::Status;
use tower::{BoxError, Layer, Service};

use crate::metadata::ClaimedHeaderError;

use super::error::InjectError;
use super::inject::{inject_error_of_claim_conflict, stamp_into_request};
use super::inner_or_rejected::InnerOrRejected;
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
/// count). The rule is judged on the request's headers: no org id there,
/// and this one is added; the same id, and the request passes unchanged; a
/// different id (or several), and the call fails with `INVALID_ARGUMENT`
/// ([`InjectError`] as the status's source) and is not sent.
///
/// # With [`OutgoingMetadataLayer`](crate::metadata::OutgoingMetadataLayer)
///
/// An outgoing-metadata chain (attached with
/// [`set_outgoing_metadata`](crate::metadata::OutgoingMetadataExt::set_outgoing_metadata)
/// or in the task's [`scope`](crate::metadata::OutgoingMetadata::scope))
/// is only sent by an `OutgoingMetadataLayer`, so the rule is judged on
/// what that layer sends:
///
/// - No `OutgoingMetadataLayer` below: the chain is not sent and its ids
///   do not count. The stamped id is added (or checked) and sent, whatever
///   id a chain carries.
/// - `SetOrgIdLayer` outside (above) `OutgoingMetadataLayer`, the order the
///   README shows: this layer judges the headers as above and, when a
///   non-empty chain is pending, [claims](crate::metadata::ClaimedHeaders)
///   the `x-scope-orgid` it checked (one allocation, only then). The
///   metadata layer writes the chain judged against the claim: the same id
///   is not written again (it is sent once); a different one, or several,
///   fails the call with `INVALID_ARGUMENT` before anything is sent. This
///   layer turns that layer's [`ClaimedHeaderError`] into the
///   [`InjectError`] the other order gives (`DifferentOrgIdPresent` with
///   the chain's id as `present`, or `TooManyHeaders` with the chain's
///   count).
/// - `SetOrgIdLayer` inside (below) `OutgoingMetadataLayer`: the chain is
///   already in the headers, and that layer has taken it out of the
///   extensions and hidden the scope for the call, so this layer judges
///   the chain's ids in the headers and claims nothing.
///
/// So in either order the same id is sent once, and a different one is
/// refused and not sent. Two corners: a chain attached by a layer *between*
/// this one and `OutgoingMetadataLayer` is not pending when this layer
/// runs, so nothing is claimed and both ids are sent (the server refuses
/// two; stack this layer below the one that attaches); and a request whose
/// own metadata already carries this id, with a chain carrying it too, is
/// sent with it once in the outside order but refused (two values in the
/// headers) in the inside one.
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
    type Future = ResponseFuture<S::Future>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    #[inline]
    fn call(&mut self, mut request: http::Request<ReqBody>) -> Self::Future {
        let kind = match stamp_into_request(&mut request, &self.value) {
            Ok(()) => InnerOrRejected::inner(self.inner.call(request)),
            Err(error) => InnerOrRejected::rejected(error),
        };
        ResponseFuture { kind }
    }
}

pin_project! {
    /// The response future of [`SetOrgId`]: the inner service's (an
    /// `OutgoingMetadataLayer` below refusing the chain's org id turned
    /// into the [`InjectError`] status), or the injection error.
    #[derive(Debug)]
    pub struct ResponseFuture<F> {
        #[pin]
        kind: InnerOrRejected<F, InjectError>,
    }
}

impl<F, T, E> Future for ResponseFuture<F>
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
            |output| output.map_err(|error| claim_conflict_as_inject_error(error.into())),
            |status| Err(BoxError::from(status)),
        )
    }
}

/// An error of the inner service that is an
/// [`OutgoingMetadataLayer`](crate::metadata::OutgoingMetadataLayer) below
/// refusing a chain whose org id disagrees with the one this layer claimed
/// becomes the status of the matching [`InjectError`], as this layer
/// answers when it finds the chain's ids in the headers (the other order).
/// Any other error passes unchanged.
#[cold]
#[inline(never)]
fn claim_conflict_as_inject_error(error: BoxError) -> BoxError {
    let inject = error
        .downcast_ref::<Status>()
        .and_then(std::error::Error::source)
        .and_then(|source| source.downcast_ref::<ClaimedHeaderError>())
        .and_then(inject_error_of_claim_conflict);
    match inject {
        Some(inject) => Box::new(Status::from(inject)),
        None => error,
    }
}
