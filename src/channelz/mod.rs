//! Channelz (gRFC A14): gRPC's live view of a process's servers, channels
//! and sockets, served as `grpc.channelz.v1.Channelz` so that any gRPC tool
//! (grpcurl, grpc-go's channelz client, grpcdebug) can query a running
//! tonic process, fed by the stats layer like any other handler.
//!
//! - [`ServerEntry`]: one server's channelz entry, a
//!   [`StatsHandler`](crate::stats::StatsHandler) for the server's
//!   [`CombinedLayer`](crate::stats::CombinedLayer): its calls, and its
//!   connections as sockets.
//! - [`ChannelEntry`]: the same for a client channel: one top channel
//!   with one subchannel (a tonic `Channel` to one endpoint keeps one
//!   connection at a time) and its connections as sockets.
//! - [`ChannelzService`]: the service over the process's registry;
//!   [`Admin`] adds it with reflection (and health) in one call, as
//!   grpc-go's `admin.Register`.
//!
//! ```no_run
//! use tonic::transport::{Endpoint, Server};
//! use tonic_hotpath::channelz::{Admin, ChannelEntry, ServerEntry};
//! use tonic_hotpath::stats::CombinedLayer;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // Server: the layer counts, the admin services answer.
//! let layer = CombinedLayer::server().with(ServerEntry::new());
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:50051").await?;
//! let router = Server::builder()
//!     .layer(layer.clone())
//!     .add_routes(tonic::service::Routes::default());
//! let server = Admin::new()
//!     .register(router)?
//!     .serve_with_incoming(layer.incoming_tcp(listener));
//! tokio::spawn(server);
//!
//! // Client: a channel registered under its target.
//! let target = "http://127.0.0.1:50051";
//! let client = CombinedLayer::client().with(ChannelEntry::new(target));
//! let channel = Endpoint::from_static(target)
//!     .connect_with_connector(client.connector())
//!     .await?;
//! let channel = tower::ServiceBuilder::new().layer(client).service(channel);
//! # let _ = channel;
//! # Ok(())
//! # }
//! ```
//!
//! # What is reported
//!
//! Servers, channels and subchannels: calls started, succeeded (status
//! `OK`), failed, the last call's start; channels and subchannels also
//! a trace with their creation and grpc-go's creation events ("Channel
//! created for target ...", "Subchannel(id:N) created", "Subchannel
//! created"). As in grpc-go, a
//! timestamp of an event that never happened is the Unix epoch. Sockets: streams started, succeeded and failed as
//! grpc-go's transport counts them, messages sent and received with their
//! last times, local and remote addresses, and for TLS server connections
//! the client's certificate. Left unset, because tonic does not expose
//! them to a layer: connectivity states (and the trace events of their
//! changes), keepalives, flow-control windows,
//! socket options, the TLS cipher suite, Unix socket paths. The handlers'
//! docs say exactly what each counter counts.
//!
//! The client's certificate comes from tonic's `TlsConnectInfo`. tonic
//! 0.14 compiles that type under its public `tls-connect-info` feature but
//! exports it (`tonic::transport::server::TlsConnectInfo`) only under its
//! private `_tls-any` (which each of its TLS features turns on), and a
//! crate cannot see which features another crate's user turned on. So the
//! `channelz` feature turns `_tls-any` on, to name the type whatever TLS
//! feature the application picks. It adds tokio-rustls without a crypto
//! provider; the TLS itself stays the application's choice.
//!
//! # Ids and memory
//!
//! Ids come from one counter for the process: unique, never reused, and
//! increasing in creation order. Entities leave by grpc-go's rule: a
//! socket when its connection closes; a server or channel once its
//! handler is dropped and its sockets are gone. At most
//! [`ChannelzService::MAX_SOCKETS`] sockets are tracked at once;
//! connections past it are not (their calls still count on their server
//! or channel) and [`ChannelzService::untracked_sockets`] counts them.
//!
//! # Cost
//!
//! Creating and removing entities (a connection opening or closing) takes
//! the registry's lock; an RPC never does. A server's or channel's call
//! counters are kept per thread slot on separate cache lines; a socket's
//! are its own atomics, shared only by the RPCs of that connection. Like
//! any handler with connection state, [`ServerEntry`] has the server
//! layer find each RPC's connection in its table of open connections, a
//! concurrent map whose reads take no lock.

mod admin;
mod calls;
mod clock;
mod entity;
mod handler;
mod registry;
mod service;
mod socket;

/// The generated messages, client and server of `grpc.channelz.v1`
/// (from grpc-proto's `channelz.proto`, regenerated with
/// `tools/gen-protos`).
#[allow(missing_docs, clippy::all, clippy::pedantic, rustdoc::all)]
pub mod proto {
    include!("generated/grpc.channelz.v1.rs");
}

pub use admin::{Admin, ReflectionError};
pub use handler::{ChannelEntry, ConnSocket, ListenSocket, RpcSocket, ServerEntry};
pub use service::ChannelzService;
/// tonic-health's reporter, re-exported because a user needs one to call
/// [`Admin::with_health`] (and to set the statuses it serves); naming it
/// here spares a `tonic-health` dependency of the matching version.
pub use tonic_health::server::HealthReporter;

/// Renamed [`ServerEntry`] (a stats handler is named for what it records;
/// see [`stats`](crate::stats#naming)).
#[deprecated(note = "renamed `ServerEntry`")]
pub type ServerHandler = ServerEntry;
/// Renamed [`ChannelEntry`].
#[deprecated(note = "renamed `ChannelEntry`")]
pub type ChannelHandler = ChannelEntry;

/// Moved to [`ChannelzService::FILE_DESCRIPTOR_SET`].
#[deprecated(note = "use `ChannelzService::FILE_DESCRIPTOR_SET`")]
pub const FILE_DESCRIPTOR_SET: &[u8] = ChannelzService::FILE_DESCRIPTOR_SET;
