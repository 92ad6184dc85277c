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

// What is logged: the filter (which calls, how much of them), the
// per-call rules that turn stats events into entries, and the handler.
mod address;
mod call;
mod cancel;
mod encode;
mod filter;
mod log;
pub(crate) mod metadata;

pub use filter::{Filter, FilterError, LogLimits};
pub use log::{BinaryLog, BinaryLogBuilder, CallLog};

// Where entries go: the sink trait and the framings (the bottom floor),
// the file sink, the reader of what it wrote, and the writer thread that
// takes entries off the RPC path.
mod file;
mod reader;
mod sink;
mod writer;

pub use file::{FileSink, Rotation};
#[allow(deprecated)]
pub use reader::DEFAULT_MAX_ENTRY_LEN;
pub use reader::{LogReader, read_log};
pub use sink::{Framing, Sink};
pub use writer::{LogCounts, WriterOptions};
