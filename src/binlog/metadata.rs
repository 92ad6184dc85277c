//! Headers as binary log metadata: grpc-go's omissions, binary values
//! decoded, and its truncation rule, encoded straight from the headers.

use bytes::Bytes;
use http::HeaderMap;

use super::encode::{bytes_field_len, encode_bytes_field, encode_message_key, message_field_len};
use crate::wire::base64::{base64_decode, base64_decode_into, base64_decoded_len};
use crate::wire::keys::{GRPC_TRACE_BIN, binlog_omits, is_binary};

/// The application's metadata in `headers` as a `grpc.binarylog.v1.Metadata`
/// logs it, measured without copying anything: the headers grpc-go does
/// not leave out, in their order, binary (`-bin`) values decoded from
/// base64 (a value that does not decode is logged as sent), the others as
/// sent, cut by grpc-go's `truncateMetadata` rule: the entries up to (not
/// including) the first whose key and value would take the total past the
/// limit; `grpc-trace-bin` entries before it are kept and not counted.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LoggedMetadata<'h> {
    headers: &'h HeaderMap,
    /// How many of the entries not left out are kept.
    kept: usize,
    /// Whether an entry was cut.
    truncated: bool,
    /// The `Metadata` message's encoded length.
    encoded_len: usize,
}

impl<'h> LoggedMetadata<'h> {
    /// `headers`' metadata within `limit` bytes of keys and values
    /// (`u64::MAX`: no limit).
    pub(crate) fn new(headers: &'h HeaderMap, limit: u64) -> Self {
        let mut budget = limit;
        let mut kept = 0;
        let mut encoded_len = 0;
        let mut truncated = false;
        for (key, value) in logged(headers) {
            let value_len = decoded_len(key, value);
            if limit != u64::MAX && key != GRPC_TRACE_BIN {
                let len = (key.len() + value_len) as u64;
                if len > budget {
                    truncated = true;
                    break;
                }
                budget -= len;
            }
            kept += 1;
            encoded_len += message_field_len(1, entry_len(key, value_len));
        }
        Self {
            headers,
            kept,
            truncated,
            encoded_len,
        }
    }

    /// Whether entries were left out for the limit.
    pub(crate) fn truncated(&self) -> bool {
        self.truncated
    }

    /// The encoded length of the `Metadata` message.
    pub(crate) fn encoded_len(&self) -> usize {
        self.encoded_len
    }

    /// Appends the `Metadata` message's fields (its `MetadataEntry`s) to
    /// `buf`.
    pub(crate) fn encode(&self, buf: &mut Vec<u8>) {
        for (key, value) in logged(self.headers).take(self.kept) {
            let value_len = decoded_len(key, value);
            encode_message_key(1, entry_len(key, value_len), buf);
            encode_bytes_field(1, key.as_bytes(), buf);
            if value_len == 0 {
                continue;
            }
            // `MetadataEntry.value`, tag 2: decoded where it decodes.
            encode_message_key(2, value_len, buf);
            if !(is_binary(key.as_bytes()) && base64_decode_into(value, buf)) {
                buf.extend_from_slice(value);
            }
        }
    }
}

/// The headers grpc-go logs, as key and raw value.
fn logged(headers: &HeaderMap) -> impl Iterator<Item = (&str, &[u8])> {
    headers
        .iter()
        .map(|(key, value)| (key.as_str(), value.as_bytes()))
        .filter(|(key, _)| !binlog_omits(key))
}

/// The length of the value logged for `key`: decoded for a binary key
/// whose value decodes.
fn decoded_len(key: &str, value: &[u8]) -> usize {
    match is_binary(key.as_bytes()) {
        true => base64_decoded_len(value).unwrap_or(value.len()),
        false => value.len(),
    }
}

/// The encoded length of a `MetadataEntry` (key is never empty).
fn entry_len(key: &str, value_len: usize) -> usize {
    bytes_field_len(1, key.len()) + bytes_field_len(2, value_len)
}

/// `grpc-status-details-bin`, decoded (empty when absent or not base64).
pub(crate) fn status_details(headers: &HeaderMap) -> Bytes {
    headers
        .get("grpc-status-details-bin")
        .and_then(|value| base64_decode(value.as_bytes()))
        .map(Bytes::from)
        .unwrap_or_default()
}
