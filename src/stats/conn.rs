//! Connection events: a wrapper for the server's accepted-connection stream
//! ([`StatsIncoming`]) and for a client connector ([`StatsConnector`]).
//! Each wrapped connection ([`StatsIo`]) delivers `ConnBegin` when created
//! and `ConnEnd` when dropped, exactly once each.

use std::fmt;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use futures_core::Stream;
use http::Uri;
use pin_project_lite::pin_project;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::server::{Connected, TcpConnectInfo};
use tower::Service;

use super::StatsHandler;
use super::event::{ConnEvent, ConnInfo, Side};

/// A connection's handler states and addresses.
///
/// On the server, a [`StatsIo`]'s `Connected::ConnectInfo` is its
/// `ConnTag`: tonic puts it into every request's extensions, where the
/// server layer finds it and hands each handler its connection state in
/// [`StatsHandler::tag_rpc`]. It takes the place of tonic's
/// `TcpConnectInfo` there; the server layer puts a `TcpConnectInfo` with
/// the same addresses back, so `tonic::Request::remote_addr()` and
/// `local_addr()` keep working behind the layer.
pub struct ConnTag<H: StatsHandler> {
    shared: Arc<ConnShared<H>>,
}

struct ConnShared<H: StatsHandler> {
    handler: Arc<H>,
    info: ConnInfo,
    state: H::ConnState,
}

impl<H: StatsHandler> Clone for ConnTag<H> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<H: StatsHandler> fmt::Debug for ConnTag<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnTag")
            .field("info", &self.shared.info)
            .finish_non_exhaustive()
    }
}

impl<H: StatsHandler> ConnTag<H> {
    fn begin(handler: Arc<H>, info: ConnInfo) -> Self {
        let state = handler.tag_conn(&info);
        handler.handle_conn(
            &state,
            &ConnEvent::Begin {
                time: Instant::now(),
            },
        );
        Self {
            shared: Arc::new(ConnShared {
                handler,
                info,
                state,
            }),
        }
    }

    fn end(&self) {
        let shared = &*self.shared;
        shared.handler.handle_conn(
            &shared.state,
            &ConnEvent::End {
                time: Instant::now(),
            },
        );
    }

    /// What was known when the connection was tagged.
    pub fn info(&self) -> &ConnInfo {
        &self.shared.info
    }

    /// The peer's address, where known.
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.shared.info.peer_addr
    }

    /// The local address, where known.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.shared.info.local_addr
    }

    /// The handlers' connection state.
    pub fn state(&self) -> &H::ConnState {
        &self.shared.state
    }
}

pin_project! {
    /// A connection observed by a [`StatsHandler`]: `ConnBegin` on creation,
    /// `ConnEnd` on drop. Reads and writes pass straight through (tokio's
    /// `AsyncRead`/`AsyncWrite` or hyper's `rt::Read`/`rt::Write`, whichever
    /// the wrapped IO implements).
    pub struct StatsIo<IO, H: StatsHandler> {
        #[pin]
        io: IO,
        tag: ConnTag<H>,
    }

    impl<IO, H: StatsHandler> PinnedDrop for StatsIo<IO, H> {
        fn drop(this: Pin<&mut Self>) {
            this.tag.end();
        }
    }
}

impl<IO: fmt::Debug, H: StatsHandler> fmt::Debug for StatsIo<IO, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StatsIo")
            .field("io", &self.io)
            .field("tag", &self.tag)
            .finish()
    }
}

impl<IO, H: StatsHandler> StatsIo<IO, H> {
    /// Wraps `io`, tagging it with `handler` and delivering `ConnBegin`.
    pub fn new(io: IO, handler: Arc<H>, info: ConnInfo) -> Self {
        Self {
            io,
            tag: ConnTag::begin(handler, info),
        }
    }

    /// The connection's tag.
    pub fn tag(&self) -> &ConnTag<H> {
        &self.tag
    }

    /// The wrapped IO.
    pub fn get_ref(&self) -> &IO {
        &self.io
    }
}

/// Connection addresses of a server IO's `Connected::ConnectInfo`.
pub trait ConnectAddrs {
    /// The peer's address, where known.
    fn peer_addr(&self) -> Option<SocketAddr>;
    /// The local address, where known.
    fn local_addr(&self) -> Option<SocketAddr>;
}

impl ConnectAddrs for TcpConnectInfo {
    fn peer_addr(&self) -> Option<SocketAddr> {
        self.remote_addr
    }

    fn local_addr(&self) -> Option<SocketAddr> {
        self.local_addr
    }
}

impl ConnectAddrs for () {
    fn peer_addr(&self) -> Option<SocketAddr> {
        None
    }

    fn local_addr(&self) -> Option<SocketAddr> {
        None
    }
}

impl<IO, H: StatsHandler> Connected for StatsIo<IO, H> {
    type ConnectInfo = ConnTag<H>;

    fn connect_info(&self) -> ConnTag<H> {
        self.tag.clone()
    }
}

