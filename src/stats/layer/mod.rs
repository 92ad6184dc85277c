//! The tower layer, shaped as tower shapes a middleware: the layer and its
//! service ([`CombinedLayer`], [`CombinedService`]), the
//! response future ([`ResponseFuture`]), the observed body
//! ([`ObservedBody`]) and what they share:
//!
//! - `layer.rs`: the layer, its server and client services, a request's
//!   beginning; `connections.rs`: the connection wrappers it builds;
//!   `side.rs`: the side markers and the client transport bound;
//!   `handler_set.rs`: the sealed bound on what the layer holds.
//! - `future.rs`: the response future (response headers, a failed call).
//! - `body.rs`: the body wrapper (payload events, trailers, `End`);
//!   `messages.rs`: one body's messages (framing, compressed sizes);
//!   `pieces.rs`: the bytes of a message in progress, kept for them.
//! - `recorder.rs`: the per-RPC record (handler states, exactly one
//!   `End`); `record_ref.rs`: a holder's reference to it; `idle.rs`:
//!   the per-thread free lists records return to.
//! - `service_core.rs`: what a layered service shares with its RPCs;
//!   `open_service.rs`: the service while a clone of it lives (dropping
//!   the last closes its free lists).
//! - `status.rs`: the status an RPC ended with, mapped from an error by
//!   `error_chain.rs` (what each link of its source chain is, walked
//!   once for the client's and the server's mappings); `headers.rs`: the gRPC
//!   headers read on the way (`grpc-status`, `grpc-timeout`, encodings);
//!   `context.rs`: the context (`ServiceContext`) a server RPC's inner
//!   service runs in.

mod body;
mod connections;
mod context;
mod ending;
pub(crate) mod error_chain;
mod future;
mod handler_set;
pub(crate) mod headers;
mod idle;
#[allow(clippy::module_inception)]
mod layer;
mod messages;
mod open_service;
mod pieces;
mod record_ref;
mod recorder;
mod service_core;
mod side;
pub(crate) mod status;

pub use body::ObservedBody;
pub use future::ResponseFuture;
pub use handler_set::HandlerSet;
pub use layer::{CombinedLayer, CombinedService};
pub use side::{ClientSide, ClientTransport, ServerSide};
