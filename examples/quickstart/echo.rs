//! The echo gRPC service the quickstart serves and calls: `EchoRequest`,
//! `EchoResponse`, `EchoClient`, and `EchoServer` over the `Echo` trait.
//!
//! `echo_pb.rs` is tonic-prost-build's output for `echo.proto` (both beside
//! this file), checked in, so the example needs neither protoc nor a build
//! script, only the crates the generated code names: tonic, tonic-prost and
//! prost. `echo.proto` is the unary part of tonic-hotpath's test echo
//! service; the test suite has its own copy, with the streaming methods too,
//! in `tests/support/` (`echo.proto`, `echo_pb.rs`). Both use the same
//! package, service and method names, so they speak the same wire protocol.
//!
//! To regenerate `echo_pb.rs` after editing `echo.proto`, run
//! tonic-prost-build once (with protoc on the `PATH`, or the `PROTOC`
//! variable pointing at one, e.g. from the `protoc-bin-vendored` crate):
//!
//! ```ignore
//! tonic_prost_build::configure()
//!     .out_dir("examples/quickstart")
//!     .compile_protos(&["examples/quickstart/echo.proto"], &["examples/quickstart"])?;
//! // It names the file after the proto package: rename it.
//! std::fs::rename("examples/quickstart/hotpath.echo.rs", "examples/quickstart/echo_pb.rs")?;
//! ```
//!
//! (A project that does not mind protoc at build time can instead call
//! `tonic_prost_build::compile_protos("echo.proto")` from a `build.rs` and
//! replace the `include!` below with `tonic::include_proto!("hotpath.echo");`.)

include!("echo_pb.rs");

pub use echo_client::EchoClient;
pub use echo_server::{Echo, EchoServer};
