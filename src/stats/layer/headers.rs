//! Reading the gRPC headers the layer needs (`content-type`, `grpc-status`,
//! `grpc-message`, `grpc-timeout`, `grpc-encoding`), without building a
//! `tonic::Status` or a `MetadataMap` (see TONIC-NOTES A6): pure functions.

use std::time::Duration;

use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderName, HeaderValue};

// Pre-built names: a lookup by `&HeaderName` skips parsing the name.
pub(crate) const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");
pub(crate) const GRPC_MESSAGE: HeaderName = HeaderName::from_static("grpc-message");
pub(crate) const GRPC_TIMEOUT: HeaderName = HeaderName::from_static("grpc-timeout");
pub(crate) const GRPC_ENCODING: HeaderName = HeaderName::from_static("grpc-encoding");
pub(crate) const GRPC_ACCEPT_ENCODING: HeaderName = HeaderName::from_static("grpc-accept-encoding");

/// Whether `headers` are those of a gRPC request or response: a
/// `content-type` of `application/grpc`, `application/grpc+<subtype>` or
/// `application/grpc;<parameters>` (grpc-go's `ContentSubtype` rule; the
/// type compared without regard to ASCII case). grpc-web
/// (`application/grpc-web...`) and everything else is not.
#[inline]
pub(crate) fn is_grpc(headers: &HeaderMap) -> bool {
    const GRPC: &[u8] = b"application/grpc";
    let Some(value) = find(headers, &CONTENT_TYPE) else {
        return false;
    };
    let value = value.as_bytes();
    value
        .get(..GRPC.len())
        .is_some_and(|prefix| prefix.eq_ignore_ascii_case(GRPC))
        && matches!(value.get(GRPC.len()), None | Some(b'+' | b';'))
}

/// The compressed encodings a tonic client accepts in responses: those it
/// lists in its request's `grpc-accept-encoding` (tonic sends its
/// `accept_compressed` set there, and nothing when the set is empty).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct AcceptedEncodings(u8);

impl AcceptedEncodings {
    /// The encodings tonic can decompress, by bit.
    const KNOWN: [&'static [u8]; 3] = [b"gzip", b"deflate", b"zstd"];

    /// The encodings the request's headers list.
    #[inline]
    pub(crate) fn of_request(headers: &HeaderMap) -> Self {
        match find(headers, &GRPC_ACCEPT_ENCODING) {
            None => Self(0),
            Some(_) => Self::listed(headers),
        }
    }

    #[cold]
    fn listed(headers: &HeaderMap) -> Self {
        let mut bits = 0;
        for value in headers.get_all(&GRPC_ACCEPT_ENCODING) {
            for listed in value.as_bytes().split(|&b| b == b',') {
                if let Some(bit) = Self::bit(listed.trim_ascii()) {
                    bits |= bit;
                }
            }
        }
        Self(bits)
    }

    fn bit(encoding: &[u8]) -> Option<u8> {
        Self::KNOWN
            .iter()
            .position(|known| *known == encoding)
            .map(|index| 1 << index)
    }

    /// Whether a response body compressed with the `grpc-encoding`
    /// `encoding` is accepted: `identity`, or a listed encoding tonic
    /// knows (tonic's `CompressionEncoding::from_encoding_header`).
    pub(crate) fn accepts(self, encoding: &[u8]) -> bool {
        encoding == b"identity" || Self::bit(encoding).is_some_and(|bit| self.0 & bit != 0)
    }
}

/// Looks `name` up in `headers`: small maps (gRPC trailers usually hold
/// one entry, request headers a handful) are scanned, which is cheaper than
/// hashing the name; larger ones use the hash lookup. The scan walks the
/// keys only (no multi-value links); most lookups miss (`grpc-timeout`) or
/// hit the first entry (`grpc-status` in tonic's trailers). A standard
/// name (most request headers) differs from our custom ones on its tag,
/// without its text being read.
#[inline(always)]
pub(crate) fn find<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Option<&'a HeaderValue> {
    const SCAN_UP_TO: usize = 8;
    if headers.keys_len() > SCAN_UP_TO {
        return headers.get(name);
    }
    match headers.keys().position(|key| key == name)? {
        // The first value of the first entry is the first `iter` yields.
        0 => headers.iter().next().map(|(_, value)| value),
        _ => headers.get(name),
    }
}

