//! gRPC binary logging (gRFC A16): every header, message and trailer of
//! the RPCs a filter selects, written as `grpc.binarylog.v1.GrpcLogEntry`
//! exactly as grpc-go writes them.

/// The generated messages of `grpc.binarylog.v1` (from grpc-proto's
/// `binarylog.proto`, regenerated with `tools/gen-protos`). Their `bytes`
/// fields are [`bytes::Bytes`]: a logged message shares the buffer it
/// arrived in.
#[allow(missing_docs, clippy::all, clippy::pedantic, rustdoc::all)]
pub mod proto {
    include!("generated/grpc.binarylog.v1.rs");
}

mod filter;
pub use filter::{Filter, FilterError, Limits};
