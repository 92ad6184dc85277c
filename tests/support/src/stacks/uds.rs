//! Unix domain sockets: a listener in a fresh temp dir as an incoming
//! stream (`UnixListenerStream`, whose connections give handlers
//! `UdsConnectInfo`), and channels that connect to it, with this module's
//! connector or a caller's (e.g. a layer's wrapper around
//! [`connector`]). Serve with [`super::spawn_echo`] or any server helper.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use http::Uri;
use hyper_util::rt::TokioIo;
use tokio::net::{UnixListener, UnixStream};
use tokio_stream::wrappers::UnixListenerStream;
use tonic::transport::{Channel, Endpoint};
use tower::Service;

use super::BoxError;

/// A socket path in its own temp dir, removed (with the dir) on drop.
#[derive(Debug)]
pub struct SocketPath {
    dir: PathBuf,
    path: PathBuf,
}

impl SocketPath {
    /// A fresh path `$TMPDIR/tonic-hotpath-<pid>-<n>/s.sock` (the file is
    /// not created).
    pub fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("tonic-hotpath-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the socket dir");
        let path = dir.join("s.sock");
        Self { dir, path }
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Default for SocketPath {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for SocketPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Binds a Unix socket at a fresh [`SocketPath`] (keep it alive while the
/// server runs) and returns the incoming stream to serve.
pub fn bind() -> (SocketPath, UnixListenerStream) {
    let path = SocketPath::new();
    let listener = UnixListener::bind(path.path()).expect("bind the Unix socket");
    (path, UnixListenerStream::new(listener))
}

/// A connector for `Endpoint::connect_with_connector` that ignores the URI
/// and connects to the Unix socket at `path`.
pub fn connector(
    path: &Path,
) -> impl Service<Uri, Response = TokioIo<UnixStream>, Error = std::io::Error, Future: Send + 'static>
+ Clone
+ Send
+ 'static {
    let path = path.to_owned();
    tower::service_fn(move |_: Uri| {
        let path = path.clone();
        async move { Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(path).await?)) }
    })
}

/// A channel to the Unix socket at `path` ([`connector`]).
pub async fn channel(path: &Path) -> Channel {
    channel_with(connector(path)).await
}

/// A channel whose connections come from the caller's `connector` (which
/// should reach the Unix socket, e.g. a layer's wrapper around
/// [`connector`]); the endpoint's URI (`http://uds.invalid`) only names the
/// `:authority`.
pub async fn channel_with<C>(connector: C) -> Channel
where
    C: Service<Uri> + Send + 'static,
    C::Response: hyper::rt::Read + hyper::rt::Write + Send + Unpin,
    C::Future: Send,
    BoxError: From<C::Error> + Send,
{
    Endpoint::from_static("http://uds.invalid")
        .connect_with_connector(connector)
        .await
        .expect("connect over the Unix socket")
}
