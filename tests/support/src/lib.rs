//! The shared support of tonic-hotpath's tests and benches, a
//! dev-dependency (named `support`) that is never published:
//!
//! - at the root: the echo service (`echo.proto`, [`EchoService`], and
//!   [`EchoOverride`] for a service that differs in some methods), a
//!   loopback server and client ([`bind`], [`connect`], [`spawn_echo`]),
//!   and waiting with a deadline ([`PATIENCE`], [`wait_until`]);
//! - [`skip`]: the notice of a test skipped for want of a program
//!   (`redis-server`, `go`), where the user sees it, or its failure under
//!   `CI`; [`go_interop`]: the Go peers of `interop/`, built on demand;
//! - [`alloc_count`]: the counting global allocators;
//! - [`stacks`]: servers and clients on the stacks users run (axum,
//!   tonic-web, TLS, Unix sockets, compression, junk), [`h2_reply`]: a raw
//!   HTTP/2 peer;
//! - one module per part, built only with its feature: `stats_harness`,
//!   `stats_events` and `compression` (`stats`), `tenant`, `limits`,
//!   `otel` and `otel_harness`, `channelz`, `orca`; [`overload`] (`limits`):
//!   issue #46's server of known capacity, open-loop load and its report.
//!
//! It depends on tonic-hotpath itself: the test and bench binaries link
//! one copy of the crate, built with their features, and this crate's
//! same-named features follow them (tonic-hotpath's `[features]` turn them
//! on).

use std::net::SocketAddr;

use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Endpoint};

pub mod alloc_count;
#[cfg(feature = "channelz")]
pub mod channelz;
#[cfg(all(feature = "stats", feature = "bench-internals"))]
pub mod compression;
mod echo;
pub mod go_interop;
pub mod h2_reply;
#[cfg(feature = "limits")]
pub mod limits;
#[cfg(feature = "orca")]
pub mod orca;
#[cfg(feature = "otel")]
pub mod otel;
#[cfg(all(feature = "otel", feature = "metadata"))]
pub mod otel_harness;
#[cfg(feature = "limits")]
pub mod overload;
mod round_robin;
pub mod skip;
pub mod stacks;
#[cfg(feature = "stats")]
pub mod stats_events;
#[cfg(feature = "stats")]
pub mod stats_harness;
#[cfg(feature = "tenant")]
pub mod tenant;

pub use echo::{
    Echo, EchoClient, EchoOverride, EchoRequest, EchoResponse, EchoServer, EchoService,
    ResponseStream, pb,
};
pub use round_robin::RoundRobin;

/// Binds `127.0.0.1:0` and returns the bound address and the incoming
/// connection stream to hand to `Server::serve_with_incoming`.
///
/// Accepted connections get `TCP_NODELAY`: `serve_with_incoming` ignores the
/// builder's `tcp_nodelay`, and without it Nagle's algorithm plus delayed
/// ACKs stall small HTTP/2 writes by about 40 ms.
pub async fn bind() -> (SocketAddr, TcpIncoming) {
    let incoming = TcpIncoming::bind("127.0.0.1:0".parse().expect("loopback address"))
        .expect("bind 127.0.0.1:0")
        .with_nodelay(Some(true));
    let addr = incoming.local_addr().expect("local addr");
    (addr, incoming)
}

/// An endpoint for `addr` (plain HTTP/2 over TCP).
pub fn endpoint(addr: SocketAddr) -> Endpoint {
    Endpoint::from_shared(format!("http://{addr}")).expect("valid endpoint uri")
}

/// Connects a `Channel` to `addr`.
pub async fn connect(addr: SocketAddr) -> Channel {
    endpoint(addr)
        .connect()
        .await
        .expect("connect to test server")
}

/// How long a test waits for what the protocol promises before it fails.
/// Generous on purpose: a busy 2-core machine can stall a task for
/// seconds, and a wait whose condition is met returns at once, so only a
/// real failure pays it.
pub const PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// The instant [`PATIENCE`] from now: polling loops run
/// `while Instant::now() < deadline`.
pub fn deadline() -> std::time::Instant {
    std::time::Instant::now() + PATIENCE
}

/// Waits (up to [`PATIENCE`]) for `done`, checking every 5 ms; panics
/// naming `what` on timeout.
pub async fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = deadline();
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out after {PATIENCE:?} waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

/// Starts the plain [`EchoService`] with no layers and returns its address.
pub async fn spawn_echo() -> SocketAddr {
    let (addr, incoming) = bind().await;
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(EchoServer::new(EchoService))
            .serve_with_incoming(incoming),
    );
    addr
}
