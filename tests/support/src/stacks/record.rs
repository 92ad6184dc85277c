//! What the handler and each layer position see of a call: the connection
//! info tonic put in the request extensions (TCP, TLS over TCP, Unix
//! socket), the addresses and peer certificates derived from it, and the
//! request's encoding.
//!
//! - [`RecordingEcho`]: the echo service that records, per call, what the
//!   handler sees through tonic's own `Request` API.
//! - [`ProbeLayer`]: a pass-through tower layer that records the same from
//!   the `http::Request` at its position; stack probes above and below
//!   another layer and compare with the stack without it.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo, UdsConnectInfo};
use tonic::{Request, Response, Status, Streaming};
use tower::{Layer, Service};

use crate::{Echo, EchoOverride, EchoRequest, EchoResponse, EchoService, ResponseStream};

/// The connection info present in one request's extensions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnSeen {
    /// `TcpConnectInfo` is present.
    pub tcp: bool,
    /// `TlsConnectInfo<TcpConnectInfo>` is present (tonic then inserts the
    /// inner `TcpConnectInfo` too).
    pub tls_tcp: bool,
    /// `UdsConnectInfo` is present.
    pub uds: bool,
    /// The remote address, as `Request::remote_addr` finds it.
    pub remote_addr: Option<SocketAddr>,
    /// The local address, as `Request::local_addr` finds it.
    pub local_addr: Option<SocketAddr>,
    /// The number of peer certificates, as `Request::peer_certs` finds them
    /// (`None`: no TLS info, or a TLS peer that sent none).
    pub peer_certs: Option<usize>,
}

impl ConnSeen {
    /// Reads `extensions` the way tonic's `Request::remote_addr`,
    /// `local_addr` and `peer_certs` do (TCP first, then TLS over TCP).
    pub fn of_extensions(extensions: &http::Extensions) -> Self {
        let tcp = extensions.get::<TcpConnectInfo>();
        let tls = extensions.get::<TlsConnectInfo<TcpConnectInfo>>();
        let tcp_inner = tcp.or(tls.map(TlsConnectInfo::get_ref));
        Self {
            tcp: tcp.is_some(),
            tls_tcp: tls.is_some(),
            uds: extensions.get::<UdsConnectInfo>().is_some(),
            remote_addr: tcp_inner.and_then(TcpConnectInfo::remote_addr),
            local_addr: tcp_inner.and_then(TcpConnectInfo::local_addr),
            peer_certs: tls.and_then(TlsConnectInfo::peer_certs).map(|c| c.len()),
        }
    }

    /// What a handler sees through tonic's own API (`remote_addr()`,
    /// `local_addr()`, `peer_certs()`) plus which info types are present.
    pub fn of_request<T>(request: &Request<T>) -> Self {
        Self {
            remote_addr: request.remote_addr(),
            local_addr: request.local_addr(),
            peer_certs: request.peer_certs().map(|c| c.len()),
            ..Self::of_extensions(request.extensions())
        }
    }
}

/// What the handler saw of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// The method name (`"unary"`, `"server_streaming"`, ...).
    pub method: &'static str,
    /// The connection info.
    pub conn: ConnSeen,
    /// The request's `grpc-encoding` (compression), if any.
    pub encoding: Option<String>,
}

/// The echo service of `crate::EchoService` that records a [`Seen`] per
/// call. Clones share the record: keep one, serve another.
#[derive(Debug, Clone, Default)]
pub struct RecordingEcho {
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl RecordingEcho {
    /// Every call seen so far, in arrival order.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// The last call seen; panics if none was.
    pub fn last(&self) -> Seen {
        self.seen().pop().expect("the handler saw no call")
    }

    fn record<T>(&self, method: &'static str, request: &Request<T>) {
        let encoding = request
            .metadata()
            .get("grpc-encoding")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        self.seen.lock().unwrap().push(Seen {
            method,
            conn: ConnSeen::of_request(request),
            encoding,
        });
    }
}

#[tonic::async_trait]
impl EchoOverride for RecordingEcho {
    async fn unary(&self, request: Request<EchoRequest>) -> Result<Response<EchoResponse>, Status> {
        self.record("unary", &request);
        EchoService.unary_echo(request).await
    }

    async fn server_streaming(
        &self,
        request: Request<EchoRequest>,
    ) -> Result<Response<ResponseStream>, Status> {
        self.record("server_streaming", &request);
        EchoService.server_streaming_echo(request).await
    }

    async fn client_streaming(
        &self,
        request: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<EchoResponse>, Status> {
        self.record("client_streaming", &request);
        EchoService.client_streaming_echo(request).await
    }

    async fn bidi(
        &self,
        request: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<ResponseStream>, Status> {
        self.record("bidi", &request);
        EchoService.bidirectional_streaming_echo(request).await
    }
}

/// What a [`ProbeLayer`] saw of one request at its position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probed {
    /// The URI path.
    pub path: String,
    /// The HTTP version.
    pub version: http::Version,
    /// The `content-type`, if any.
    pub content_type: Option<String>,
    /// The connection info in the extensions.
    pub conn: ConnSeen,
}

/// A pass-through layer that records a [`Probed`] per request and calls
/// the inner service unchanged (same request, same future). Works on the
/// server (any position in `Server::builder().layer(..)`) and on a client
/// stack. Clones share the record.
#[derive(Debug, Clone, Default)]
pub struct ProbeLayer {
    seen: Arc<Mutex<Vec<Probed>>>,
}

impl ProbeLayer {
    /// A probe with an empty record.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every request seen so far, in arrival order.
    pub fn seen(&self) -> Vec<Probed> {
        self.seen.lock().unwrap().clone()
    }

    /// The requests seen so far whose path is `path`.
    pub fn seen_at(&self, path: &str) -> Vec<Probed> {
        self.seen().into_iter().filter(|p| p.path == path).collect()
    }
}

impl<S> Layer<S> for ProbeLayer {
    type Service = Probe<S>;

    fn layer(&self, inner: S) -> Probe<S> {
        Probe {
            inner,
            seen: Arc::clone(&self.seen),
        }
    }
}

/// The service of a [`ProbeLayer`].
#[derive(Debug, Clone)]
pub struct Probe<S> {
    inner: S,
    seen: Arc<Mutex<Vec<Probed>>>,
}

impl<S, B> Service<http::Request<B>> for Probe<S>
where
    S: Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> S::Future {
        let content_type = request
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        self.seen.lock().unwrap().push(Probed {
            path: request.uri().path().to_owned(),
            version: request.version(),
            content_type,
            conn: ConnSeen::of_extensions(request.extensions()),
        });
        self.inner.call(request)
    }
}
