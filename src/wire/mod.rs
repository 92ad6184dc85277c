//! The gRPC wire facts every part reads, each parsed in one place
//! (crate-private): the `content-type` rule, the small-map header scan,
//! and the readings built on them. Each function states the behaviour it
//! chose where the parts used to disagree, and why.
//!
//! Built with any part that reads a request (`metadata` or `stats`, which
//! every other gRPC part implies). Each item is used by some parts only:
//! dead code is allowed in builds without all of them (the build with
//! every feature checks it).
#![cfg_attr(
    not(all(feature = "grpc", feature = "otel", feature = "binlog")),
    allow(dead_code)
)]

pub(crate) mod base64;
pub(crate) mod content_type;
#[cfg(feature = "stats")]
pub(crate) mod error_chain;
pub(crate) mod headers;
#[cfg(feature = "tenant")]
pub(crate) mod org_id;
#[cfg(feature = "tenant")]
pub(crate) mod org_id_error;
pub(crate) mod status;
