//! Connection tracking: each connection wrapped ([`StatsIo`]) and tagged
//! with its handler states ([`ConnTag`]), and found again by its RPCs.
//!
//! - `tag.rs`: a connection's tag (`ConnBegin`, `ConnEnd`, its states).
//! - `io.rs`: the wrapped IO, and the layer it is linked to.
//! - `incoming.rs`: the server's wrapped accepted-connection stream.
//! - `connector.rs`: the client's wrapped connector.
//! - `registry.rs`: a server layer's open (and last closed) connections,
//!   found by a request's connection info; `link.rs`: a client layer's
//!   current connection.

mod connector;
mod incoming;
mod io;
pub(crate) mod link;
pub(crate) mod registry;
mod tag;

pub use connector::{ConnectFuture, StatsConnector};
pub use incoming::{ConnectAddrs, StatsIncoming};
pub use io::StatsIo;
pub use tag::ConnTag;
