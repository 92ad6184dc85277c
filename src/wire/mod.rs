//! The gRPC wire facts every part reads, each parsed in one place
//! (crate-private). Each function states the behaviour it chose where the
//! parts used to disagree, and why; in short:
//!
//! | fact | module | behaviour | why |
//! |---|---|---|---|
//! | gRPC `content-type` | [`content_type`] | `application/grpc` then the end, `+` or `;`, any ASCII case; grpc-web (`-web`, `-web-text`) a separate answer each caller opts into | grpc-go's `ContentSubtype`, with tonic's case (a layer on a tonic server treats as gRPC what tonic serves) |
//! | header lookup | [`headers`] | maps of at most 12 values scanned, larger ones hashed; first value, or exactly one | one measured cut-off |
//! | `-bin` values | [`base64`] | standard alphabet, unpadded out; in, padded, unpadded or partly padded, canonical last bits | tonic's engine (checked against the `base64` crate in its configuration) |
//! | org ids | `org_id` | members checked first, then sorted and de-duplicated: `a|a` is `a`, an invalid member is the error | dskit's `TenantIDs` / `TenantID` |
//! | `grpc-status` | [`status`] | first value, `0`–`16` without leading zeros, else `Unknown` | tonic's `Code::from_bytes` |
//! | `grpc-message` | [`status`] | `%XX` decoded, any other `%` kept, invalid UTF-8 replaced (the code kept) | grpc-go's decoder (tonic would make the status `Unknown`) |
//! | `grpc-timeout` | [`status`] | at most 8 characters, a leading `+` allowed, units `H M S m u n` | the deadline tonic's server enforces |
//! | errors to codes | `error_chain` | one walk naming each known link; the client's and the server's mappings fold over it | tonic's `Status::from_error` / `try_from_error`, grpc-go's departures kept in `stats` |
//!
//! Built with any part that reads a request (`metadata` or `stats`, which
//! every other gRPC part implies). Each item is used by some parts only:
//! dead code is allowed in builds without all of them (the build with
//! every feature checks it).
#![cfg_attr(
    not(all(feature = "grpc", feature = "otel", feature = "binlog")),
    allow(dead_code)
)]

#[cfg(any(
    feature = "metadata",
    feature = "otel",
    feature = "binlog",
    feature = "orca"
))]
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
