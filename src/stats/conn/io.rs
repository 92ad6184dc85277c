//! A connection observed by a [`StatsHandler`] ([`StatsIo`]), tagged with
//! a [`ConnTag`]: `ConnBegin` when the connection is wrapped, `ConnEnd`
//! when it is dropped, exactly once each. The server's wrapped
//! accepted-connection stream is in `incoming.rs`, the client's wrapped
//! connector in `connector.rs`.

use http::uri::Authority;
use std::fmt;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use hyper_util::client::legacy::connect::{Connected as ClientConnected, Connection};
use pin_project_lite::pin_project;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::server::Connected;

use super::link::ConnLink;
use super::registry::{ConnKey, ConnRegistry};
use super::tag::ConnTag;
use crate::stats::{ConnInfo, StatsHandler};

pin_project! {
    /// A connection observed by a [`StatsHandler`]: `ConnBegin` on creation,
    /// `ConnEnd` on drop. Reads and writes pass straight through (tokio's
    /// `AsyncRead`/`AsyncWrite` or hyper's `rt::Read`/`rt::Write`, whichever
    /// the wrapped IO implements).
    pub struct StatsIo<IO, H: StatsHandler> {
        #[pin]
        io: IO,
        tag: ConnTag<H>,
        // The layer whose RPCs this connection is linked to, if any.
        owner: ConnOwner<H>,
    }

    impl<IO, H: StatsHandler> PinnedDrop for StatsIo<IO, H> {
        fn drop(this: Pin<&mut Self>) {
            // Unlinked first. A client RPC that begins after `ConnEnd` is
            // not linked to it (its channel dials anew). A server call
            // accepted on it still is, also when hyper dispatches it
            // after `ConnEnd` (see `registry.rs`), as grpc-go's `TagRPC`
            // sees the transport's context.
            this.owner.unlink(&this.tag);
            this.tag.end();
        }
    }
}

/// The layer a connection is linked to, so that its RPCs find it.
pub(crate) enum ConnOwner<H: StatsHandler> {
    /// Not linked (the handlers keep no connection state).
    None,
    /// A client layer: the connection is published as its current one.
    Client(Arc<ConnLink<H>>),
    /// A server layer: the connection is registered under the keys read
    /// from the `ConnectInfo` tonic takes from it (once per connection),
    /// and marked closed under them when it is dropped.
    Server {
        registry: Arc<ConnRegistry<H>>,
        keys: Mutex<Vec<ConnKey>>,
    },
}

impl<H: StatsHandler> ConnOwner<H> {
    /// A server connection to register with `registry` once its
    /// `ConnectInfo` is read.
    pub(crate) fn server(registry: Arc<ConnRegistry<H>>) -> Self {
        ConnOwner::Server {
            registry,
            keys: Mutex::new(Vec::new()),
        }
    }

    fn register(&self, info: &(dyn std::any::Any + 'static), tag: &ConnTag<H>) {
        let ConnOwner::Server { registry, keys } = self else {
            return;
        };
        let Some(key) = ConnKey::of(info) else {
            return;
        };
        let mut keys = keys.lock().unwrap_or_else(PoisonError::into_inner);
        if !keys.contains(&key) {
            keys.push(key);
        }
        registry.insert(key, tag);
    }

    fn unlink(&self, tag: &ConnTag<H>) {
        match self {
            ConnOwner::None => {}
            ConnOwner::Client(link) => link.withdraw(tag),
            ConnOwner::Server { registry, keys } => {
                let keys =
                    std::mem::take(&mut *keys.lock().unwrap_or_else(PoisonError::into_inner));
                for key in keys {
                    registry.close(key, tag);
                }
            }
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
    /// then links it to its `owner` layer (after `ConnBegin`, so no RPC is
    /// linked to a connection its handlers have not seen begin): a client
    /// layer at once, a server layer when tonic reads its `ConnectInfo`.
    /// `authority` is the one a client connection was dialled for.
    pub(crate) fn new(
        io: IO,
        handler: Arc<H>,
        info: ConnInfo,
        authority: Option<Authority>,
        owner: ConnOwner<H>,
    ) -> Self {
        let tag = ConnTag::begin(handler, info, authority);
        if let ConnOwner::Client(link) = &owner {
            link.publish(tag.clone());
        }
        Self { io, tag, owner }
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

/// The wrapped IO's own connection info, unchanged: tonic inserts it into
/// every request (behind TLS inside `TlsConnectInfo`), so
/// `Request::remote_addr()`, `peer_certs()`, `UdsConnectInfo` and every
/// layer keep seeing exactly what they see without the wrapper. Reading
/// it links the connection to its server layer.
impl<IO: Connected, H: StatsHandler> Connected for StatsIo<IO, H> {
    type ConnectInfo = IO::ConnectInfo;

    fn connect_info(&self) -> IO::ConnectInfo {
        let info = self.io.connect_info();
        self.owner.register(&info, &self.tag);
        info
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
