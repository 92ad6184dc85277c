//! [`OutgoingMetadataLayer`]: the client layer that writes a chain into the
//! outgoing request headers at send time.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tower::{BoxError, Layer, Service};

use super::{MetadataError, OutgoingMetadata};

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
/// Below this layer the chain is in the request headers and nowhere else:
/// the layer takes it out of the extensions, and while it calls the inner
/// service the task's current chain is an empty one (the scope is hidden
/// for that synchronous call, not for the response future). So a layer
/// stacked under it sees each pair once, in the headers, and a layer
/// stacked over it sees the chain still pending (extensions or scope) and
/// none of it in the headers. That is what lets
/// [`SetOrgIdLayer`](crate::tenant::SetOrgIdLayer) sit on either side of
/// it and still send one org id: see its docs.
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
            Some(metadata) => metadata.write_to(request.headers_mut()),
            None => OutgoingMetadata::with_current_borrowed(|metadata| {
                metadata.write_to(request.headers_mut())
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

pin_project! {
    /// The response future of [`OutgoingMetadataService`]: the inner
    /// service's future, or the error that stopped the request from being
    /// sent (its headers could not take the chain).
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
        Refused { error: Option<MetadataError> },
    }
}

impl<F> ResponseFuture<F> {
    fn sent(future: F) -> Self {
        Self {
            state: State::Sent { future },
        }
    }

    fn refused(error: MetadataError) -> Self {
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
                Some(error) => Poll::Ready(Err(Box::new(error))),
                None => Poll::Pending,
            },
        }
    }
}
