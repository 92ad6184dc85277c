//! Headers as binary log metadata: grpc-go's omissions, binary values
//! decoded, and its truncation rule.

use bytes::Bytes;
use http::HeaderMap;

use super::proto::{Metadata, MetadataEntry};
use crate::wire::base64::base64_decode;

/// The one header kept whatever the limits, and not counted in them.
const TRACE_BIN: &str = "grpc-trace-bin";

/// Whether grpc-go leaves `key` out of a log (`metadataKeyOmit`): the
/// headers gRPC itself manages (`grpc-*` but `grpc-trace-bin`) and the
/// transport's own.
pub(crate) fn omitted(key: &str) -> bool {
    match key {
        "lb-token" | ":path" | ":authority" | "content-encoding" | "content-type"
        | "user-agent" | "te" => true,
        TRACE_BIN => false,
        _ => key.starts_with("grpc-"),
    }
}

/// The application's metadata in `headers`, in their order: binary
/// (`-bin`) values decoded from base64 (a value that does not decode is
/// logged as sent), the others as sent.
pub(crate) fn metadata(headers: &HeaderMap) -> Metadata {
    let entry = headers
        .iter()
        .filter(|(key, _)| !omitted(key.as_str()))
        .map(|(key, value)| {
            let key = key.as_str();
            let value = match key.ends_with("-bin") {
                true => base64_decode(value.as_bytes())
                    .map(Bytes::from)
                    .unwrap_or_else(|| Bytes::copy_from_slice(value.as_bytes())),
                false => Bytes::copy_from_slice(value.as_bytes()),
            };
            MetadataEntry {
                key: key.to_owned(),
                value,
            }
        })
        .collect();
    Metadata { entry }
}

/// `grpc-status-details-bin`, decoded (empty when absent or not base64).
pub(crate) fn status_details(headers: &HeaderMap) -> Bytes {
    headers
        .get("grpc-status-details-bin")
        .and_then(|value| base64_decode(value.as_bytes()))
        .map(Bytes::from)
        .unwrap_or_default()
}

/// grpc-go's `truncateMetadata`: keeps the entries up to (not including)
/// the first whose key and value would take the total past `limit`
/// bytes; `grpc-trace-bin` entries before it are kept and not counted.
/// Whether any entry was dropped. `u64::MAX` is no limit.
pub(crate) fn truncate_metadata(metadata: &mut Metadata, limit: u64) -> bool {
    if limit == u64::MAX {
        return false;
    }
    let mut budget = limit;
    let mut index = 0;
    while let Some(entry) = metadata.entry.get(index) {
        if entry.key != TRACE_BIN {
            let len = (entry.key.len() + entry.value.len()) as u64;
            if len > budget {
                break;
            }
            budget -= len;
        }
        index += 1;
    }
    let truncated = index < metadata.entry.len();
    metadata.entry.truncate(index);
    truncated
}