/// Decodes `grpc-message`'s percent-encoding (invalid UTF-8 is replaced).
pub(crate) fn percent_decode(encoded: &[u8]) -> String {
    let mut decoded = Vec::with_capacity(encoded.len());
    let mut i = 0;
    while i < encoded.len() {
        let byte = encoded[i];
        let escaped = match encoded.get(i + 1..i + 3) {
            Some(&[hi, lo]) if byte == b'%' => hex(hi).zip(hex(lo)),
            _ => None,
        };
        match escaped {
            Some((hi, lo)) => {
                decoded.push(hi << 4 | lo);
                i += 3;
            }
            None => {
                decoded.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(decoded)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

fn hex(digit: u8) -> Option<u8> {
    char::from(digit).to_digit(16).map(|d| d as u8)
}

/// Parses gRPC's `grpc-timeout` (`1-8 digits` + unit `H M S m u n`).
pub(crate) fn parse_grpc_timeout(value: &[u8]) -> Option<Duration> {
    let (unit, digits) = value.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let amount = digits
        .iter()
        .fold(0u64, |acc, d| acc * 10 + u64::from(d - b'0'));
    Some(match unit {
        b'H' => Duration::from_secs(amount * 3600),
        b'M' => Duration::from_secs(amount * 60),
        b'S' => Duration::from_secs(amount),
        b'm' => Duration::from_millis(amount),
        b'u' => Duration::from_micros(amount),
        b'n' => Duration::from_nanos(amount),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeout_units() {
        assert_eq!(parse_grpc_timeout(b"5S"), Some(Duration::from_secs(5)));
        assert_eq!(parse_grpc_timeout(b"20m"), Some(Duration::from_millis(20)));
        assert_eq!(parse_grpc_timeout(b"1H"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_grpc_timeout(b"7n"), Some(Duration::from_nanos(7)));
        assert_eq!(parse_grpc_timeout(b"S"), None);
        assert_eq!(parse_grpc_timeout(b"123456789S"), None);
        assert_eq!(parse_grpc_timeout(b"1x"), None);
        assert_eq!(parse_grpc_timeout(b""), None);
    }

    #[test]
    fn find_scans_small_maps_and_hashes_large_ones() {
        let mut headers = HeaderMap::new();
        headers.insert("grpc-status", HeaderValue::from_static("5"));
        assert_eq!(find(&headers, &GRPC_STATUS).unwrap(), "5");
        assert!(find(&headers, &GRPC_MESSAGE).is_none());
        headers.append("grpc-status", HeaderValue::from_static("6"));
        headers.insert("grpc-message", HeaderValue::from_static("m"));
        assert_eq!(find(&headers, &GRPC_STATUS).unwrap(), "5", "first value");
        assert_eq!(find(&headers, &GRPC_MESSAGE).unwrap(), "m", "later entry");
        for i in 0..20 {
            let name = HeaderName::try_from(format!("x-{i}")).unwrap();
            headers.insert(name, HeaderValue::from_static("v"));
        }
        assert_eq!(find(&headers, &GRPC_STATUS).unwrap(), "5");
        assert!(find(&headers, &GRPC_TIMEOUT).is_none());
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode(b"no%20such%20echo"), "no such echo");
        assert_eq!(percent_decode(b"100%"), "100%");
        assert_eq!(percent_decode(b"%zz%4"), "%zz%4");
        assert_eq!(percent_decode(b"%E2%9C%93"), "\u{2713}");
        assert_eq!(percent_decode(b"%FF"), "\u{FFFD}");
    }

    #[test]
    fn grpc_content_types() {
        let with = |value: &'static str| {
            let mut headers = HeaderMap::new();
            headers.insert(CONTENT_TYPE, HeaderValue::from_static(value));
            is_grpc(&headers)
        };
        for grpc in [
            "application/grpc",
            "application/grpc+proto",
            "application/grpc;charset=utf-8",
            "Application/GRPC+json",
        ] {
            assert!(with(grpc), "{grpc}");
        }
        for other in [
            "application/grpc-web",
            "application/grpc-web+proto",
            "application/grpc-web-text",
            "application/grpcx",
            "application/json",
            "text/plain",
            "application/gr",
        ] {
            assert!(!with(other), "{other}");
        }
        assert!(!is_grpc(&HeaderMap::new()), "no content-type");
    }

    #[test]
    fn accept_encoding_lists() {
        let mut headers = HeaderMap::new();
        let none = AcceptedEncodings::of_request(&headers);
        assert!(!none.accepts(b"gzip"));
        assert!(none.accepts(b"identity"));
        let listed = HeaderValue::from_static("gzip,zstd, identity");
        headers.insert(GRPC_ACCEPT_ENCODING, listed);
        let listed = AcceptedEncodings::of_request(&headers);
        assert!(listed.accepts(b"gzip"));
        assert!(listed.accepts(b"zstd"));
        assert!(!listed.accepts(b"deflate"));
        assert!(!listed.accepts(b"snappy"));
    }
}
