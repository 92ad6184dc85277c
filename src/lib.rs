// The README is the crate documentation; its examples use every part, so
// they are compiled as doc tests only when every part is built.
#![cfg_attr(
    all(feature = "grpc", feature = "arena", feature = "otel"),
    doc = include_str!("../README.md")
)]
#![cfg_attr(
    not(all(feature = "grpc", feature = "arena", feature = "otel")),
    doc = "Hot-path building blocks for tonic gRPC services; see the README."
)]
#![deny(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(any(feature = "metadata", feature = "stats"))]
mod wire;

#[cfg(feature = "metadata")]
pub mod metadata;

#[cfg(feature = "tenant")]
pub mod tenant;

#[cfg(feature = "limits")]
pub mod limits;

#[cfg(feature = "stats")]
pub mod stats;

#[cfg(feature = "retry")]
pub mod retry;

#[cfg(feature = "otel")]
pub mod otel;

#[cfg(feature = "channelz")]
pub mod channelz;

#[cfg(feature = "binlog")]
pub mod binlog;

#[cfg(feature = "orca")]
pub mod orca;

#[cfg(feature = "arena")]
#[allow(unsafe_code)]
pub mod arena;

// Not for users: the crate's own fuzz targets drive these parsers.
#[cfg(feature = "bench-internals")]
#[doc(hidden)]
pub mod internals;
