//! Metadata keys with a meaning on the wire: the `-bin` suffix of binary
//! values, the keys gRPC's transport manages (which user metadata may not
//! set, and which a binary log leaves out), and `grpc-trace-bin`.

use http::HeaderName;

/// The suffix of a key whose values are binary (base64 on the wire).
pub(crate) const BIN_SUFFIX: &str = "-bin";

/// The binary trace context (gRFC A72, OpenCensus's binary format). A
/// binary log keeps it whatever its limits.
pub(crate) const GRPC_TRACE_BIN: &str = "grpc-trace-bin";

/// Whether `key` names binary values: it ends in `-bin`, byte for byte.
/// This is tonic's own test (`MetadataMap::get_bin`), and the whole test
/// for a header name (lower case already). Usable in `const` code.
#[inline]
pub(crate) const fn is_binary(key: &[u8]) -> bool {
    ends_with(key, BIN_SUFFIX.as_bytes())
}

/// [`is_binary`] for a key that is lowered before it is sent: `-bin` in
/// any ASCII case (`X-Token-BIN` is sent as `x-token-bin`).
#[inline]
pub(crate) fn is_binary_any_case(key: &[u8]) -> bool {
    key.len() >= BIN_SUFFIX.len()
        && key[key.len() - BIN_SUFFIX.len()..].eq_ignore_ascii_case(BIN_SUFFIX.as_bytes())
}

/// Headers the gRPC transport manages itself; user metadata may not set
/// them (the metadata chain refuses them, and a base map loses them).
///
/// The union of grpc-go's reserved set (`isReservedHeader` in
/// `internal/transport/http_util.go`: `content-type`, `user-agent`,
/// `grpc-message-type`, `grpc-encoding`, `grpc-message`, `grpc-status`,
/// `grpc-timeout`, `te`, plus every `:` pseudo-header, which the metadata
/// key charset refuses anyway), whose transport drops them from outgoing
/// metadata, and tonic's `GRPC_RESERVED_HEADERS` (`te`, `content-type`,
/// `grpc-message`, `grpc-message-type`, `grpc-status`), plus the codec's
/// `grpc-status-details-bin` and `grpc-accept-encoding`. A `grpc-timeout`
/// sent as metadata would become the call's deadline (tonic's channel
/// reads it), a `user-agent` would be prefixed to tonic's own.
pub(crate) const RESERVED_KEYS: [&str; 10] = [
    "te",
    "content-type",
    "user-agent",
    "grpc-status",
    "grpc-message",
    "grpc-message-type",
    "grpc-status-details-bin",
    "grpc-encoding",
    "grpc-accept-encoding",
    "grpc-timeout",
];

/// Whether `key` is one of [`RESERVED_KEYS`] (ASCII case-insensitive).
#[inline]
pub(crate) fn is_reserved(key: &[u8]) -> bool {
    // Every reserved key starts with `t`, `c`, `u` or `g`: one branch for
    // the usual `x-...` keys.
    if !matches!(
        key.first().map(u8::to_ascii_lowercase),
        Some(b't' | b'c' | b'u' | b'g')
    ) {
        return false;
    }
    RESERVED_KEYS.iter().any(|reserved| {
        reserved.len() == key.len() && reserved.as_bytes().eq_ignore_ascii_case(key)
    })
}

/// [`is_reserved`] for a header name, which is lower case already: one
/// exact comparison per reserved key of the same length.
#[inline]
pub(crate) fn is_reserved_name(name: &HeaderName) -> bool {
    let name = name.as_str();
    matches!(name.as_bytes().first(), Some(b't' | b'c' | b'u' | b'g'))
        && RESERVED_KEYS.contains(&name)
}

/// [`is_reserved`] for lower-case keys, usable in `const` code.
pub(crate) const fn is_reserved_lower(key: &[u8]) -> bool {
    let mut i = 0;
    while i < RESERVED_KEYS.len() {
        let reserved = RESERVED_KEYS[i].as_bytes();
        if reserved.len() == key.len() && ends_with(key, reserved) {
            return true;
        }
        i += 1;
    }
    false
}

/// Whether grpc-go leaves `key` (a lower-case header name) out of a binary
/// log (`metadataKeyOmit` in `internal/binarylog/method_logger.go`): the
/// headers gRPC itself manages (`grpc-*` but [`GRPC_TRACE_BIN`]) and the
/// transport's own. A list of its own beside [`RESERVED_KEYS`]: it also
/// leaves out `lb-token`, `content-encoding`, the pseudo-headers and every
/// other `grpc-*` key.
pub(crate) fn binlog_omits(key: &str) -> bool {
    match key {
        "lb-token" | ":path" | ":authority" | "content-encoding" | "content-type"
        | "user-agent" | "te" => true,
        GRPC_TRACE_BIN => false,
        _ => key.starts_with("grpc-"),
    }
}

/// Whether `key` ends in `suffix` (byte for byte), usable in `const` code.
const fn ends_with(key: &[u8], suffix: &[u8]) -> bool {
    if key.len() < suffix.len() {
        return false;
    }
    let mut i = 0;
    while i < suffix.len() {
        if key[key.len() - suffix.len() + i] != suffix[i] {
            return false;
        }
        i += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binary_key_ends_in_bin_exactly_or_in_any_case_before_lowering() {
        for key in [&b"-bin"[..], b"x-bin", b"grpc-trace-bin", b"x--bin"] {
            assert!(is_binary(key));
            assert!(is_binary_any_case(key));
        }
        for key in [&b"x-Bin"[..], b"X-TOKEN-BIN"] {
            assert!(!is_binary(key), "tonic's get_bin: case-sensitive");
            assert!(is_binary_any_case(key));
        }
        for key in [&b""[..], b"bin", b"-bi", b"x-bin-", b"xbin", b"x-bin "] {
            assert!(!is_binary(key));
            assert!(!is_binary_any_case(key));
        }
    }

    #[test]
    fn reserved_keys_are_matched_case_insensitively() {
        for reserved in RESERVED_KEYS {
            assert!(is_reserved(reserved.as_bytes()), "{reserved}");
            assert!(is_reserved_lower(reserved.as_bytes()), "{reserved}");
            assert!(is_reserved_name(&HeaderName::from_static(reserved)));
            assert!(
                is_reserved(reserved.to_ascii_uppercase().as_bytes()),
                "{reserved}"
            );
            assert!(!is_reserved_lower(reserved.to_ascii_uppercase().as_bytes()));
        }
        assert!(is_reserved(b"Content-Type"));
        assert!(!is_reserved(b"grpc-messagf"));
        assert!(!is_reserved(b"content-typf"));
        assert!(is_reserved(b"te"));
        assert!(!is_reserved(b"tee"));
        assert!(!is_reserved_lower(b"tee"));
        assert!(!is_reserved_lower(b"e"), "a suffix of a reserved key");
        assert!(is_reserved(b"grpc-timeout"));
        assert!(is_reserved(b"User-Agent"));
        assert!(!is_reserved(b"user-agents"));
        assert!(!is_reserved_name(&HeaderName::from_static("x-te")));
    }

    #[test]
    fn a_binary_log_omits_what_grpc_go_omits() {
        for key in [
            "lb-token",
            ":path",
            ":authority",
            "content-encoding",
            "content-type",
            "user-agent",
            "te",
            "grpc-status",
            "grpc-anything",
        ] {
            assert!(binlog_omits(key), "{key}");
        }
        for key in [GRPC_TRACE_BIN, "x-user", "grpc", "accept-encoding"] {
            assert!(!binlog_omits(key), "{key}");
        }
    }
}
