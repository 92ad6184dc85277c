//! The gRPC wire facts every part reads, each parsed in one place
//! (crate-private). Each function states the behaviour it chose where the
//! parts used to disagree, and why; in short:
//!
//! | fact | module | behaviour | why |
//! |---|---|---|---|
//! | gRPC `content-type` | [`content_type`] | `application/grpc` then the end, `+` or `;`, any ASCII case; grpc-web (`-web`, `-web-text`) a separate answer each caller opts into | grpc-go's `ContentSubtype`, with tonic's case (a layer on a tonic server treats as gRPC what tonic serves) |
//! | header lookup | [`headers`] | maps of at most 12 values scanned, larger ones hashed; first value, or exactly one | one measured cut-off |
//! | binary keys | [`keys`] | ending in `-bin` byte for byte; a key not yet lowered, in any ASCII case | tonic's `get_bin` (case-sensitive); tonic's `MetadataKey` lowers a key before it is sent |
//! | reserved keys | [`keys`] | user metadata may not set the transport's keys (any case); a binary log leaves out `grpc-*` but `grpc-trace-bin`, and the transport's own | grpc-go's `isReservedHeader` with tonic's `GRPC_RESERVED_HEADERS` and the codec's two; grpc-go's `metadataKeyOmit` |
//! | `grpc-trace-bin` | [`keys`] | the one name: the propagator's header, and the key a binary log keeps whatever its limits | gRFC A72; grpc-go's binary log |
//! | `-bin` values | `base64` | standard alphabet, unpadded out; in, padded, unpadded or partly padded, canonical last bits | tonic's own engine: the `base64` crate it depends on, in its configuration (BENCHMARKS.md has the measurement) |
//! | org ids | `org_id` | Cortex's rules in one pass over the bytes; a federated value split on `|` once, each member checked as it is reached (an invalid member is the error), then sorted and de-duplicated: `a|a` is `a`. The finding is a crate-private `Fault`, which `tenant` turns, variant for variant, into its public `InvalidOrgIdError` | Cortex's `ValidTenantID`, dskit's `TenantIDs` / `TenantID`; nothing public is defined here |
//! | `grpc-status` | [`status`] | first value, `0`–`16` without leading zeros, else `Unknown` | tonic's `Code::from_bytes` |
//! | `grpc-message` | [`status`] | `%XX` decoded, any other `%` kept, invalid UTF-8 replaced (the code kept) | grpc-go's decoder (tonic would make the status `Unknown`) |
//! | HTTP status without `grpc-status` | [`status`] | `400` `Internal`, `401` `Unauthenticated`, `403` `PermissionDenied`, `404` `Unimplemented`, `429` `502` `503` `504` `Unavailable`, any other `Unknown` | tonic's `infer_grpc_status` (gRPC's http-grpc-status-mapping.md) |
//! | `grpc-timeout` | [`status`] | at most 8 characters, a leading `+` allowed, units `H M S m u n` | the deadline tonic's server enforces |
//!
//! Nothing here is public, and nothing here imports another part: a part
//! with a public type built from a fact (`tenant`'s errors) converts the
//! fact's crate-private finding. Built with any part that reads a request
//! (`metadata` or `stats`, which every other gRPC part implies). Each item
//! is used by some parts only: dead code is allowed in builds without all
//! of them (the build with every feature checks it).
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
pub(crate) mod headers;
pub(crate) mod keys;
#[cfg(feature = "tenant")]
pub(crate) mod org_id;
pub(crate) mod status;
