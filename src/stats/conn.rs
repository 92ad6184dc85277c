//! A connection observed by a [`StatsHandler`] ([`StatsIo`]) and its tag
//! ([`ConnTag`]): `ConnBegin` when the connection is wrapped, `ConnEnd`
//! when it is dropped, exactly once each. The server's wrapped
//! accepted-connection stream is in `incoming.rs`, the client's wrapped
//! connector in `connector.rs`.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use hyper_util::client::legacy::connect::{Connected as ClientConnected, Connection};
use pin_project_lite::pin_project;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::server::Connected;

use super::StatsHandler;
use super::event::{ConnEvent, ConnInfo};
use super::link::ConnLink;

/// A connection's handler states and addresses.
///
/// On the server, a [`StatsIo`]'s `Connected::ConnectInfo` is its
/// `ConnTag`: tonic puts it into every request's extensions, where the
/// server layer that made the incoming stream
/// ([`CombinedLayer::incoming`](super::CombinedLayer::incoming)) finds it
/// and hands each handler its connection state in
/// [`StatsHandler::tag_rpc`]. It takes the place of tonic's
/// `TcpConnectInfo` there; the server layer puts a `TcpConnectInfo` with
/// the same addresses back, so `tonic::Request::remote_addr()` and
/// `local_addr()` keep working behind the layer.
///
/// On the client, the connection a layer's connector
/// ([`CombinedLayer::connector`](super::CombinedLayer::connector)) opened
/// last is linked to that layer while it is open: RPCs that begin then get
/// its state in `tag_rpc` and its addresses in [`RpcInfo`](super::RpcInfo).
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

    /// Whether this connection was tagged by `handler` (the same handler
    /// object, not just the same type).
    pub(crate) fn is_for(&self, handler: &Arc<H>) -> bool {
        Arc::ptr_eq(&self.shared.handler, handler)
    }

    /// Whether both tags are of the same connection.
    pub(crate) fn same_conn(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
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
        // The client layer this connection is published to, if any.
        link: Option<Arc<ConnLink<H>>>,
    }

    impl<IO, H: StatsHandler> PinnedDrop for StatsIo<IO, H> {
        fn drop(this: Pin<&mut Self>) {
            // Unlinked first: no RPC that begins after `ConnEnd` sees it.
            if let Some(link) = this.link.as_ref() {
                link.withdraw(&this.tag);
            }
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
    /// Wraps `io`, tagging it with `handler` and delivering `ConnBegin`;
    /// then, on the client, publishes it to `link` (after `ConnBegin`, so
    /// no RPC is linked to a connection its handlers have not seen begin).
    pub(crate) fn new(
        io: IO,
        handler: Arc<H>,
        info: ConnInfo,
        link: Option<Arc<ConnLink<H>>>,
    ) -> Self {
        let tag = ConnTag::begin(handler, info);
        if let Some(link) = &link {
            link.publish(tag.clone());
        }
        Self { io, tag, link }
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

/// Forwards hyper-util's client connection metadata (addresses, ALPN) of
/// the wrapped IO, so a `StatsIo` can itself be a connector's IO.
impl<IO: Connection, H: StatsHandler> Connection for StatsIo<IO, H> {
    fn connected(&self) -> ClientConnected {
        self.io.connected()
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
