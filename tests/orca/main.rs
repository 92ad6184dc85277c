//! ORCA load reports (gRFC A51): the server's recorders, trailer and
//! out-of-band service, the header forms, and the client side, against real
//! tonic servers and clients on 127.0.0.1.

#[path = "../orca_support/mod.rs"]
mod orca_support;

mod client;
