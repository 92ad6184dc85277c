//! [`OutgoingMetadataLayer`]: the client layer that writes a chain into the
//! outgoing request headers at send time.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tonic::Status;
use tower::{BoxError, Layer, Service};

use super::{ClaimedHeaders, OutgoingMetadata};

/// A tower layer for the client side (over a tonic `Channel`, under the
/// generated client) that sends an [`OutgoingMetadata`] chain with each
/// request.
///
/// The chain comes from the request's extensions (see
/// [`OutgoingMetadataExt`](super::OutgoingMetadataExt)) or, failing that,
/// from the task-local [`OutgoingMetadata::scope`]. It is appended to the
/// request headers in FIFO order, after any metadata set on the
/// `tonic::Request` directly; a request with no chain passes untouched.
///
/// Headers a layer above has set and [claimed](ClaimedHeaders) (as
/// [`SetOrgIdLayer`](crate::tenant::SetOrgIdLayer) claims the org id it
/// stamps) are judged before anything is written: a chain entry that
/// repeats a claimed header's value is not written again (the header is
/// sent once), and a chain carrying a different value for it, or several
/// values, is refused with `INVALID_ARGUMENT` and the request is not sent.
/// A request without claims costs one extensions lookup more (none at all
/// when it has no chain to write).
///
/// Below this layer the chain is in the request headers and nowhere else:
/// the layer takes it (and the claims) out of the extensions, and while it
/// calls the inner service the task's current chain is an empty one (the
/// scope is hidden for that synchronous call, not for the response
/// future). So a layer stacked under it sees each pair once, in the
/// headers, and a layer stacked over it sees the chain still pending
/// (extensions or scope) and none of it in the headers.
///
/// ```
/// use tonic_hotpath::metadata::OutgoingMetadataLayer;
/// use tower::ServiceBuilder;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let channel = tonic::transport::Endpoint::from_static("http://127.0.0.1:50051").connect_lazy();
/// let service = ServiceBuilder::new()
///     .layer(OutgoingMetadataLayer::new())
///     .service(channel);
/// // let client = EchoClient::new(service);
/// # let _ = service;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default)]
#[must_use = "a layer does nothing until it wraps a service"]
pub struct OutgoingMetadataLayer {
    _private: (),
}

impl OutgoingMetadataLayer {
    /// The layer.
    pub const fn new() -> Self {
        Self { _private: () }
    }
}

impl<S> Layer<S> for OutgoingMetadataLayer {
    type Service = OutgoingMetadataService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        OutgoingMetadataService { inner }
    }
}

/// The service [`OutgoingMetadataLayer`] builds.
#[derive(Debug, Clone)]
pub struct OutgoingMetadataService<S> {
    inner: S,
}

impl<S> OutgoingMetadataService<S> {
    /// Wraps `inner`.
    pub const fn new(inner: S) -> Self {
        Self { inner }
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Unwraps the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, B> Service<http::Request<B>> for OutgoingMetadataService<S>
where
    S: Service<http::Request<B>>,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        let attached = request.extensions_mut().remove::<OutgoingMetadata>();
        let written = match attached {
            Some(metadata) => write_chain(&metadata, &mut request),
            None => OutgoingMetadata::with_current_borrowed(|metadata| {
                write_chain(metadata, &mut request)
            })
            .unwrap_or(Ok(())),
        };
        match written {
            // Below this layer the chain is in the headers only: it was taken
            // from the extensions, and the task's scope is hidden for the call.
            // (With no scope ever entered there is nothing to hide.)
            Ok(()) if OutgoingMetadata::may_have_current() => {
                ResponseFuture::sent(OutgoingMetadata::hiding_current(|| {
                    self.inner.call(request)
                }))
            }
            Ok(()) => ResponseFuture::sent(self.inner.call(request)),
            Err(error) => ResponseFuture::refused(error),
        }
    }
}

/// Writes `chain` into the request's headers, judged against the headers
/// a layer above has [claimed](ClaimedHeaders) (taken out of the
/// extensions with the chain). An empty chain is not written and the
/// claims are not looked for; a request without claims costs one
/// extensions lookup more than a plain [`OutgoingMetadata::write_to`].
#[inline]
fn write_chain<B>(
    chain: &OutgoingMetadata,
    request: &mut http::Request<B>,
) -> Result<(), BoxError> {
    if chain.is_empty() {
        return Ok(());
    }
    match request.extensions_mut().remove::<ClaimedHeaders>() {
        None => chain
            .write_to(request.headers_mut())
            .map_err(BoxError::from),
        Some(claims) => write_judged(chain, request.headers_mut(), &claims),
    }
}

/// Writes `chain` into `headers` if it agrees with `claims`: its entries of
/// a claimed name, which repeat the claimed value, are left out. A
/// conflict is `INVALID_ARGUMENT` with the
/// [`ClaimedHeaderError`](super::ClaimedHeaderError) as the
/// status's source, and nothing is written.
#[inline(never)]
fn write_judged(
    chain: &OutgoingMetadata,
    headers: &mut http::HeaderMap,
    claims: &ClaimedHeaders,
) -> Result<(), BoxError> {
    let written = match claims.judge(chain) {
        Ok(false) => chain.write_to(headers),
        Ok(true) => chain.write_unclaimed_to(headers, claims),
        Err(conflict) => return Err(Box::new(Status::from(conflict))),
    };
    written.map_err(BoxError::from)
}

pin_project! {
    /// The response future of [`OutgoingMetadataService`]: the inner
    /// service's future, or the error that stopped the request from being
    /// sent: its headers could not take the chain (the [`MetadataError`](super::MetadataError)
    /// itself), or the chain disagrees with a claimed header (a
    /// `tonic::Status`, `INVALID_ARGUMENT`, with the
    /// [`ClaimedHeaderError`](super::ClaimedHeaderError) as its source).
    #[derive(Debug)]
    pub struct ResponseFuture<F> {
        #[pin]
        state: State<F>,
    }
}

pin_project! {
    #[project = StateProj]
    #[derive(Debug)]
    enum State<F> {
        Sent { #[pin] future: F },
        Refused { error: Option<BoxError> },
    }
}

impl<F> ResponseFuture<F> {
    fn sent(future: F) -> Self {
        Self {
            state: State::Sent { future },
        }
    }

    fn refused(error: BoxError) -> Self {
        Self {
            state: State::Refused { error: Some(error) },
        }
    }
}

impl<F, T, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
{
    type Output = Result<T, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Sent { future } => future.poll(cx).map_err(Into::into),
            // After the error was taken the future is complete; staying
            // pending is allowed and cannot panic.
            StateProj::Refused { error } => match error.take() {
                Some(error) => Poll::Ready(Err(error)),
                None => Poll::Pending,
            },
        }
    }
}
