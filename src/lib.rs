//! Hot-path building blocks for [tonic](https://docs.rs/tonic) gRPC services
//! and clients, each a Rust take on a proven fix from the Go gRPC world:
//!
//! - [`metadata`]: a persistent, O(1)-append chain of outgoing metadata
//!   (grpc-go's `AppendToOutgoingContext`, fixed by a delta list).
//! - [`tenant`]: zero-copy `x-scope-orgid` extraction, validation and
//!   injection (Cortex's org-id handling), with server and client layers.
//! - [`stats`]: a `StatsHandler` trait with grpc-go's event set and a
//!   `CombinedLayer` that feeds many handlers from one instrumentation point.
//! - [`arena`]: a cursor-tracked `MonotonicArena` with wundergraph go-arena's
//!   semantics, sound in Rust.
//!
//! Features: `grpc` (metadata, tenant, stats; pulls in tonic) and `arena`
//! (no tonic), both on by default.
#![deny(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "grpc")]
pub mod metadata;

#[cfg(feature = "grpc")]
pub mod tenant;

#[cfg(feature = "grpc")]
pub mod stats;

#[cfg(feature = "arena")]
#[allow(unsafe_code)]
pub mod arena;