impl<IO: AsyncRead, H: StatsHandler> AsyncRead for StatsIo<IO, H> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.project().io.poll_read(cx, buf)
    }
}

/// Implements a write trait (tokio's `AsyncWrite` or hyper's `rt::Write`,
/// which share their method set) by delegating to the wrapped IO.
macro_rules! delegate_write {
    ($write:path) => {
        impl<IO: $write, H: StatsHandler> $write for StatsIo<IO, H> {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                self.project().io.poll_write(cx, buf)
            }

            fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                self.project().io.poll_flush(cx)
            }

            fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                self.project().io.poll_shutdown(cx)
            }

            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[io::IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                self.project().io.poll_write_vectored(cx, bufs)
            }

            fn is_write_vectored(&self) -> bool {
                self.io.is_write_vectored()
            }
        }
    };
}

delegate_write!(AsyncWrite);
delegate_write!(hyper::rt::Write);

impl<IO: hyper::rt::Read, H: StatsHandler> hyper::rt::Read for StatsIo<IO, H> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        self.project().io.poll_read(cx, buf)
    }
}

pin_project! {
    /// Wraps the server's accepted-connection stream (the `incoming` of
    /// `Server::serve_with_incoming`): every accepted IO becomes a
    /// [`StatsIo`] whose [`ConnTag`] reaches the server layer's RPCs.
    ///
    /// Use the server layer's handler ([`CombinedLayer::handler`](super::CombinedLayer::handler))
    /// so the layer finds the tag.
    pub struct StatsIncoming<I, H> {
        #[pin]
        inner: I,
        handler: Arc<H>,
    }
}

impl<I, H> fmt::Debug for StatsIncoming<I, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StatsIncoming").finish_non_exhaustive()
    }
}

impl<I, H> StatsIncoming<I, H> {
    /// Wraps `incoming`, tagging each connection with `handler`.
    pub fn new(incoming: I, handler: Arc<H>) -> Self {
        Self {
            inner: incoming,
            handler,
        }
    }
}

impl<I, IO, E, H> Stream for StatsIncoming<I, H>
where
    I: Stream<Item = Result<IO, E>>,
    IO: Connected,
    IO::ConnectInfo: ConnectAddrs,
    H: StatsHandler,
{
    type Item = Result<StatsIo<IO, H>, E>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        let handler = this.handler;
        this.inner.poll_next(cx).map(|item| {
            item.map(|accepted| {
                accepted.map(|io| {
                    let addrs = io.connect_info();
                    let info = ConnInfo {
                        side: Side::Server,
                        peer_addr: addrs.peer_addr(),
                        local_addr: addrs.local_addr(),
                    };
                    StatsIo::new(io, Arc::clone(handler), info)
                })
            })
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

/// Wraps a client connector (for `Endpoint::connect_with_connector`):
/// every connection it makes becomes a [`StatsIo`]. The peer address is
/// taken from the URI when it is a literal `ip:port`.
pub struct StatsConnector<C, H> {
    inner: C,
    handler: Arc<H>,
}

impl<C: Clone, H> Clone for StatsConnector<C, H> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            handler: Arc::clone(&self.handler),
        }
    }
}

impl<C: fmt::Debug, H> fmt::Debug for StatsConnector<C, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StatsConnector")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<C, H> StatsConnector<C, H> {
    /// Wraps `connector`, tagging each connection with `handler`.
    pub fn new(connector: C, handler: Arc<H>) -> Self {
        Self {
            inner: connector,
            handler,
        }
    }
}

impl<C, H> Service<Uri> for StatsConnector<C, H>
where
    C: Service<Uri>,
    H: StatsHandler,
{
    type Response = StatsIo<C::Response, H>;
    type Error = C::Error;
    type Future = ConnectFuture<C::Future, H>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), C::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let peer_addr = uri
            .authority()
            .and_then(|authority| authority.as_str().parse().ok());
        ConnectFuture {
            inner: self.inner.call(uri),
            handler: Arc::clone(&self.handler),
            peer_addr,
        }
    }
}

pin_project! {
    /// The future of [`StatsConnector`]: the inner connection, wrapped.
    pub struct ConnectFuture<F, H> {
        #[pin]
        inner: F,
        handler: Arc<H>,
        peer_addr: Option<SocketAddr>,
    }
}

impl<F, H> fmt::Debug for ConnectFuture<F, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectFuture")
            .field("peer_addr", &self.peer_addr)
            .finish_non_exhaustive()
    }
}

impl<F, IO, E, H> Future for ConnectFuture<F, H>
where
    F: Future<Output = Result<IO, E>>,
    H: StatsHandler,
{
    type Output = Result<StatsIo<IO, H>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let io = std::task::ready!(this.inner.poll(cx))?;
        let info = ConnInfo {
            side: Side::Client,
            peer_addr: *this.peer_addr,
            local_addr: None,
        };
        Poll::Ready(Ok(StatsIo::new(io, Arc::clone(this.handler), info)))
    }
}
