//! Shared by the tenant allocation test and bench: request headers built the
//! way h2 decodes them off the wire, requests as tonic hands them to a user
//! layer, an always-ready no-op service, and a per-thread counting allocator.

use std::cell::RefCell;
use std::convert::Infallible;
use std::future::{Ready, ready};
use std::pin::pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use http::{HeaderMap, HeaderName, HeaderValue, Request, Response};
use tonic::body::Body;
use tonic::transport::server::TcpConnectInfo;
use tower::Service;

/// The nine other metadata keys of a typical request (the Cortex write-up
/// benchmarks 10 keys in all).
const OTHER_METADATA: [(&str, &str); 9] = [
    ("content-type", "application/grpc"),
    ("te", "trailers"),
    ("user-agent", "grpc-go/1.74.2"),
    ("grpc-accept-encoding", "identity,deflate,gzip"),
    ("grpc-timeout", "4999870u"),
    (
        "traceparent",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    ),
    ("x-request-id", "5f1b9a2c-3e4d-4c1a-9f0e-7d2b6a8c4e11"),
    ("authorization", "Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig"),
    ("x-forwarded-for", "10.1.2.3"),
];

/// Ten metadata entries, `x-scope-orgid: org_id` among them, each name and
/// value built as h2's HPACK decoder builds them
/// (`HeaderName::from_lowercase`, `HeaderValue::from_bytes`): every value
/// is a promotable `Bytes` whose first clone allocates.
pub fn wire_headers(org_id: &str) -> HeaderMap {
    let mut headers = HeaderMap::with_capacity(16);
    let entries = OTHER_METADATA[..4]
        .iter()
        .copied()
        .chain([("x-scope-orgid", org_id)])
        .chain(OTHER_METADATA[4..].iter().copied());
    for (name, value) in entries {
        let name = HeaderName::from_lowercase(name.as_bytes()).expect("valid name");
        let value = HeaderValue::from_bytes(value.as_bytes()).expect("valid value");
        headers.append(name, value);
    }
    headers
}

/// A request as tonic hands it to user layers: wire-built headers with
/// `x-scope-orgid: org_id`, and the connection info tonic has already put
/// into the extensions (so the extension map exists, as in a real server).
pub fn tonic_request(org_id: &str) -> Request<Body> {
    let mut request = Request::new(Body::empty());
    *request.headers_mut() = wire_headers(org_id);
    request.extensions_mut().insert(TcpConnectInfo {
        local_addr: None,
        remote_addr: None,
    });
    request
}

/// An always-ready service that answers at once with an empty response,
/// like a handler doing nothing. It keeps the requests it is given (room for
/// [`NoOp::ROOM`] without allocating) so that dropping a request is not part
/// of a measured call; [`NoOp::clear`] them outside the measurement.
#[derive(Debug, Clone)]
pub struct NoOp {
    kept: Rc<RefCell<Vec<Request<Body>>>>,
}

impl Default for NoOp {
    fn default() -> Self {
        Self::new()
    }
}

impl NoOp {
    /// How many requests can be kept without allocating.
    pub const ROOM: usize = 256;

    /// A no-op service with room for [`NoOp::ROOM`] requests.
    pub fn new() -> Self {
        Self {
            kept: Rc::new(RefCell::new(Vec::with_capacity(Self::ROOM))),
        }
    }

    /// Drops the kept requests.
    pub fn clear(&self) {
        self.kept.borrow_mut().clear();
    }

    /// Takes the kept requests, oldest first (keeping the room).
    pub fn take(&self) -> Vec<Request<Body>> {
        self.kept.borrow_mut().drain(..).collect()
    }
}

impl Service<Request<Body>> for NoOp {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Ready<Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        self.kept.borrow_mut().push(request);
        ready(Ok(Response::new(Body::empty())))
    }
}

/// One call through an always-ready service, polled once; `None` if it
/// was not ready at once.
pub fn call<S, B>(service: &mut S, request: Request<Body>) -> Option<Response<B>>
where
    S: Service<Request<Body>, Response = Response<B>, Error = Infallible>,
{
    let mut cx = Context::from_waker(Waker::noop());
    match pin!(service.call(request)).poll(&mut cx) {
        Poll::Ready(Ok(response)) => Some(response),
        Poll::Ready(Err(never)) => match never {},
        Poll::Pending => None,
    }
}
